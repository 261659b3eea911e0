"""`runs` says a shard is one (a part of its run's items, not a whole run) and names the `merge` of its run's
shards; `merge` missing a shard prints the `run` command that scores it, which works as printed (fake backend)."""

from __future__ import annotations

import ast
import shlex

import pytest
from click.testing import CliRunner

import abricot_local as al
from abricot_local.cli import cli
from abricot_local.record import CHECKPOINT, RUN_MANIFEST, read_record, write_manifest
from abricot_local.run.states import find_runs
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def commands(output: str, name: str) -> list[list[str]]:
    """The `abricot-local NAME ...` commands printed in ``output`` (folded lines joined), as argv after the program."""
    text = output.replace(" \\\n", " ")
    return [shlex.split(line.strip())[1:] for line in text.splitlines()
            if line.strip().startswith(f"abricot-local {name} ")]


def test_runs_names_shards_and_merge_prints_the_missing_shards_command(tmp_path):
    data = write_discotex(tmp_path / "data", 5)
    args = ["run", "fake", "--backend", "fake", "--data-dir", data, "--tasks", "discotex", "--n-ctx", 8192]
    runs = tmp_path / "runs"
    for k in (1, 3):
        assert invoke(*args, "--shard", f"{k}/3", "--out", runs / f"s{k}").exit_code == 0

    listed = invoke("runs", runs)
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert "shard 1/3 of a run: complete, 4 of 4 items" in lines[0] and "shard 3/3 of a run: complete" in lines[1]
    assert "shard(s) 2/3 not here" in lines[2] and not commands(listed.output, "merge")  # no merge: one is missing
    assert [s.shard for s in find_runs([runs])] == ["1/3", "3/3"]

    refused = invoke("merge", runs / "s1", runs / "s3", "--out", tmp_path / "m")
    assert refused.exit_code == 2 and "shard(s) 2/3 missing: merge needs all 3" in refused.output
    (score,) = commands(refused.output, "run")  # the one missing shard's command, built from what s1 recorded
    assert score[score.index("--shard") + 1] == "2/3" and "--data-dir" not in score  # not recorded: said to add
    with pytest.raises(al.AbricotError) as caught:  # the API's refusal: the evaluate call, no flag
        al.merge(runs / "s1", runs / "s3", out=tmp_path / "m")
    said = str(caught.value)
    call = ast.parse(next(ln.strip() for ln in said.splitlines() if ln.strip().startswith("abricot_local.evaluate(")))
    keywords = {k.arg: ast.literal_eval(k.value) for k in call.body[0].value.keywords}
    assert "--" not in said and keywords["shard"] == "2/3" and keywords["tasks"] == ["discotex"]
    assert keywords["out"] == score[score.index("--out") + 1] and keywords["n_ctx"] == 8192
    made = invoke(*score, "--data-dir", data)
    assert made.exit_code == 0, made.output
    out = score[score.index("--out") + 1]
    assert read_record(f"{out}/results.json").config.shard == "2/3"

    listed = invoke("runs", runs).output
    assert "shard 2/3 of a run: complete, 3 of 3 items" in listed and "the shards of one run; merge them" in listed
    (merge,) = commands(listed, "merge")
    assert invoke(*merge).exit_code == 0  # the merge `runs` printed joins them (the missing shard made as printed)
    assert "merged into" in invoke("runs", runs).output

    unfinished = tmp_path / "cut"  # an unfinished shard: its checkpoint's recorded config names the shard
    (unfinished / CHECKPOINT).mkdir(parents=True)
    write_manifest(unfinished / CHECKPOINT / RUN_MANIFEST, read_record(runs / "s1" / "results.json").manifest)
    (state,) = find_runs([unfinished])
    assert state.shard == "1/3" and state.describe().startswith("shard 1/3 of a run: interrupted, 0 items")
