"""`check`'s default tolerance follows what the re-scoring can claim (run/check_tolerance.py): exactly the recorded
log-probs where it is bit-identical (the recorded kernel path, an exact engine, threads that do not matter), 1e-3
where the numbers may move (another kernel path, threads that matter, the batched engine), the batched engine's
drift where --sample regroups its items; an explicit --atol wins, and the report says which rule and why."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.backends.options import ScoringOptions
from abricot_local.cli import cli
from abricot_local.run.check import Difference, _Against
from abricot_local.run.check_tolerance import ATOL, BATCHED_DRIFT, tolerance
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two finished fake DISCOTEX runs of 8 items: the default (prefix) engine, and batched (4 items a decode)."""
    base = tmp_path_factory.mktemp("exact")
    data = write_discotex(base / "d", 4)
    out = {}
    for name, extra in (("prefix", ()), ("batched", ("--engine", "batched", "--parallel", 4))):
        r = invoke("run", "fake", "--backend", "fake", "--data-dir", data, "--tasks", "discotex",
                   "--out", base / name, *extra)
        assert r.exit_code == 0, r.output
        out[name] = base / name
    return out


def tampered(src: Path, dst: Path, by: float, every: bool = False) -> Path:
    """A copy of a run with ``by`` added to the top choice's log-prob of its first sample (``every``: of each),
    the prediction kept."""
    shutil.copytree(src, dst)
    path = dst / "samples-discotex.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for line in lines if every else lines[:1]:
        line["logprobs"][line["pred"]] += by
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return dst


def test_an_exact_engine_on_the_recorded_kernel_path_is_held_to_the_recorded_bits(runs, tmp_path):
    r = invoke("check", runs["prefix"], "--json")
    rep = json.loads(r.stdout)
    assert r.exit_code == 0 and rep["atol"] == 0 and rep["max_abs_diff"] == 0, r.output
    assert rep["tolerance"].startswith("0 (exact)") and "prefix engine" in rep["tolerance"]
    run = tampered(runs["prefix"], tmp_path / "t", 1e-4)
    item = json.loads((run / "samples-discotex.jsonl").read_text().splitlines()[0])["id"]
    r = invoke("check", run)
    assert r.exit_code == 1, r.output
    assert "note: tolerance 0 (exact): the recorded kernel path and the prefix engine give bit-identical" in r.stdout
    row = next(x for x in r.stdout.splitlines() if x.startswith("discotex ") and item in x)
    assert row.split()[-1] == "0.0001"  # the item and its difference named
    r = invoke("check", run, "--atol", "1e-3")  # an explicit --atol wins
    assert r.exit_code == 0 and "note: tolerance --atol 0.001 given" in r.stdout, r.output


def test_a_batched_run_is_held_to_1e_3_whole_and_to_its_drift_under_sample(runs, tmp_path):
    r = invoke("check", runs["batched"], "--json")
    rep = json.loads(r.stdout)
    assert r.exit_code == 0 and rep["atol"] == ATOL and "batched engine" in rep["tolerance"], r.output
    near = tampered(runs["batched"], tmp_path / "near", 0.5, every=True)
    r = invoke("check", near)
    assert r.exit_code == 1 and f"(atol {ATOL:g})" in r.stdout, r.output  # whole: its groups re-formed
    r = invoke("check", near, "--sample", 7)  # regrouped: within the engine's drift, said with how to check
    said = "the run used the batched engine" in r.stdout and "check without --sample" in r.stdout
    assert r.exit_code == 0 and said and f"(atol {BATCHED_DRIFT:g})" in r.stdout, r.output
    r = invoke("check", near, "--sample", 8)  # all 8 drawn: nothing regrouped
    assert r.exit_code == 1 and f"(atol {ATOL:g})" in r.stdout, r.output
    r = invoke("check", tampered(runs["batched"], tmp_path / "far", BATCHED_DRIFT + 1, every=True), "--sample", 7)
    assert r.exit_code == 1 and "NOT reproduced" in r.stdout, r.output


def _rule(**kw):
    base = dict(kernels=(), known=True, threads=None, options=ScoringOptions(), regrouped=False)
    return tolerance(kw.pop("given", None), **{**base, **kw})


def test_the_rule_follows_what_the_re_scoring_can_claim():
    assert _rule().atol == 0.0
    assert _rule(threads="threads: recorded 2, here 1; no decode call of these items depends on it").atol == 0.0
    assert _rule(kernels=("threads: recorded 2, here 1; 3 decode call(s) ... depend on it",)).atol == ATOL
    assert _rule(known=False).atol == ATOL
    assert _rule(options=ScoringOptions(engine="batched", parallel=1), regrouped=True).atol == 0.0  # prefix's schedule
    assert _rule(options=ScoringOptions(engine="batched", parallel=4)).atol == ATOL
    drift = _rule(options=ScoringOptions(engine="batched", parallel=4), regrouped=True)
    assert drift.atol == BATCHED_DRIFT and drift.near_ties
    assert _rule(given=0.25, kernels=("build: ...",), options=ScoringOptions(engine="batched")).atol == 0.25


def test_under_the_drift_only_a_near_tie_may_change_its_prediction():
    against = _Against({})
    against.every = [(Difference("t", "near", 0, 1, 0.3), 0.1), (Difference("t", "far", 0, 1, 0.3), 2.0),
                     (Difference("t", "same", 1, 1, 0.4), 3.0)]
    drift = _rule(options=ScoringOptions(engine="batched", parallel=4), regrouped=True)
    differ, flips = against.held(drift)
    assert [d.id for d in flips] == ["near"] and [d.id for d in differ] == ["far"]
    differ, flips = against.held(_rule(given=1.0))
    assert not flips and [d.id for d in differ] == ["near", "far"]
