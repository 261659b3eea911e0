"""An lm-eval output written through abricot-local's lm-eval model and tasks reads back on its own, as a run's export
does (analysis/lm_eval_data.py): the data lm-eval's metadata gave its tasks, which it records in each task's config
(``metadata.data``, per data key, or ``metadata.data_dir``), is where its items are found when none is given; the
data given wins; a recorded path that is gone is named, gone (an export's recorded file too).

The output is written once by real lm-eval (0.4.x) on the fake backend (`abricot-local lm-eval ... --metadata
'{"data": {...}}'`), the data linked into a folder of its own that the tests move or change; the other forms of the
metadata are that output's results file rewritten as lm-eval writes them.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

# lm-eval reads its data through `datasets`, which reads these when first imported (its cache: conftest.py)
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

import pytest  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from abricot_local.cli import cli  # noqa: E402
from abricot_local.errors import ResultsError  # noqa: E402
from test_lm_eval_export import _invoke, lm_eval_folder  # noqa: E402

TASKS = ("abricot_abs_paper", "discotex_card")


@pytest.fixture(scope="module")
def written(abricot_file, discotex_dir, tmp_path_factory):
    """(the output's model folder, the data folder it was given): `abricot-local lm-eval` of two shipped tasks, 2
    items each, the data given per key in lm-eval's metadata."""
    with lm_eval_folder("lm_data", abricot_file, discotex_dir, tmp_path_factory) as (folder, data):
        given = {"data": {"abricot": str(data / abricot_file.name), "discotex": str(data)}}
        _invoke("lm-eval", "fake", "--tasks", ",".join(TASKS), "--model_args", "backend=fake,n_ctx=4096",
                "--metadata", json.dumps(given), "--limit", 2, "--log_samples", "--output_path", "out",
                "--batch_size", 8)
        (out,) = (folder / "out").iterdir()
        return out, data


def _copy(written, tmp_path: Path, change=None) -> Path:
    """The output copied under ``tmp_path``, each task's ``metadata`` changed by ``change(metadata)``."""
    out = shutil.copytree(written[0], tmp_path / "out")
    (path,) = out.glob("results_*.json")
    doc = json.loads(path.read_text(encoding="utf-8"))
    for name in TASKS:
        if change is not None:
            change(doc["configs"][name]["metadata"])
    path.write_text(json.dumps(doc), encoding="utf-8")
    return out


def _same(a, b) -> None:
    assert a.tasks == b.tasks and len(a.tasks) == 2
    for key in a.tasks:
        assert [(s.id, s.logprobs) for s in a.samples_of(key)] == [(s.id, s.logprobs) for s in b.samples_of(key)]
        assert json.dumps(a.record.tasks[key].metrics, sort_keys=True) == json.dumps(b.record.tasks[key].metrics,
                                                                                   sort_keys=True)  # NaN alike


def test_the_output_reads_back_alone_from_the_data_its_metadata_records(written):
    """No data given, none in the cache: each task's items come from the path lm-eval's metadata recorded, the same
    run as with the data given; its entries record the files read (path, SHA-256) as before."""
    import abricot_local
    from abricot_local.hashing import sha256_file

    out, data = written
    alone = abricot_local.load_run(out)
    _same(alone, abricot_local.load_run(out, data_dir=str(data)))
    abs_files = alone.record.tasks["abricot_abs"].data
    assert [Path(f.path).parent for f in abs_files] == [data]
    assert all(f.sha256 == sha256_file(Path(f.path)) for f in abs_files)
    assert [r.tasks for r in abricot_local.load_runs(str(out))] == [alone.tasks]  # the same reader


def test_a_recorded_data_dir_is_read_as_the_tasks_read_it(written, tmp_path):
    """``--metadata '{"data_dir": DIR}'``: the folder recorded as the output's data folder."""
    import abricot_local

    def to_dir(meta):
        meta["data_dir"] = meta.pop("data")["discotex"]

    out = _copy(written, tmp_path, to_dir)
    _same(abricot_local.load_run(out), abricot_local.load_run(written[0]))


def test_the_data_given_wins_the_recorded_used_for_the_rest(written, tmp_path):
    """The data given for one key wins over the recorded path (here a file that is no ABRICOT data), the
    recorded path serves the task it is not given for; a data folder given: nothing recorded used."""
    import abricot_local

    out, data = written
    wrong = sorted(p for p in data.iterdir() if p.suffix == ".tsv")[0]

    def elsewhere(meta):
        meta["data"]["abricot"] = str(wrong)

    changed = _copy(written, tmp_path, elsewhere)
    with pytest.raises(ResultsError):
        abricot_local.load_run(changed)  # the recorded file is not the task's data
    real = next(p for p in data.iterdir() if p.suffix == ".csv")
    back = abricot_local.load_run(changed, data={"abricot": str(real)})
    _same(back, abricot_local.load_run(out))
    assert back.record.tasks["abricot_abs"].data[0].path == str(real)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ResultsError, match="abricot_abs_paper"):
        abricot_local.load_run(out, data_dir=str(empty))  # a folder given: the recorded paths are not used


def test_a_recorded_path_that_is_gone_is_named_gone(written, tmp_path):
    """The recorded file moved away: the error names the recorded path and says it no longer exists (not
    "not here"), with how to give the data, in the API's and the command line's words."""
    import abricot_local

    gone = str(tmp_path / "moved" / "dataset_it.csv")

    def moved(meta):
        meta["data"]["abricot"] = gone

    out = _copy(written, tmp_path, moved)
    with pytest.raises(ResultsError) as err:
        abricot_local.load_run(out)
    said = str(err.value)
    assert "abricot_abs_paper" in said and f"{gone} (its metadata's data for abricot) no longer exists" in said
    assert "is not here" not in said and 'data={"abricot": PATH}' in said
    r = CliRunner().invoke(cli, ["report", str(out)])
    assert r.exit_code != 0 and f"{gone} (its metadata's data for abricot) no longer exists" in r.output
    assert "--data abricot=PATH" in r.output


def test_report_and_compare_read_the_output_alone(written, tmp_path):
    out, _ = written
    shutil.copytree(out, tmp_path / "again")
    assert "abricot_abs" in _invoke("report", out)
    doc = json.loads(_invoke("compare", out, tmp_path / "again", "--format", "json"))
    assert {m["n_common"] for m in doc["matches"]} == {2}


def test_an_export_whose_recorded_file_is_gone_names_it_gone(finished_run, tmp_path):
    """The same rule for a run's export (`report --format lm-eval`): its recorded data file gone, named."""
    import abricot_local
    from conftest import FIXTURE

    run = abricot_local.load_run(finished_run("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data",
                                              f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "2"))
    where = Path(run.to_lm_eval(tmp_path / "exp"))
    (path,) = (where if where.is_dir() else where.parent).glob("results_*.json")
    gone = str(tmp_path / "moved.csv")
    path.write_text(path.read_text(encoding="utf-8").replace(json.dumps(str(FIXTURE)), json.dumps(gone)),
                    encoding="utf-8")
    with pytest.raises(ResultsError, match=f"{gone} \\(its metadata's data, a file its run read\\) no longer"):
        abricot_local.load_run(where)
