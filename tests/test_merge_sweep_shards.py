"""`merge` of a sweep's shards (`run A B --shard K/N`) with a model's shard in no folder given prints the call that
scores it, with the data files the shards recorded, as a single model's merge does (was: the missing shard named in
words only); the call works as printed and its folder merges with the others. The data files a run recorded are read
by one rule (tasks/recorded_data.py) for merge's advice and for the lm-eval outputs read beside runs: tasks of one
data key that recorded different files are each found again by their own name (lm_eval_input's copy kept the first
task's files for every task of the key). Fake backend, in-process."""

from __future__ import annotations

import shutil

import pytest

import abricot_local as al
from abricot_local.analysis.loading import load_run
from abricot_local.analysis.lm_eval_input import recorded_data
from abricot_local.record import RESULTS
from conftest import FIXTURE
from test_runs_shards import commands, invoke


def sweep(*extra):
    return ("run", "fakeA", "fakeB", "--backend", "fake", "--n-ctx", "8192", "--tasks", "abricot_inc", "--data",
            f"abricot={FIXTURE}", "--sample", "4", *extra)


@pytest.fixture
def shard1(finished_run, tmp_path):
    """Shard 1/2 of a sweep of two models, copied."""
    return finished_run(*sweep("--shard", "1/2"), into=tmp_path / "S1")


def test_a_sweeps_missing_shards_are_given_the_calls_that_score_them(shard1, tmp_path):
    r = invoke("merge", shard1, "--out", tmp_path / "m")
    assert r.exit_code == 2 and not (tmp_path / "m").exists(), r.output
    calls = commands(r.output, "run")
    assert [c[1] for c in calls] == ["fakeA", "fakeB"], r.output  # each model's shard 2/2
    outs = {c[1]: c[c.index("--out") + 1] for c in calls}
    assert outs == {m: str(tmp_path / "shard-2-of-2" / m) for m in ("fakeA", "fakeB")}  # beside, as a sweep writes
    for call in calls:
        assert f"abricot={FIXTURE}" in call and call[call.index("--shard") + 1] == "2/2", call
    assert "2/2 of that run are in no folder given" in " ".join(r.output.split())
    assert invoke(*calls[1]).exit_code == 0  # fakeB's, as printed
    again = invoke("merge", shard1, tmp_path / "shard-2-of-2", "--out", tmp_path / "m").output
    said, out = " ".join(again.split()), tmp_path / "shard-2-of-2" / "fakeB"
    assert f"{shard1 / 'fakeB'} and {out}, into {tmp_path / 'm' / 'fakeB'}" in said, said
    assert [c[1] for c in commands(again, "run")] == ["fakeA"]  # only the shard still in no folder given
    merged = al.merge(shard1 / "fakeB", out, out=tmp_path / "m" / "fakeB")
    assert merged.record.config.shard is None and (tmp_path / "m" / "fakeB" / RESULTS).is_file()


def test_the_api_gives_a_sweeps_missing_shards_their_evaluate_calls(shard1, tmp_path):
    with pytest.raises(al.AbricotError) as caught:
        al.merge(shard1, out=tmp_path / "m")
    lines = [ln.strip() for ln in str(caught.value).splitlines() if ln.strip().startswith("abricot_local.evaluate(")]
    assert [ln.split(",")[0] for ln in lines] == ["abricot_local.evaluate('fakeA'", "abricot_local.evaluate('fakeB'"]
    assert all(f"data={{'abricot': '{FIXTURE}'}}" in ln and "shard='2/2'" in ln for ln in lines), lines


def test_one_rule_reads_the_data_files_a_run_recorded(tmp_path):
    f1, f2 = tmp_path / "f1.csv", tmp_path / "f2.csv"
    for f in (f1, f2):
        shutil.copyfile(FIXTURE, f)
    r = invoke("run", "fake", "--backend", "fake", "--n-ctx", "8192", "--tasks", "abricot_inc,abricot_abs", "--data",
               f"abricot_inc={f1}", "--data", f"abricot_abs={f2}", "--sample", "2", "--shard", "1/2", "--out",
               tmp_path / "T")
    assert r.exit_code == 0, r.output
    pairs = {"abricot_inc": str(f1), "abricot_abs": str(f2)}  # one key, two files: each task by its own name
    assert dict(recorded_data([load_run(tmp_path / "T")])) == pairs
    advised = commands(invoke("merge", tmp_path / "T", "--out", tmp_path / "m").output, "run")[0]
    assert {advised[k + 1] for k, w in enumerate(advised) if w == "--data"} == {f"{k}={v}" for k, v in pairs.items()}
    f2.unlink()  # a task's files not here: neither reader names them; merge says to add them
    assert dict(recorded_data([load_run(tmp_path / "T")])) == {"abricot_inc": str(f1)}
    r = invoke("merge", tmp_path / "T", "--out", tmp_path / "m")
    advised = commands(r.output, "run")[0]  # abricot_inc's own pair: a key's would win over the one to add
    assert {advised[k + 1] for k, w in enumerate(advised) if w == "--data"} == {f"abricot_inc={f1}"}
    assert f"abricot_abs's data files are not here (it recorded {f2})" in " ".join(r.output.split()), r.output
