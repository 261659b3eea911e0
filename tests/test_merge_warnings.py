"""A merged run's task warnings are those an unsharded run of the same items records, byte for byte, made by the
one rule `run` records by (run/record.entry_warnings): no shard's own warning about its items kept (one gold class
in a shard of a run whose golds differ), option names in the record's words (never errors.opt's markers); `check`
remakes the warnings the samples give and reports a record whose warnings were changed; `merge` refuses a shard
whose recorded warnings are not those its samples give."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import abricot_local as al
from conftest import FIXTURE

# seed 32, --sample 4, two shards (tasks.selection.kept/dealt over the invented fixture): abricot_abs's golds are
# 2, 2, 0, 4 (shard 2 holds the two 2s: one gold class in that shard only), abricot_inc's are all 4 (the whole run
# warns of one class, advising a larger --sample N)
ARGS = dict(backend="fake", data={"abricot": str(FIXTURE)}, n_ctx=8192, progress=False, seed=32, sample=4)
TASKS = "abricot_abs,abricot_inc"
SAME_GOLD = "every scored item has the same gold answer"


def _evaluate(out: Path, **extra) -> al.Run:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return al.evaluate("fake", TASKS, out=out, **ARGS, **extra)


def _warnings(folder: Path) -> dict[str, str]:
    """Each task's warnings as results.json holds them (its bytes, one JSON text per task)."""
    tasks = json.loads((folder / "results.json").read_text(encoding="utf-8"))["tasks"]
    return {name: json.dumps(t["warnings"], ensure_ascii=False) for name, t in tasks.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("merge_warnings")
    for k in (1, 2):
        _evaluate(root / f"s{k}", shard=f"{k}/2")
    _evaluate(root / "whole")
    al.merge(root / "s1", root / "s2", out=root / "merged")
    return root


def test_the_merged_run_records_the_warnings_of_the_unsharded_run(runs):
    shard2, whole, merged = (_warnings(runs / f) for f in ("s2", "whole", "merged"))
    assert SAME_GOLD in shard2["abricot_abs"] and SAME_GOLD not in whole["abricot_abs"]  # a shard's own warning
    assert "a larger --sample N draws more" in whole["abricot_inc"]  # a warning naming an option
    assert merged == whole
    assert "\\ue000" not in json.dumps(merged)  # no unrendered option marker


def test_check_reports_a_changed_warning_and_passes_the_merged_run(runs, tmp_path):
    assert al.check(runs / "merged", threads=1, progress=False).reproduced
    changed = tmp_path / "changed"
    _copy(runs / "merged", changed, lambda w: [x.replace("--sample N", "--limit N") for x in w])
    rep = al.check(changed, threads=1, progress=False)
    assert not rep.reproduced and rep.identical_predictions == rep.checked  # the numbers are as recorded
    said = [d for d in rep.record_differs if d.startswith("abricot_inc warnings:")]
    assert len(said) == 1 and "--limit N" in said[0] and "--sample N" in said[0], rep.record_differs


def test_merge_refuses_a_shard_whose_warnings_were_changed(runs, tmp_path):
    _copy(runs / "s2", tmp_path / "s2", lambda w: [x for x in w if SAME_GOLD not in x])
    with pytest.raises(al.AbricotError, match="warnings its results.json records for task abricot_abs"):
        al.merge(runs / "s1", tmp_path / "s2", out=tmp_path / "m")
    assert not (tmp_path / "m" / "results.json").exists()


def _copy(src: Path, dst: Path, change) -> None:
    """``src``'s run into ``dst``, every task's warnings passed through ``change``."""
    dst.mkdir()
    for f in src.iterdir():
        if f.is_file():
            (dst / f.name).write_bytes(f.read_bytes())
    record = json.loads((dst / "results.json").read_text(encoding="utf-8"))
    for t in record["tasks"].values():
        t["warnings"] = change(t["warnings"])
    (dst / "results.json").write_text(json.dumps(record, indent=2, ensure_ascii=False), encoding="utf-8")
