"""compare's task size N (analysis/population.py) when the data a run recorded is not on this machine (a run
folder copied from elsewhere): counted from the data the user gives (`compare --data-dir DIR`, `--data
KEY=PATH`, population.GivenData), only when it is the data the run recorded (its SHA-256); the recorded files,
where they are here, first; a path given that is not here refused in one line. A run that records its N (its
entry's ``available``) is read by it (tests/test_recorded_n.py): these runs are made as older records, without it."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

import planned
from abricot_local.analysis import compare as cmp
from abricot_local.analysis.loading import load_run
from abricot_local.analysis.population import GivenData, counted, given_data, task_total
from abricot_local.backends.options import ScoringOptions
from abricot_local.cli import cli
from abricot_local.errors import DataError
from abricot_local.models.given import Given
from abricot_local.run.session import run_plan
from abricot_local.tasks import make_task
from abricot_local.tasks.base import TaskOptions


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _copy(src, dest):
    dest.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        if f.is_file():
            shutil.copy2(f, dest / f.name)
    return dest


def unrecorded(run):
    """``run`` as a record older than ``available`` (its N counted from the data, not read off the record)."""
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    for entry in doc["tasks"].values():
        entry.pop("available", None)
    (run / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    return run


@pytest.fixture(scope="module")
def place(tmp_path_factory, discotex_dir):
    """Two --sample 24 fake runs (fake, fake-7) made with --data-dir on a copy of the data that is then moved
    (the runs' recorded paths gone), one made on a copy that stays; and a copy of the data one row short."""
    root = tmp_path_factory.mktemp("population")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))  # empty: the cache holds no copy of the data
        mp.setenv("ABRICOT_OFFLINE", "1")
        gone, kept = _copy(discotex_dir, root / "gone" / "discotex"), _copy(discotex_dir, root / "kept" / "discotex")
        out = {}
        for name, data, model, seed in (("a", gone, "fake", 1234), ("b", gone, "fake-7", 7), ("k", kept, "fake", 1234)):
            plan = planned.plan_run(model=model, given=Given.of(ScoringOptions(n_ctx=8192, seed=seed), backend="fake"),
                                     task_spec="discotex", task_options=TaskOptions(data_dir=str(data.parent)),
                                     limit=None, sample=24)
            out[name] = unrecorded(run_plan(plan, root / "runs" / name).path.parent)
        moved = root / "moved"
        (root / "gone").rename(moved)
        short = _copy(moved / "discotex", root / "short" / "discotex")
        ted = short / "discotex_1_ted_test_set_release.tsv"
        ted.write_text("".join(ted.read_text(encoding="utf-8").splitlines(keepends=True)[:-1]), encoding="utf-8")
        whole = len(make_task("discotex", TaskOptions(data_dir=str(moved), allow_download=False)).items())
        yield {**out, "root": root, "moved": moved, "short": root / "short", "whole": whole}


@pytest.fixture()
def cache(place, monkeypatch):
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(place["root"] / "cache"))
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    return place


def test_n_from_the_data_given_when_the_recorded_files_are_gone(cache):
    p = cache
    runs = [load_run(p["a"]), load_run(p["b"])]
    assert p["whole"] == 1600 and not (p["moved"].parent / "gone").exists()
    assert cmp.compare(runs).totals == {"discotex": None}  # the recorded files gone, the cache empty: not known
    by_dir = cmp.compare(runs, given=GivenData(data_dir=str(p["moved"])))
    assert by_dir.totals == {"discotex": 1600}
    (e, *_) = [e for e in by_dir.equivalence if e.metric == "accuracy"]
    assert e.total == 1600 and "of the task's 1,600 items" in e.line
    by_pair = GivenData(data=(("discotex", str(p["moved"] / "discotex")),))
    assert task_total(runs, "discotex", by_pair) == 1600
    assert task_total(runs, "discotex", GivenData(data_dir=str(p["moved"] / "discotex"))) == 1600  # DIR itself
    assert task_total(runs, "discotex") is None


def test_data_given_that_is_not_the_data_recorded_counts_nothing(cache):
    """One row short of the recorded files (another SHA-256): N is not counted from it; the recorded files, where
    they are here, are read before the data given."""
    p = cache
    run, kept = load_run(p["a"]), load_run(p["k"])
    assert counted(run, "discotex", GivenData(data_dir=str(p["short"]))) is None
    assert counted(kept, "discotex", GivenData(data_dir=str(p["short"]))) == 1600
    assert counted(kept, "discotex") == 1600
    # the data given but not holding the task: the cache, as before (here empty)
    assert counted(run, "discotex", GivenData(data_dir=str(p["root"] / "runs"))) is None


def test_compare_command_counts_n_from_data_dir(cache):
    p = cache
    without = invoke("compare", p["a"], p["b"], "--format", "json")
    assert without.exit_code == 0, without.output
    assert json.loads(without.stdout)["task_items"] == {"discotex": None}
    for given in (("--data-dir", p["moved"]), ("--data", f"discotex={p['moved'] / 'discotex'}")):
        r = invoke("compare", p["a"], p["b"], "--format", "json", *given)
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["task_items"] == {"discotex": 1600}
    text = invoke("compare", p["a"], p["b"], "--data-dir", p["moved"]).stdout
    assert "for the task's 1,600 items, 24 compared" in text.replace("\n    ", " ")


def test_a_path_given_that_is_not_here_is_one_error_line(cache, tmp_path):
    p = cache
    for args, words in ((("--data-dir", tmp_path / "none"), f"--data-dir {tmp_path / 'none'}: folder not found"),
                        (("--data", f"discotex={tmp_path / 'none'}"), f"--data discotex={tmp_path / 'none'}: not found")):
        r = invoke("compare", p["a"], p["b"], *args)
        assert r.exit_code == 2 and words in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.output
    with pytest.raises(DataError, match="folder not found"):
        given_data((), str(tmp_path / "none"))
    assert given_data((("discotex", str(p["moved"])),), None) == GivenData((("discotex", str(p["moved"])),))
    assert not GivenData() and GivenData(data_dir=str(tmp_path))


def test_the_api_counts_n_from_data_dir_as_the_command_does(cache):
    import abricot_local as al

    p = cache
    runs = (al.load_run(p["a"]), al.load_run(p["b"]))
    assert al.compare(*runs).result.totals == {"discotex": None}
    assert al.compare(*runs, data_dir=p["moved"]).result.totals == {"discotex": 1600}
    assert al.compare(str(p["a"]), str(p["b"]), data={"discotex": p["moved"] / "discotex"}).result.totals \
        == {"discotex": 1600}
    with pytest.raises(DataError, match="data_dir=.*folder not found"):
        al.compare(*runs, data_dir=p["root"] / "none")


def _notes(result) -> list[str]:
    return [n for n in result.notes if "not counted from the data given" in n]


def test_data_given_that_counts_nothing_is_said_once_per_task_with_why(cache):
    """Data given that cannot count N (another SHA-256, a folder without the task's files, a file where the task
    wants a folder) is one note of compare's, naming why; nothing when no data is given or when it counted."""
    p = cache
    runs = [load_run(p["a"]), load_run(p["b"])]
    assert not _notes(cmp.compare(runs)) and not _notes(cmp.compare(runs, given=GivenData(data_dir=str(p["moved"]))))
    (short,) = _notes(cmp.compare(runs, given=GivenData(data_dir=str(p["short"]))))
    assert short.startswith(f"task discotex: its items (N) not counted from the data given ({p['short']}): not the "
                            "data the runs recorded (another SHA-256: discotex_1_ted_test_set_release.tsv)")
    assert short.endswith("its verdicts are for items like these")
    (elsewhere,) = _notes(cmp.compare(runs, given=GivenData(data_dir=str(p["root"] / "runs"))))
    assert "the task could not be built from it (discotex: " in elsewhere and "get it" not in elsewhere
    ted = p["moved"] / "discotex" / "discotex_1_ted_test_set_release.tsv"
    (a_file,) = _notes(cmp.compare(runs, given=GivenData(data=(("discotex", str(ted)),))))
    assert f"(discotex={ted}): the task could not be built from it (discotex: {ted} (given with --data discotex={ted}) is a " \
        "file, not a folder holding" in a_file, a_file
    # data given for another task only is not data given for this one: nothing said
    assert not _notes(cmp.compare(runs, given=GivenData(data=(("abricot", str(ted)),))))


def test_the_note_on_data_given_reaches_the_command_and_the_api(cache):
    import abricot_local as al

    p = cache
    text = invoke("compare", p["a"], p["b"], "--data-dir", p["short"]).stdout
    assert text.count("note: task discotex: its items (N) not counted from the data given") == 1
    assert "not the data the runs recorded (another SHA-256" in text.replace("\n  ", " ")
    assert "not counted from the data given" not in invoke("compare", p["a"], p["b"], "--data-dir", p["moved"]).stdout
    notes = json.loads(invoke("compare", p["a"], p["b"], "--format", "json", "--data-dir", p["short"]).stdout)["notes"]
    assert len([n for n in notes if "not counted from the data given" in n]) == 1
    assert len(_notes(al.compare(p["a"], p["b"], data_dir=p["short"]).result)) == 1
    assert "not counted from the data given" in str(al.compare(p["a"], p["b"], data_dir=p["short"]))


def test_data_given_for_runs_of_limits_first_items_is_said_unused():
    from types import SimpleNamespace

    from abricot_local.analysis.population import task_count
    from abricot_local.record import RunConfig

    view = SimpleNamespace(task=lambda name: SimpleNamespace(own_key="discotex", samples=()),
                           record=SimpleNamespace(config=RunConfig(limit=5)))
    assert task_count([view], "discotex") == (None, "")
    n, why = task_count([view], "discotex", GivenData(data_dir="/data"))
    assert n is None and why.startswith("task discotex: its items (N) not counted from the data given (/data): a run "
                                        "compared scored the task's first items (a limit), no draw of it")
