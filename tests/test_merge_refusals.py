"""`merge`'s refusals and what it says: a shard whose samples do not give its recorded metrics is refused (the check
`report --verify` makes); a shard of another run names each option that differs with both values, in --resume's
words; a sweep's folder, a missing path and an interrupted shard each get their own advice (the interrupted one:
the call its INTERRUPTED file holds); a folder holding the shards of one run names them to merge, one holding
other runs says what it holds, and an unfinished run made without --shard is no shard; a merge says the merged run's summary and verdict, as `run` does."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import fail_after
from invented_data import write_discotex


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_discotex(tmp_path_factory.mktemp("merge-refusals") / "data", 8)


def base(data, *extra):
    return ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(data), "--sample", "12",
            *map(str, extra)]


@pytest.fixture
def shards(finished_run, data):
    """The three shards of one --sample 12 run (read only: made once per session)."""
    return [finished_run(*base(data, "--shard", f"{k}/3")) for k in (1, 2, 3)]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def said(r) -> str:
    return " ".join(r.output.split())


def test_a_shard_whose_samples_do_not_give_its_metrics_is_refused(shards, finished_run, data, tmp_path):
    s2 = finished_run(*base(data, "--shard", "2/3"), into=tmp_path / "s2")
    path = s2 / "samples-discotex.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[0])
    flipped = (row["gold"] + 1) % len(row["logprobs"]) if row["pred"] == row["gold"] else row["gold"]
    row["logprobs"][flipped] = max(row["logprobs"]) + 1.0  # a line still whole: its pred its argmax
    row["pred"] = flipped
    path.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n", encoding="utf-8")
    assert invoke("report", s2, "--verify").exit_code != 0  # the shard's own check finds it
    r = invoke("merge", shards[0], s2, shards[2], "--out", tmp_path / "m")
    text = said(r)
    assert r.exit_code == 2, r.output
    assert f"shard 2/3 ({s2}): its samples of task discotex do not give the accuracy" in text
    assert "(report's verify check says so too)" in text and "check re-scores the shard" in text
    assert "run shard 2/3 again into a new folder, then merge it in its place" in text
    assert "`" not in text.partition("do not give")[2] and "--out" not in text  # words, no one door's command
    assert not (tmp_path / "m" / "results.json").exists()


def test_a_shard_of_another_run_names_each_option_with_both_values_as_resume_does(shards, finished_run, data,
                                                                                   tmp_path):
    seed = finished_run(*base(data, "--shard", "2/3", "--seed", 5))
    r = invoke("merge", shards[0], seed, shards[2], "--out", tmp_path / "m")
    assert r.exit_code == 2 and f"{seed} is a shard of another run than {shards[0]}" in said(r), r.output
    words = "--seed: recorded 1234, given 5"
    assert words in said(r) and ": config differ" not in said(r)
    resumed = invoke(*base(data, "--shard", "1/3", "--seed", 5), "--out", shards[0], "--resume")
    assert resumed.exit_code != 0 and words in said(resumed)  # the same words as --resume's
    other = finished_run(*base(data, "--shard", "2/2"))
    r = invoke("merge", shards[0], other, "--out", tmp_path / "m")
    assert r.exit_code == 2 and "--shard: recorded 1/3, given 2/2" in said(r), r.output
    assert not (tmp_path / "m" / "results.json").exists()


def test_a_sweep_a_missing_path_and_an_interrupted_shard_each_get_their_advice(shards, data, tmp_path,
                                                                              monkeypatch):
    sweep = ["run", "fakeA", "fakeB", *base(data)[2:-1], "4"]
    for k in (1, 2):
        assert invoke(*sweep, "--shard", f"{k}/2", "--out", tmp_path / f"sw{k}").exit_code == 0
    sw1, sw2 = tmp_path / "sw1", tmp_path / "sw2"
    r = invoke("merge", sw1, sw2, "--out", tmp_path / "m")
    assert r.exit_code == 2 and f"{sw1} is a sweep's folder (a run per model: fakeA, fakeB)" in said(r), r.output
    assert (f"merge each model's shards apart ({sw1 / 'fakeA'} and {sw2 / 'fakeA'}, into {tmp_path / 'm' / 'fakeA'}; "
            f"{sw1 / 'fakeB'} and {sw2 / 'fakeB'}, into {tmp_path / 'm' / 'fakeB'})") in said(r)
    assert "`" not in said(r) and "--out" not in said(r)  # the folders, in words every door reads
    assert "not a complete shard" not in said(r)
    r = invoke("merge", shards[0], tmp_path / "nowhere", "--out", tmp_path / "m")
    assert r.exit_code == 2 and f"{tmp_path / 'nowhere'} does not exist" in said(r), r.output
    cut = tmp_path / "s3"
    args = [*base(data, "--shard", "3/3"), "--out", str(cut)]
    with monkeypatch.context() as m:
        m.setattr(sys, "argv", ["abricot-local", *args])  # the command line the INTERRUPTED file names
        fail_after(m, 2, KeyboardInterrupt)
        assert invoke(*args).exit_code == 130
    command = next(ln.partition(": ")[2] for ln in (cut / "INTERRUPTED").read_text().splitlines()
                   if ln.startswith("resume: "))
    assert "--shard 3/3" in command and "--resume" in command
    r = invoke("merge", shards[0], shards[1], cut, "--out", tmp_path / "m")
    assert r.exit_code == 2 and f"resume it with `{command}`, then merge" in said(r), r.output
    assert not (tmp_path / "m").exists() or not (tmp_path / "m" / "results.json").exists()


def test_merge_says_the_merged_runs_summary_and_verdict(shards, tmp_path):
    from abricot_local import console
    from abricot_local.record import read_run

    r = invoke("merge", *shards, "--out", tmp_path / "m")
    assert r.exit_code == 0, r.output
    record = read_run(tmp_path / "m")
    assert console.summary(record) in r.output  # the merged run's metrics, every item's
    assert "published comparison" in r.output
    assert r.output.rstrip().endswith(f"merged 3 shard(s) into {tmp_path / 'm' / 'results.json'}")


def test_a_folder_holding_the_shards_of_one_run_names_them_and_a_run_with_no_shard_is_no_shard(
        shards, finished_run, data, tmp_path, monkeypatch):
    """Before: a folder holding the shards of one run (docs' GNU parallel + rsync recipe: shards/mistral-1..3) was
    called a sweep's folder and told to merge each sub-folder apart, which merge then refused (shards missing); an
    interrupted run made without --shard was told to resume, then merge, which merge would still refuse."""
    import shutil

    held = tmp_path / "held"
    for k, s in enumerate(shards, 1):
        shutil.copytree(s, held / f"g-{k}")
    r = invoke("merge", held, "--out", tmp_path / "m")
    text = said(r)
    parts = " ".join(str(held / f"g-{k}") for k in (1, 2, 3))
    assert r.exit_code == 2 and f"{held} holds the shards of one run (1/3, 2/3, 3/3), not a shard: merge {parts}" \
        in text, r.output
    assert "sweep" not in text and "`" not in text and "--out" not in text  # folders, in words every door reads
    assert invoke("merge", *parts.split(), "--out", tmp_path / "m").exit_code == 0  # the advice, followed
    shutil.rmtree(held / "g-3")  # two of three there, the third given beside the folder
    r = invoke("merge", held, shards[2], "--out", tmp_path / "m2")
    assert r.exit_code == 2 and (f"{held} holds the shards of one run (1/3, 2/3), not a shard: merge {held / 'g-1'} "
                                 f"{held / 'g-2'} {shards[2]} (shard(s) 3/3 not there: give them too)") in said(r)
    mixed = tmp_path / "mixed"
    shutil.copytree(shards[0], mixed / "g-1")
    shutil.copytree(finished_run(*base(data, "--shard", "2/2")), mixed / "h-2")
    shutil.copytree(finished_run(*base(data)), mixed / "plain")
    r = invoke("merge", mixed, "--out", tmp_path / "m3")
    assert r.exit_code == 2 and (f"{mixed} holds runs, not a shard: shard(s) 1/3 of a run of fake (g-1); shard(s) "
                                 "2/2 of a run of fake (h-2); run(s) of fake, not sharded (plain): give the folders "
                                 "of the shards of one run") in said(r), r.output
    late = tmp_path / "late"
    args = [*base(data), "--out", str(late)]
    with monkeypatch.context() as m:
        m.setattr(sys, "argv", ["abricot-local", *args])
        fail_after(m, 2, KeyboardInterrupt)
        assert invoke(*args).exit_code == 130
    assert (late / "INTERRUPTED").is_file()
    r = invoke("merge", late, shards[1], "--out", tmp_path / "q")
    text = said(r)
    assert r.exit_code == 2 and f"{late} is not a shard of a run: its run (interrupted, 2 of 12 items)" in text, \
        r.output
    assert "was started without --shard K/N; give the folders of the shards of one run" in text
    assert "resume" not in text  # resumed, it would still be no shard
    assert not any((tmp_path / n / "results.json").exists() for n in ("m2", "m3", "q"))
