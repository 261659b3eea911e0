"""What a new user tripped on (issue 22, items 1, 3, 5, 8, 9; item 12 is in test_run_state.py):
short missing-data errors, --sample over a task's size, close did-you-means, task descriptions
and item counts, the tests' own skip reason. Fake backend and invented data only."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import realdata
from abricot_local.models import fetch
from abricot_local.cli import cli
from abricot_local.errors import MissingDataError, UnknownModelError
from abricot_local.names import close_names, distance
from conftest import FIXTURE
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def shown(text: str, home: str) -> str:
    """``text`` as its length is judged: the cache as a user's, a URL (one unbreakable word) as URL."""
    import re

    return re.sub(r"https?://\S+?(?=\)|\s|$)", "URL", text.replace(home, "~/.cache/abricot-local"))


@pytest.fixture
def folded(monkeypatch):
    """Errors folded to 120 columns, as on a terminal (a pipe gets whole lines)."""
    monkeypatch.setattr("abricot_local.cli.app.FOLD", True)


# -- 1. a missing-data error: short lines (issue 30: each file's URL on a line of its own) --------
@pytest.mark.parametrize("tasks", [[], ["--tasks", "discotex"], ["--tasks", "abricot"]])
def test_missing_data_is_short_lines_what_get_files_offline(tasks, folded):
    r = invoke("run", "fake", "--backend", "fake", *tasks)
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    home = str(fetch.cache_dir())  # in a test a tmp folder; a user's is ~/.cache/abricot-local
    assert all(len(shown(ln, home)) <= 120 for ln in lines), r.output
    what = lines[0]
    get = next(ln for ln in lines if ln.startswith("  get it:"))
    offline = next(ln for ln in lines if ln.startswith("  offline:"))  # the last: only its fold follows it
    assert all(ln.startswith("    ") for ln in lines[lines.index(offline) + 1:])
    assert what.startswith("error: ") and "no data" in what or "no task has its data" in what
    cause = r.output.split("  get it:")[0]  # where it looked, and why nothing was downloaded
    assert str(fetch.cache_dir() / "data") in cause and "offline" in cause
    assert "abricot-local data pull " in get
    assert offline.split(":", 1)[0].strip() == "offline" and ("--data-dir DIR" in offline or "--data abricot=FILE" in offline)
    if not tasks:  # every task at once: one command line gets them all
        assert get.split(":", 1)[1].split()[:9] == ["abricot-local", "data", "pull", "abricot", "&&", "abricot-local",
                                                    "data", "pull", "discotex"]
    if tasks != ["--tasks", "abricot"]:  # DISCOTEX's two files, by name under their URL's folder
        assert "      discotex_1_ted_test_set_release.tsv" in lines and "      discotex_1_wiki_test_set_release.tsv" in lines
    assert len(shown(r.output, home)) < 900


def test_a_given_folder_without_the_files_says_so(tmp_path):
    with pytest.raises(MissingDataError) as err:
        from abricot_local.tasks.selection import select_tasks
        from abricot_local.tasks.base import TaskOptions

        select_tasks("discotex", TaskOptions(data_dir=str(tmp_path)))[0][0].items()
    text = str(err.value)
    assert text.count("\n") == 2 and "lacks discotex_1_ted_test_set_release.tsv" in text and "(given with data_dir)" in text
    r = invoke("run", "fake", "--backend", "fake", "--data-dir", tmp_path / "nope")
    text = " ".join(ln.strip() for ln in r.output.splitlines())  # folded at 120 columns
    assert r.exit_code == 2 and text == f"error: no task has its data here: --data-dir {tmp_path / 'nope'}: folder not found"


def test_skipped_tasks_say_how_to_get_their_data_in_one_line_each(tmp_path):
    data = write_discotex(tmp_path / "d", 4)
    r = invoke("run", "fake", "--backend", "fake", "--data-dir", data, "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    skipped = [ln for ln in r.stderr.splitlines() if ln.startswith("skipped ")]
    assert skipped == [f"skipped {t}: no data (get it: abricot-local data pull abricot; offline: --data abricot=FILE "
                       "(dataset_it.csv, the ABRICOT release))" for t in ("abricot_abs", "abricot_inc")]


# -- 3. --sample larger than a task: warned, and what was done recorded -------------------------
def test_sample_over_the_task_size_warns_and_records_the_items_drawn(tmp_path):
    data = write_discotex(tmp_path / "d", 9)  # 18 items
    out = tmp_path / "big"
    r = invoke("run", "fake", "--backend", "fake", "--data-dir", data, "--tasks", "discotex", "--sample", 100,
               "--out", out)
    assert r.exit_code == 0, r.output
    note = "--sample 100 asks for more items than the task has: all 18 are scored"
    assert f"warning: discotex: {note}" in r.stderr  # before the run
    assert f"  warning: {note}" in r.stdout  # and in the summary
    doc = json.loads((out / "results.json").read_text())
    assert doc["config"]["sample"] == 100  # as given: a resume compares it
    entry = doc["tasks"]["discotex"]
    assert entry["sampled"] == 18 == entry["n"] and note in entry["warnings"]
    assert invoke("check", out).exit_code == 0
    small = tmp_path / "small"
    r = invoke("run", "fake", "--backend", "fake", "--data-dir", data, "--tasks", "discotex", "--sample", 5,
               "--out", small)
    entry = json.loads((small / "results.json").read_text())["tasks"]["discotex"]
    assert entry["sampled"] == 5 == entry["n"] and not any("--sample" in w for w in entry["warnings"])
    assert "warning: discotex: --sample" not in r.stderr
    unsampled = tmp_path / "all"
    invoke("run", "fake", "--backend", "fake", "--data-dir", data, "--tasks", "discotex", "--out", unsampled)
    assert "sampled" not in json.loads((unsampled / "results.json").read_text())["tasks"]["discotex"]


# -- 5. did you mean: edit distance only, close matches only -----------------------------------
def test_did_you_mean_suggests_only_close_spellings():
    tasks = ["abricot", "abricot_abs", "abricot_inc", "discotex"]
    assert close_names("discotx", tasks) == ["discotex"]  # not abricot
    assert close_names("DiscoTex", tasks) == ["discotex"]
    assert close_names("abricto", tasks) == ["abricot"]  # two letters swapped: one edit
    assert close_names("abricot_ab", tasks) == ["abricot_abs"]
    assert close_names("capitali", tasks) == [] and close_names("disc", tasks) == []
    assert distance("discotx", "abricot") > 3 and distance("ab", "ba") == 1


def test_did_you_mean_in_the_cli_for_tasks_and_model_aliases():
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotx")
    assert r.exit_code == 2 and "unknown task 'discotx'. Did you mean: discotex? Known tasks:" in r.output
    from abricot_local.models.registry import load_registry, lookup

    registry = load_registry()
    with pytest.raises(UnknownModelError, match=r"Did you mean: gemma-3-270m\?"):
        lookup("gemma-3-270", registry)
    with pytest.raises(UnknownModelError) as err:
        lookup("discotx", registry)
    assert "Did you mean" not in str(err.value)


# -- 8. tasks: every description, and the item count wherever the data is found ----------------
def test_tasks_shows_each_description_and_the_items_of_data_found_in_the_cache():
    write_discotex(fetch.cache_dir() / "data" / "discotex", 4)  # as `data pull discotex` leaves it
    rows = {row["name"]: row for row in json.loads(invoke("tasks", "--json").stdout)}
    assert all(row["description"] for row in rows.values())
    assert "abstract" in rows["abricot_abs"]["description"] and "inclusive" in rows["abricot_inc"]["description"]
    assert rows["discotex"]["items"] == 8
    text = invoke("tasks").stdout
    assert "items: 8 " in text and "abricot_abs  (group abricot): ABRICOT" in text
    missing = [ln for ln in text.splitlines() if "data: missing:" in ln]
    assert len(missing) == 2 and all("get it: abricot-local data pull abricot" in ln for ln in missing)


# -- 9. the tests' own skip reason: short, in the project's words, folded into one line --------
def test_missing_test_data_is_one_short_skip_reason_reported_once(tmp_path, monkeypatch):
    for name in ("GIVEN", "SHARED", "CACHE"):
        monkeypatch.setattr(realdata, name, tmp_path / name.lower())
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setitem(realdata.FAILED, "toy data", "")

    def refuse(dest):
        raise OSError("no network here")

    ds = realdata.DataSet("toy data", "data/toy", (("a.txt", "0" * 64),), "nowhere", refuse)
    with pytest.raises(pytest.skip.Exception) as skipped:
        realdata.require(ds)
    reason = str(skipped.value)
    assert len(reason) <= 110 and "laid out like" not in reason and "ABRICOT_TEST_DATA=DIR" in reason, reason
    assert "no network here" in realdata.FAILED["toy data"]  # the whole story, for the summary at the end

    import conftest

    class Report:
        skipped = True

        def __init__(self, line):
            self.longrepr = (f"tests/test_{line}.py", line, f"Skipped: {reason}")

    folded = []
    for line in (10, 20):  # two tests in two files skip for the same data: one location, one line of -rs
        rep = Report(line)
        hook = conftest.pytest_runtest_makereport(None, None)
        next(hook)
        with pytest.raises(StopIteration):
            hook.send(type("Outcome", (), {"get_result": lambda self, r=rep: r})())
        folded.append(rep.longrepr)
    assert folded[0] == folded[1] == (*realdata.skip_location(), f"Skipped: {reason}")
    assert folded[0][0].endswith("realdata.py")


# -- issue 30, item 4: check of a run whose data file is not here --------------------------------
def test_check_names_the_option_for_missing_data_shows_the_recorded_path_as_recorded_and_finds_the_cache(tmp_path):
    import shutil

    data = write_discotex(tmp_path / "elsewhere", 4)
    out = tmp_path / "run"
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--out", out)
    assert r.exit_code == 0, r.output
    moved = tmp_path / "moved"
    shutil.move(str(data), moved)  # as a committed run made on another machine: its recorded folder is not here
    r = invoke("check", out)
    assert r.exit_code != 0
    text = r.output
    assert "give it with the option shown in --help" not in text and "--data-dir DIR" in text
    assert f"\n    {data / 'discotex_1_ted_test_set_release.tsv'}\n" in text  # as recorded: not as this user's ~
    assert "abricot-local data pull discotex" in text and "discotex_1_wiki_test_set_release.tsv" in text
    assert invoke("check", out, "--data-dir", moved).exit_code == 0
    shutil.copytree(moved, fetch.cache_dir() / "data" / "discotex")  # where `data pull discotex` puts it
    r = invoke("check", out)
    assert r.exit_code == 0, r.output  # found in this machine's data cache, SHA-256 verified


# -- issue 30, item 9: a typo in a model's name is refused before anything heavy loads ----------
UNKNOWN_MODEL = ("import sys; from abricot_local.cli import cli\n"
                 "try:\n    cli(['run', 'no-such-model'], prog_name='abricot-local')\n"
                 "except SystemExit as e:\n    print(e.code, sorted(m for m in ('llama_cpp', 'scipy', 'pandas', 'matplotlib',"
                 " 'abricot_local.metrics', 'abricot_local.tasks.discotex', 'abricot_local.tasks.selection',"
                 " 'abricot_local.analysis.baselines') if m in sys.modules))")


def early_children(tmp_path_factory) -> dict:
    """UNKNOWN_MODEL's fresh process (a private home, cache and config), started by conftest once the tests are
    collected, beside the other tests (conftest.start_early)."""
    import os
    import sys
    from pathlib import Path

    from conftest import Early, isolated_env

    root = Path(__file__).resolve().parents[1]
    tmp_path = tmp_path_factory.mktemp("unknown-model")
    env = {**os.environ, **isolated_env(tmp_path), "PYTHONPATH": str(root), "HOME": str(tmp_path),
           "ABRICOT_CACHE_DIR": str(tmp_path / "c")}
    return {"unknown_model": Early([sys.executable, "-c", UNKNOWN_MODEL], env=env, cwd=tmp_path, timeout=120)}


@pytest.fixture(scope="module")
def unknown_model(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    yield child
    child.close()


def test_an_unknown_model_is_refused_without_loading_llama_cpp_scipy_or_the_tasks_data(unknown_model):
    r = unknown_model.result()
    assert r.stdout.split(None, 1) == ["2", "[]\n"], (r.stdout, r.stderr)
    assert "unknown model 'no-such-model'" in r.stderr


def test_what_a_run_says_on_stderr_is_folded_as_an_error_is(folded, tmp_path):
    """--limit's caution (a hook's line, 142 columns whole) folded to 120 on a terminal, as errors are."""
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}",
               "--limit", "5", "--dry-run")
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    start = next(k for k, ln in enumerate(lines) if ln.startswith("caution: --limit 5 scores the first 5 items"))
    assert len(lines[start]) <= 120 and lines[start + 1].startswith("  ") and "--sample N" in lines[start + 1]
