"""compare's task size N (analysis/population.py) is the N the runs recorded (their entry's ``available``, by the
published verdict's rule: baselines.items_total), so the same two run folders give the same intervals wherever
the data file is; two runs that recorded different Ns give no N, and a note says so."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from abricot_local.analysis import compare as cmp
from abricot_local.analysis.loading import load_run
from abricot_local.cli import cli

TASK = "abricot_inc"


@pytest.fixture(scope="module")
def place(tmp_path_factory, abricot_file):
    """Two --sample 12 fake runs (fakeA, fakeB) of abricot_inc, made with --data on a copy of ABRICOT's file."""
    root = tmp_path_factory.mktemp("recorded_n")
    data = root / "d" / abricot_file.name
    data.parent.mkdir()
    shutil.copy2(abricot_file, data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))  # empty: the cache holds no copy of the data
        mp.setenv("ABRICOT_OFFLINE", "1")
        for model in ("fakeA", "fakeB"):
            r = CliRunner().invoke(cli, ["run", model, "--backend", "fake", "--n-ctx", "8192", "--tasks", TASK,
                                         "--data", f"abricot={data}", "--sample", "12", "--out", str(root / model)])
            assert r.exit_code == 0, r.output
    return root


@pytest.fixture()
def runs(place, monkeypatch):
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(place / "cache"))
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    return place


def _available(folder) -> int:
    return json.loads((folder / "results.json").read_text(encoding="utf-8"))["tasks"][TASK]["available"]


def _accuracy(c):
    (e,) = [e for e in c.equivalence if e.metric == "accuracy"]
    return e.total, e.ci90, e.kind, e.items, e.lines


def test_n_is_the_recorded_one_wherever_the_data_is(runs):
    p = runs
    here = cmp.compare([load_run(p / "fakeA"), load_run(p / "fakeB")])
    assert here.totals == {TASK: _available(p / "fakeA")} and _available(p / "fakeA") > 12
    (p / "d").rename(p / "d_moved")
    try:
        moved = cmp.compare([load_run(p / "fakeA"), load_run(p / "fakeB")])
    finally:
        (p / "d_moved").rename(p / "d")
    assert moved.totals == here.totals
    assert _accuracy(moved) == _accuracy(here) and moved.totals[TASK] == _accuracy(here)[0]
    assert f"for the task's {here.totals[TASK]:,} items, 12 compared" in " ".join(_accuracy(moved)[4])


def test_runs_that_recorded_different_ns_give_none_and_say_so(runs, tmp_path):
    p = runs
    other = shutil.copytree(p / "fakeB", tmp_path / "fakeB")
    doc = json.loads((other / "results.json").read_text(encoding="utf-8"))
    doc["tasks"][TASK]["available"] -= 1
    (other / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    c = cmp.compare([load_run(p / "fakeA"), load_run(other)])
    assert c.totals == {TASK: None} and _accuracy(c)[0] is None
    (note,) = [n for n in c.notes if "recorded different numbers of items" in n]
    n = _available(p / "fakeA")
    assert note.startswith(f"task {TASK}: ") and f"fakeA {n}, fakeB {n - 1}" in note
    assert note.endswith("its verdicts are for items like these")
