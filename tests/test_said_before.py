"""What a command owes the user before its verdicts or its output: compare says once why a task's verdicts have no
interval for the task's own value (its N neither recorded by the runs nor counted from the data here) and which
option gives the data, in each door's words (analysis/population.py); `report --plot` without matplotlib is refused
before anything is printed (report/plots.py needs_matplotlib)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli

REFERENCE = Path(__file__).parent / "reference"
RUNS = (REFERENCE / "gemma-3-270m", REFERENCE / "smollm2-135m")  # older records: no `available`, data elsewhere
NOTE = "note: task discotex: its items (N) not known here, so no interval for the task's own value"
OWN = "for the task's 1,600 items, 40 compared"


@pytest.fixture()
def elsewhere(tmp_path):
    """The reference runs, copied with the data files they recorded moved to a folder that does not exist (their N
    neither recorded nor counted, whatever this machine's cache holds)."""
    import shutil

    out = []
    for run in RUNS:
        copy = tmp_path / run.name
        shutil.copytree(run, copy)
        doc = json.loads((copy / "results.json").read_text(encoding="utf-8"))
        for f in doc["tasks"]["discotex"]["data"]:
            f["path"] = str(tmp_path / "gone" / Path(f["path"]).name)
        (copy / "results.json").write_text(json.dumps(doc, ensure_ascii=False, indent=2), encoding="utf-8")
        out.append(copy)
    return tuple(out)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_compare_says_once_why_there_is_no_whole_task_interval_and_how_to_get_it(elsewhere, discotex_dir):
    r = invoke("compare", *elsewhere, "--margin", "0.05")
    text = r.stdout.replace("\n  ", " ").replace("\n    ", " ")
    assert r.exit_code == 0 and text.count(NOTE) == 1, r.output
    note = text[text.index(NOTE):].split("\n")[0]
    assert "the runs compared recorded no count of them" in note and "no data in" in note
    assert "--data-dir DIR (the folder holding the data they recorded) counts them" in note
    assert note.endswith("its verdicts are for items like these") and OWN not in text
    given = invoke("compare", *elsewhere, "--margin", "0.05", "--data-dir", discotex_dir)
    assert given.exit_code == 0 and NOTE not in given.stdout, given.output
    assert OWN in given.stdout.replace("\n    ", " ")


def test_the_api_says_it_in_its_own_words(elsewhere):
    import abricot_local as al

    text = str(al.compare(*map(str, elsewhere), margin=0.05)).replace("\n  ", " ")
    assert text.count(NOTE) == 1 and "data_dir=DIR (the folder holding the data they recorded)" in text
    assert "--data-dir" not in text


def test_report_plot_without_matplotlib_is_refused_before_any_output(tmp_path, monkeypatch):
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)  # `import matplotlib` fails, as where it is not installed
    r = invoke("report", RUNS[0], "--plot", tmp_path / "figs")
    assert r.exit_code == 2 and r.stdout == "" and not (tmp_path / "figs").exists()
    assert r.stderr.strip() == 'error: --plot needs matplotlib: pip install "abricot-local[plot]"'
    from abricot_local.errors import UsageError
    from abricot_local.report.plots import needs_matplotlib

    with pytest.raises(UsageError, match="plot_dir needs matplotlib"):  # the API's words: plot_dir
        needs_matplotlib()
