"""The published verdict's margin (`run --margin M`) on a finished run and across shards: a --resume of a finished
run with another --margin judges its recorded samples again at M (nothing scored, results.json rewritten, `check`
and `report --verify` hold it); without --margin, or with the recorded one, nothing is written; `merge` refuses
shards whose margins differ. Fake backend, in-process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from abricot_local.cli import cli

FAKE = ("--backend", "fake", "--n-ctx", "8192", "--tasks", "abricot_abs", "--sample", "30")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def run(models, data, out, *more):
    return invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={data}", *FAKE, *more, "--out", out)


def results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def kinds(doc: dict) -> list:
    return [(c["metric"], c["verdict"], c["margin"]) for c in doc["published"]["checks"]]


def test_a_finished_run_resumed_with_another_margin_is_judged_again_at_it(tmp_path, claims, abricot_file):
    whole, wide = tmp_path / "whole", tmp_path / "wide"
    assert run(claims, abricot_file, whole).exit_code == 0
    assert run(claims, abricot_file, wide, "--margin", "1.2").exit_code == 0  # the run made at M from the start
    before = results(whole)
    assert before["published"].get("margin") is None and before["published"]["checks"]
    samples = {p.name: p.read_bytes() for p in whole.glob("samples-*.jsonl")}

    r = run(claims, abricot_file, whole, "--resume", "--margin", "1.2")
    assert r.exit_code == 0, r.output
    after = results(whole)
    assert after["published"] == results(wide)["published"]  # the verdict at M: the same code's, on the same samples
    assert after["published"]["margin"] == 1.2 and kinds(after) != kinds(before)  # the verdict itself, not only M
    assert [k for _, k, _ in kinds(before)] == ["differs"] and [k for _, k, _ in kinds(after)] == ["reproduced"]
    assert {k: v for k, v in after.items() if k != "published"} == {k: v for k, v in before.items() if k != "published"}
    assert {p.name: p.read_bytes() for p in whole.glob("samples-*.jsonl")} == samples  # nothing scored
    assert sorted(p.name for p in whole.iterdir()) == sorted(p.name for p in wide.iterdir())  # no temp file left
    said = r.output
    assert "nothing to score, nothing written" not in said
    assert "judged again at --margin 1.2" in said and "nothing was scored" in said and "task's declared" in said
    assert "margin 1.2 (--margin)" in said and "wrote " in said  # the verdict printed is the new one
    assert invoke("check", whole).exit_code == 0
    rep = invoke("report", whole, "--verify")
    assert rep.exit_code == 0, rep.output

    again = tmp_path / "again"  # the same margin again, or none given: nothing written
    shutil.copytree(whole, again)
    stamp = (again / "results.json").stat().st_mtime_ns
    for more in (("--margin", "1.2"), ()):
        r = run(claims, abricot_file, again, "--resume", *more)
        assert r.exit_code == 0 and "nothing to score, nothing written" in r.output
        assert "judged again" not in r.output
        assert (again / "results.json").stat().st_mtime_ns == stamp and results(again) == after


def test_merge_refuses_shards_judged_at_different_margins(tmp_path, claims, abricot_file):
    for k, more in ((1, ("--margin", "0.6")), (2, ())):
        assert run(claims, abricot_file, tmp_path / f"s{k}", "--shard", f"{k}/2", *more).exit_code == 0
    r = invoke("merge", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "m")
    assert r.exit_code == 2, r.output
    assert "margin" in r.output and "0.6" in r.output and "task's declared" in r.output
    assert not (tmp_path / "m").exists()
    assert "shard 1/2" in r.output and "shard 2/2" in r.output
    # the advice taken: shard 2 resumed at shard 1's margin (judged again, nothing scored), then merged
    assert run(claims, abricot_file, tmp_path / "s2", "--shard", "2/2", "--resume", "--margin", "0.6").exit_code == 0
    assert invoke("merge", tmp_path / "s2", tmp_path / "s1", "--out", tmp_path / "m").exit_code == 0
    assert run(claims, abricot_file, tmp_path / "whole", "--margin", "0.6").exit_code == 0
    assert results(tmp_path / "m")["published"] == results(tmp_path / "whole")["published"]
    assert results(tmp_path / "m")["published"]["margin"] == 0.6
