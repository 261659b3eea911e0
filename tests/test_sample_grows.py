"""A sample that grows (issue 47 item 2): `--sample N` is the first N of one seeded order of a task's
items, so a sample lies inside every larger one, and `run --out DIR --resume --sample M` grows a
finished (or interrupted) N-item run to M, scoring only the new items, into what a fresh `--sample M`
run writes; a run does not shrink; the verdict that cannot tell yet prints the command that grows it.
Fake backend, in-process, on the real DISCOTEX and ABRICOT releases."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

import abricot_local as api
from abricot_local.cli import cli
from abricot_local.tasks import make_task
from abricot_local.tasks.base import TaskOptions
from abricot_local.tasks.selection import prepare
from conftest import fail_after

FAKE = ("--backend", "fake", "--tasks", "discotex", "--n-ctx", "4096")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def run(data, out, *more):
    return invoke("run", "fake", *FAKE, "--data-dir", data, *more, "--out", out)


def files(out: Path) -> dict[str, bytes]:
    """Every file the folder holds (the checkpoint's too), by path inside it."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def same_run(a: Path, b: Path) -> None:
    """Two finished runs alike: the samples files byte for byte, results.json equal but for the times
    and the items scored by the last process."""
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    for f in a.glob("samples-*.jsonl"):
        assert f.read_bytes() == (b / f.name).read_bytes()
    docs = [json.loads((d / "results.json").read_text()) for d in (a, b)]
    for doc in docs:
        doc.pop("created"), doc.pop("wall_seconds")
        for entry in doc["tasks"].values():
            entry.pop("seconds"), entry.pop("scored_now")
    assert docs[0] == docs[1]


def test_a_sample_lies_inside_every_larger_one(discotex_dir, abricot_file):
    for name, options in (("discotex", TaskOptions(data_dir=str(discotex_dir))),
                          ("abricot_abs", TaskOptions(data={"abricot": str(abricot_file)}))):
        task = make_task(name, options)
        ids = [it.id for it in task.items()]
        drawn = {n: [it.id for it in prepare([task], None, n)[0].items] for n in (20, 40, 58)}
        assert set(drawn[20]) < set(drawn[40]) < set(drawn[58]), name
        for n, got in drawn.items():  # release order kept
            assert len(got) == n and got == sorted(got, key=ids.index)
        other = make_task(name, TaskOptions(**{**options.__dict__, "seed": 1}))
        assert [it.id for it in prepare([other], None, 20)[0].items] != drawn[20]  # the seed draws
        assert [it.id for it in prepare([task], None, 5000)[0].items] == ids  # more than it holds: all


def test_the_order_is_one_another_module_can_follow(discotex_dir):
    from abricot_local.tasks.selection import kept, sample_order

    task = make_task("discotex", TaskOptions(data_dir=str(discotex_dir)))
    items = task.items()
    order = sample_order(len(items), task.options.seed)
    assert sorted(order) == list(range(len(items)))  # a permutation
    for n in (1, 20, 77):
        assert kept(len(items), task.options.seed, sample=n) == tuple(sorted(order[:n]))  # release order kept
        assert [items[k].id for k in kept(len(items), task.options.seed, sample=n)] == \
            [it.id for it in prepare([task], None, n)[0].items]


def test_a_grown_run_is_the_fresh_run_bit_for_bit(tmp_path, discotex_dir):
    from abricot_local.run.check import check_run

    grown, fresh = tmp_path / "grown", tmp_path / "fresh"
    assert run(discotex_dir, grown, "--sample", 20).exit_code == 0
    before = files(grown)
    r = run(discotex_dir, grown, "--sample", 40, "--resume")
    assert r.exit_code == 0, r.output
    assert "grows from --sample 20 to --sample 40" in r.stderr and "20 items left (20 saved)" in r.stderr
    assert run(discotex_dir, fresh, "--sample", 40).exit_code == 0
    same_run(grown, fresh)
    entry = json.loads((grown / "results.json").read_text())["tasks"]["discotex"]
    assert entry["scored_now"] == 20 and entry["n"] == entry["sampled"] == 40
    assert set(before["samples-discotex.jsonl"].splitlines()) < set(files(grown)["samples-discotex.jsonl"].splitlines())
    assert not (grown / ".checkpoint").exists()
    rep = check_run(grown, data_dir=str(discotex_dir), atol=0.0)  # re-scored like any run
    assert rep.checked == 40 and rep.reproduced and rep.max_abs_diff == 0.0
    again = run(discotex_dir, grown, "--sample", 40, "--resume")  # the same size: complete, nothing written
    assert again.exit_code == 0 and "complete: nothing to score" in again.stderr


def test_a_run_does_not_shrink(tmp_path, discotex_dir, monkeypatch):
    out = tmp_path / "o"
    assert run(discotex_dir, out, "--sample", 20).exit_code == 0
    before = files(out)
    r = run(discotex_dir, out, "--sample", 10, "--resume")
    assert r.exit_code != 0 and "a run does not shrink" in r.output and "--sample 20 or more" in r.output
    assert files(out) == before  # nothing written
    limited = tmp_path / "l"
    assert run(discotex_dir, limited, "--limit", 10).exit_code == 0
    r = run(discotex_dir, limited, "--sample", 40, "--resume")  # --limit's items are no sample: not grown
    assert r.exit_code != 0 and "--sample: recorded none, given 40" in r.output
    stopped = tmp_path / "s"
    fail_after(monkeypatch, 5, KeyboardInterrupt)
    assert run(discotex_dir, stopped, "--sample", 20).exit_code == 130
    monkeypatch.undo()
    r = run(discotex_dir, stopped, "--sample", 10, "--resume")
    assert r.exit_code != 0 and "a run does not shrink" in r.output
    # an interrupted run grows as a finished one does
    r = run(discotex_dir, stopped, "--sample", 30, "--resume")
    assert r.exit_code == 0 and "25 items left (5 saved)" in r.stderr, r.output
    assert run(discotex_dir, tmp_path / "fresh", "--sample", 30).exit_code == 0
    same_run(stopped, tmp_path / "fresh")


def test_an_interrupted_grow_resumes_into_the_fresh_run(tmp_path, discotex_dir, monkeypatch):
    from abricot_local.run.states import run_state

    out, fresh = tmp_path / "o", tmp_path / "fresh"
    assert run(discotex_dir, out, "--sample", 20).exit_code == 0
    fail_after(monkeypatch, 5, KeyboardInterrupt)
    r = run(discotex_dir, out, "--sample", 40, "--resume")
    monkeypatch.undo()
    assert r.exit_code == 130 and "25 of 40 items" in r.output
    assert not (out / "results.json").exists() and not (out / "samples-discotex.jsonl").exists()  # no partial results
    state = run_state(out)
    assert (state.state, state.done, state.total) == ("interrupted", 25, 40)
    r = run(discotex_dir, out, "--sample", 30, "--resume")
    assert r.exit_code != 0 and "a run does not shrink" in r.output
    r = run(discotex_dir, out, "--sample", 40, "--resume")
    assert r.exit_code == 0, r.output
    assert run(discotex_dir, fresh, "--sample", 40).exit_code == 0
    same_run(out, fresh)
    assert json.loads((out / "results.json").read_text())["tasks"]["discotex"]["scored_now"] == 15


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError("the backend broke")])
def test_a_grow_stopped_before_a_new_item_leaves_the_run_as_it_was(tmp_path, discotex_dir, monkeypatch, stop):
    out = tmp_path / "o"
    assert run(discotex_dir, out, "--sample", 20).exit_code == 0
    before = files(out)
    fail_after(monkeypatch, 0, stop)
    r = CliRunner().invoke(cli, [str(a) for a in ("run", "fake", *FAKE, "--data-dir", discotex_dir, "--sample", 40,
                                                   "--resume", "--out", out)])
    monkeypatch.undo()
    assert r.exit_code != 0
    if stop is KeyboardInterrupt:
        assert "is its finished --sample 20 run, as it was" in r.output
    assert files(out) == before  # its results, no state file, no checkpoint


def test_grown_shards_merge_into_the_fresh_run(tmp_path, discotex_dir):
    from abricot_local.run.merge import merge

    parts = [tmp_path / f"s{k}" for k in (1, 2)]
    for k, part in enumerate(parts, 1):
        assert run(discotex_dir, part, "--sample", 20, "--shard", f"{k}/2").exit_code == 0
        r = run(discotex_dir, part, "--sample", 40, "--shard", f"{k}/2", "--resume")
        assert r.exit_code == 0, r.output
        assert f"the items it holds are kept (shard {k}/2 of a sample lies inside shard {k}/2" in r.output
        fresh = tmp_path / f"f{k}"
        assert run(discotex_dir, fresh, "--sample", 40, "--shard", f"{k}/2").exit_code == 0
        same_run(part, fresh)  # the shard of the grown set
    merge(parts, tmp_path / "merged")
    assert run(discotex_dir, tmp_path / "whole", "--sample", 40).exit_code == 0
    merged, whole = (tmp_path / d for d in ("merged", "whole"))
    assert (merged / "samples-discotex.jsonl").read_bytes() == (whole / "samples-discotex.jsonl").read_bytes()
    assert [json.loads((d / "results.json").read_text())["tasks"]["discotex"]["metrics"] for d in (merged, whole)] \
        == [json.loads((whole / "results.json").read_text())["tasks"]["discotex"]["metrics"]] * 2


def test_a_sweep_grows_each_model(tmp_path, discotex_dir):
    root = tmp_path / "sweep"
    args = ("run", "fake-a", "fake-b", *FAKE, "--data-dir", discotex_dir, "--out", root)
    assert invoke(*args, "--sample", 6).exit_code == 0
    r = invoke(*args, "--sample", 9, "--resume")
    assert r.exit_code == 0 and "holds this run, complete: nothing to score" not in r.output and r.stderr.count("grows from") == 2
    for name in ("fake-a", "fake-b"):
        entry = json.loads((root / name / "results.json").read_text())["tasks"]["discotex"]
        assert (entry["n"], entry["scored_now"]) == (9, 3)


@pytest.fixture
def as_llama(tmp_path):
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nn_ctx = 8192\nreproduces = "ABRICOT paper: llama-3.1-8b"\n',
                      encoding="utf-8")
    return models


def test_the_verdict_that_cannot_tell_yet_prints_the_command_that_grows_the_run(tmp_path, abricot_file, as_llama,
                                                                                monkeypatch):
    import re
    import shlex

    out = tmp_path / "my run"
    argv = ["run", "fake-as-llama", "--models", str(as_llama), "--tasks", "abricot", "--data",
            f"abricot={abricot_file}", "--margin", "0.5"]
    monkeypatch.setattr(sys, "argv", ["abricot-local", *argv, "--sample", "20", "--out", str(out)])
    r = invoke(*sys.argv[1:])
    assert r.exit_code == 0, r.output
    assert "cannot tell yet within 0.5" in r.stdout
    m = int(re.search(r"to settle what cannot tell yet: about (\d+) items; the run grows", r.stdout).group(1))
    line = r.stdout.splitlines()[r.stdout.splitlines().index(next(ln for ln in r.stdout.splitlines()
                                                                   if "to settle what" in ln)) + 1].strip()
    assert shlex.split(line) == ["abricot-local", *argv, "--out", str(out), "--sample", str(m), "--resume"]
    grown = invoke(*shlex.split(line)[1:])  # the command as printed grows the run
    assert grown.exit_code == 0 and f"grows from --sample 20 to --sample {m}" in grown.stderr
    # a --limit run: the items drawn anew, in a new folder
    monkeypatch.setattr(sys, "argv", ["abricot-local", *argv, "--limit", "20", "--out", str(tmp_path / "l")])
    r = invoke(*sys.argv[1:])
    lines = r.stdout.splitlines()
    k = next(i for i, ln in enumerate(lines) if "to settle what" in ln)
    assert "in a new run (--limit takes the first ones)" in lines[k]
    assert shlex.split(lines[k + 1])[-2:] == ["--sample", re.search(r"about (\d+) items", lines[k]).group(1)]
    assert "--out" not in lines[k + 1] and "--limit" not in lines[k + 1]


def test_the_api_says_the_call_that_grows_the_run(tmp_path, abricot_file, as_llama):
    out = tmp_path / "api"
    kw = dict(models_file=str(as_llama), data={"abricot": str(abricot_file)}, margin=0.5, progress=False)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        api.evaluate("fake-as-llama", "abricot", sample=20, out=out, **kw)
    advice = [str(w.message) for w in said if "to settle what cannot tell yet" in str(w.message)]
    assert len(advice) == 1 and f"abricot_local.evaluate(..., out={str(out)!r}, resume=True, sample=" in advice[0]
