"""Shards and merge: a shard is a seeded draw of each task's items (not every N-th one), and a merged run equals
the unsharded one, byte for byte (fake and real model)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.run.request import Shard
from abricot_local.tasks.selection import dealt, kept
from conftest import FIXTURE
from invented_data import write_discotex


@pytest.fixture
def base(discotex_dir):
    return ["run", "fake", "--backend", "fake", "--data-dir", str(discotex_dir), "--data", f"abricot={FIXTURE}",
            "--tasks", "discotex,abricot", "--sample", "11", "--n-ctx", "8192", "--shots", "1"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def ids(folder, task):
    return [json.loads(line)["id"] for line in (folder / f"samples-{task}.jsonl").read_text().splitlines()]


def same_run(a, b, tasks):
    for t in tasks:
        assert (a / f"samples-{t}.jsonl").read_bytes() == (b / f"samples-{t}.jsonl").read_bytes()
    ra, rb = (json.loads((d / "results.json").read_text()) for d in (a, b))
    assert ra["config"] == rb["config"] and ra["manifest"] == rb["manifest"]
    for t in tasks:
        assert ra["tasks"][t]["metrics"] == rb["tasks"][t]["metrics"]
        assert ra["tasks"][t]["n"] == rb["tasks"][t]["n"]


def test_three_shards_merge_into_the_unsharded_run(tmp_path, base, finished_run):
    unsharded = finished_run(*base)  # read only, as the shards (made once per session: the next tests share them)
    parts = [finished_run(*base, "--shard", f"{k}/3") for k in (1, 2, 3)]
    assert json.loads((parts[1] / "results.json").read_text())["tasks"]["discotex"]["n"] == 4  # 11 = 4 + 4 + 3
    whole, first = (ids(d, "discotex") for d in (unsharded, parts[0]))
    entry = json.loads((parts[0] / "results.json").read_text())["tasks"]["discotex"]
    seed, available = entry["config"]["seed"], entry["available"]
    order = dealt(kept(available, seed, sample=11), available, seed)  # the nested order of --sample 11's items
    assert first == [whole[p] for p in Shard(1, 3).places(order)] and first != whole[0::3]  # a draw, not every 3rd
    assert available > 11 and entry["n"] == 4
    r = invoke("merge", parts[2], parts[0], parts[1], "--out", tmp_path / "merged")
    assert r.exit_code == 0, r.output
    same_run(tmp_path / "merged", unsharded, ["discotex", "abricot_abs", "abricot_inc"])
    assert invoke("check", tmp_path / "merged").exit_code == 0
    rep = invoke("report", tmp_path / "merged", "--verify")
    assert rep.exit_code == 0, rep.output
    res = invoke(*base, "--out", tmp_path / "merged", "--resume")
    assert res.exit_code == 0, res.output


def test_shards_of_another_seed_merge_into_its_unsharded_run(tmp_path, base):
    args = [{"discotex,abricot": "discotex"}.get(a, a) for a in base] + ["--seed", 7]
    assert invoke(*args, "--out", tmp_path / "whole").exit_code == 0
    for k in (1, 2):
        assert invoke(*args, "--shard", f"{k}/2", "--out", tmp_path / f"s{k}").exit_code == 0
    assert ids(tmp_path / "s1", "discotex") != ids(tmp_path / "whole", "discotex")[0::2]
    assert invoke("merge", tmp_path / "s2", tmp_path / "s1", "--out", tmp_path / "merged").exit_code == 0
    same_run(tmp_path / "merged", tmp_path / "whole", ["discotex"])


@pytest.mark.parametrize("count", [None, ("--limit", 7)])
def test_shards_of_a_limit_or_of_every_item_merge_into_its_unsharded_run(tmp_path, count):
    data = write_discotex(tmp_path / "data", 5)  # release-shaped, 20 items: every item scored is the whole task
    args = ["run", "fake", "--backend", "fake", "--data-dir", data, "--tasks", "discotex", "--n-ctx", 8192,
            *(count or ())]
    assert invoke(*args, "--out", tmp_path / "whole").exit_code == 0
    for k in (1, 2, 3):
        assert invoke(*args, "--shard", f"{k}/3", "--out", tmp_path / f"s{k}").exit_code == 0
    assert invoke("merge", tmp_path / "s3", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "m").exit_code == 0
    same_run(tmp_path / "m", tmp_path / "whole", ["discotex"])


def test_missing_foreign_doubled_or_incomplete_shards_are_refused(tmp_path, base, finished_run):
    s1 = finished_run(*base, "--shard", "1/3")  # read only; the session's (the test above made them)
    s2 = finished_run(*base, "--shard", "2/3", into=tmp_path / "s2")  # a copy: damaged below
    r = invoke("merge", s1, s2, "--out", tmp_path / "m")
    assert r.exit_code == 2 and "shard(s) 3/3 missing" in r.output
    r = invoke("merge", s1, s1, "--out", tmp_path / "m")
    assert r.exit_code == 2 and "given twice" in r.output
    assert invoke(*base, "--shard", "3/3", "--seed", "7", "--out", tmp_path / "s3x").exit_code == 0
    r = invoke("merge", s1, s2, tmp_path / "s3x", "--out", tmp_path / "m")
    assert r.exit_code == 2 and "another run" in r.output and "config" in r.output
    r = invoke("merge", s1, finished_run(*base), "--out", tmp_path / "m")
    assert r.exit_code == 2 and "not a shard" in r.output
    s3 = finished_run(*base, "--shard", "3/3")
    made = json.loads((s2 / "results.json").read_text())
    del made["tasks"]["abricot_abs"]["available"]  # as written before tasks.<task>.available: dealt otherwise
    (s2 / "results.json").write_text(json.dumps(made))
    r = invoke("merge", s1, s2, s3, "--out", tmp_path / "m")
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and "records no tasks.abricot_abs.available" in said, r.output
    assert "score every shard again with this version" in said
    (s2 / "results.json").unlink()
    r = invoke("merge", s1, s2, "--out", tmp_path / "m")
    assert r.exit_code == 2 and "not a complete shard" in r.output
    assert not (tmp_path / "m" / "results.json").exists()


@pytest.mark.real
def test_real_model_shards_merge_byte_for_byte(gemma_run, tmp_path):
    for k in (1, 2):  # the shared run's command, in two shards
        assert invoke(*gemma_run.args, "--shard", f"{k}/2", "--out", tmp_path / f"s{k}").exit_code == 0
    assert invoke("merge", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "merged").exit_code == 0
    same_run(tmp_path / "merged", gemma_run.out, ["discotex"])
