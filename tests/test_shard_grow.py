"""A sharded --sample run grows without losing work: shard K/N of --sample n lies inside shard K/N of every
larger sample (the shards deal the task's nested order), so `run --shard K/N --sample M --resume` keeps every
item the shard scored, scores only the new ones and writes what a fresh `--shard K/N --sample M` run writes."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abricot_local.cli import cli

FAKE = ("--backend", "fake", "--tasks", "discotex", "--n-ctx", "4096")


def run(data, out, *more):
    return CliRunner().invoke(cli, [str(a) for a in ("run", "fake", *FAKE, "--data-dir", data, *more, "--out", out)],
                              catch_exceptions=False)


def ids(folder):
    return [json.loads(line)["id"] for line in (folder / "samples-discotex.jsonl").read_text().splitlines()]


def test_a_grown_shard_keeps_every_item_it_scored(tmp_path, discotex_dir):
    for k in (1, 3):
        part, fresh = tmp_path / f"s{k}", tmp_path / f"f{k}"
        assert run(discotex_dir, part, "--sample", 12, "--shard", f"{k}/3").exit_code == 0
        held = ids(part)
        r = run(discotex_dir, part, "--sample", 30, "--shard", f"{k}/3", "--resume")
        assert r.exit_code == 0, r.output
        said = " ".join(r.output.split())
        assert f"the items it holds are kept (shard {k}/3 of a sample lies inside shard {k}/3 of every larger one)" \
            in said, r.output
        grown = ids(part)
        assert set(held) < set(grown) and len(grown) == 10  # 30 = 10 + 10 + 10
        entry = json.loads((part / "results.json").read_text())["tasks"]["discotex"]
        assert entry["scored_now"] == len(grown) - len(held)  # only the new items were scored
        assert run(discotex_dir, fresh, "--sample", 30, "--shard", f"{k}/3").exit_code == 0
        assert (part / "samples-discotex.jsonl").read_bytes() == (fresh / "samples-discotex.jsonl").read_bytes()
        assert entry["metrics"] == json.loads((fresh / "results.json").read_text())["tasks"]["discotex"]["metrics"]
