"""`compare` of a run with an lm-eval output of the same model and task (`lm_eval --model abricot-local`) names no
setting that only lm-eval's door can record (its request rules, version, model, --limit, each task's lm-eval task:
analysis/differing.py LM_EVAL_ONLY) as one that differs: it says them apart, recorded by one side only; a setting
both record with other values is still named, and so is an lm-eval setting two lm-eval outputs record otherwise.

The lm-eval output is the fake run's export (`Run.to_lm_eval`) made into what lm-eval writes: no abricot-local task
in its tasks' metadata, lm-eval's version and the lm-eval model's request rules recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from conftest import FIXTURE

import abricot_local
from abricot_local.analysis.differing import differing_settings, lm_eval_only, one_side_settings
from abricot_local.cli import cli

FAKE = ("--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "4")
DATA = {"abricot": str(FIXTURE)}


def _lm_eval(run_dir: Path, into: Path, *, n_ctx: int | None = None, version: str = "0.4.13") -> Path:
    """The run's export as `lm_eval --model abricot-local` writes it (``n_ctx``: recorded otherwise)."""
    where = abricot_local.load_run(run_dir).to_lm_eval(into)
    (results,) = where.glob("results_*.json")
    doc = json.loads(results.read_text(encoding="utf-8"))
    doc["lm_eval_version"] = version
    doc["config"]["abricot_local"]["requests"] = {"version": "lm-eval/v1", "prefix_token": 2}
    if n_ctx is not None:
        doc["config"]["abricot_local"]["config"]["n_ctx"] = n_ctx
    for config in doc["configs"].values():
        del config["metadata"]["abricot_local_task"]  # lm-eval ran the task: not an export
    results.write_text(json.dumps(doc), encoding="utf-8")
    return where


def test_what_only_lm_eval_records_is_not_a_difference(finished_run, tmp_path):
    run_dir = finished_run("run", "fake", *FAKE)  # read only
    lm_dir = _lm_eval(run_dir, tmp_path / "lm")
    run, lm = abricot_local.load_run(run_dir), abricot_local.load_run(lm_dir, data=DATA)
    only = sorted(k for k in lm.settings if k not in run.settings)
    assert lm.lm_eval and not run.lm_eval
    assert {"provenance.requests.version", "provenance.lm_eval_version", "abricot_abs.config.lm_eval_task"} <= set(only)
    assert all(lm_eval_only(k) for k in only), only  # every key the lm-eval side adds is one only its door records
    assert differing_settings(run, lm) == differing_settings(lm, run) == ()
    r = CliRunner().invoke(cli, ["compare", str(run_dir), str(lm_dir), "--data", f"abricot={FIXTURE}",
                                 "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["settings_differ"] == []
    said = {d["key"]: (d["value_a"], d["value_b"]) for d in doc["settings_one_side"]}  # said apart, as recorded
    assert set(said) == set(only) and said["provenance.lm_eval_version"] == (None, "0.4.13")
    assert [d.key for d in one_side_settings(run, lm)] == list(said)


def test_a_setting_both_record_otherwise_is_still_named(finished_run, tmp_path):
    run_dir = finished_run("run", "fake", *FAKE)  # read only
    run = abricot_local.load_run(run_dir)
    lm = abricot_local.load_run(_lm_eval(run_dir, tmp_path / "lm", n_ctx=4096), data=DATA)
    assert [(d.key, d.value_a, d.value_b) for d in differing_settings(run, lm)] == [("n_ctx", 8192, 4096)]
    other = abricot_local.load_run(_lm_eval(run_dir, tmp_path / "lm2", version="0.4.9"), data=DATA)
    assert [(d.key, d.value_a, d.value_b) for d in differing_settings(lm, other)] == [
        ("n_ctx", 4096, 8192), ("provenance.lm_eval_version", "0.4.13", "0.4.9")]
    assert one_side_settings(lm, other) == ()  # both lm-eval outputs: nothing only one side can record
