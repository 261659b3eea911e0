"""A run whose parts ran at different thread counts (a --resume, a merge of shards) states the count that made its
thread-dependent numbers, or is refused where no one count did (docs/numerics.md#threads; record/kernel_path.py).
The fake backend's numbers depend on no thread count: here it reports a count and counts its decode calls as
thread dependent when told to, so what is recorded and refused can be held against what it counted."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.record import kernel_path
from abricot_local.record.schema import Kernels
from conftest import fail_after

NO_OPTION = "resume with the backend running 1 thread (backend 'fake' has no --threads option"


@pytest.fixture
def threads(monkeypatch):
    """The fake backend's thread count (``n``) and whether its decode calls depend on it (``dep``); ``calls``:
    the thread-dependent calls it made, every process of the test counted."""
    from abricot_local.backends.fake import FakeBackend, FakeSession

    state = {"n": 1, "dep": False, "calls": 0}

    def thread_dependent(self, entries):
        state["calls"] += state["dep"]
        return state["dep"]

    real = FakeBackend.provenance

    def provenance(self):
        p = real(self)
        return replace(p, extra={**p.extra, "threads": state["n"]}, kernels=replace(p.kernels, threads=state["n"]))

    monkeypatch.setattr(FakeSession, "thread_dependent", thread_dependent)
    monkeypatch.setattr(FakeBackend, "provenance", provenance)
    return state


@pytest.fixture
def base(discotex_dir):
    return ["run", "fake", "--backend", "fake", "--data-dir", str(discotex_dir), "--sample", "6"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def provenance(out):
    return json.loads((out / "results.json").read_text())["provenance"]


def interrupted(monkeypatch, base, out, after):
    with monkeypatch.context() as m:
        fail_after(m, after, KeyboardInterrupt)
        assert invoke(*base, "--out", out).exit_code == 130


def test_resume_with_another_count_is_refused_where_the_saved_items_calls_depended(tmp_path, monkeypatch, threads,
                                                                                     base):
    out = tmp_path / "o"
    threads.update(dep=True)
    interrupted(monkeypatch, base, out, 2)
    threads["n"] = 2
    r = invoke(*base, "--out", out, "--resume")
    # the fake has no --threads option: the advice names none (backends.has_option), but the count to run at
    assert r.exit_code != 0 and "scored with 1 thread (" in r.output and NO_OPTION in r.output, r.output
    assert "--threads 1" not in r.output
    assert not (out / "results.json").exists()
    threads["n"] = 1
    r = invoke(*base, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    p = provenance(out)
    assert p["kernels"]["threads"] == p["threads"] == 1
    assert p["kernels"]["thread_dependent"] == threads["calls"] > 0  # both processes' calls
    assert not (out / ".checkpoint").exists()


def test_resume_with_another_count_states_the_count_that_made_the_dependent_numbers(tmp_path, monkeypatch, threads,
                                                                                      base):
    out = tmp_path / "o"
    interrupted(monkeypatch, base, out, 2)  # 1 thread, no call depends on it
    threads.update(n=2, dep=True)
    r = invoke(*base, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    p = provenance(out)
    assert p["kernels"]["threads"] == p["threads"] == 2 and p["kernels"]["thread_dependent"] == threads["calls"] > 0
    # and where no call of either part depended: the count of the process that finished (any count gives them)
    threads.update(n=1, dep=False)
    interrupted(monkeypatch, base, tmp_path / "p", 2)
    threads["n"] = 3
    assert invoke(*base, "--out", tmp_path / "p", "--resume").exit_code == 0
    p = provenance(tmp_path / "p")
    assert (p["kernels"]["threads"], p["kernels"]["thread_dependent"]) == (3, 0)


def test_a_finished_run_grown_with_another_count_is_refused_where_its_calls_depended(tmp_path, threads, base):
    out, small = tmp_path / "o", [a if a != "6" else "3" for a in base]
    threads.update(dep=True)
    assert invoke(*small, "--out", out).exit_code == 0
    before, threads["n"] = (out / "results.json").read_bytes(), 2
    r = invoke(*base, "--out", out, "--resume")
    assert r.exit_code != 0 and NO_OPTION in r.output and "--threads 1" not in r.output, r.output
    assert (out / "results.json").read_bytes() == before  # the finished run left as it was
    threads["n"] = 1
    assert invoke(*base, "--out", out, "--resume").exit_code == 0
    p = provenance(out)
    assert p["kernels"]["threads"] == 1 and p["kernels"]["thread_dependent"] == threads["calls"] > 0


def test_a_checkpoint_of_an_earlier_version_states_no_count(tmp_path, monkeypatch, threads, base):
    out = tmp_path / "o"
    interrupted(monkeypatch, base, out, 2)
    (out / ".checkpoint" / "threads.jsonl").unlink()  # what an earlier abricot-local left: calls not counted
    threads["n"] = 2
    assert invoke(*base, "--out", out, "--resume").exit_code == 0
    p = provenance(out)
    assert p["kernels"]["threads"] is None and p["threads"] is None and "thread_dependent" not in p["kernels"]


def test_merge_states_the_count_of_the_shards_whose_calls_depended_or_refuses_two(tmp_path, threads, base):
    def shard(k, n, dep, folder):
        threads.update(n=n, dep=dep, calls=0)
        assert invoke(*base, "--shard", f"{k}/2", "--out", tmp_path / folder).exit_code == 0
        return threads["calls"]

    shard(1, 1, False, "a1")
    calls = shard(2, 2, True, "a2")
    assert invoke("merge", tmp_path / "a1", tmp_path / "a2", "--out", tmp_path / "am").exit_code == 0
    p = provenance(tmp_path / "am")
    assert p["kernels"]["threads"] == p["threads"] == 2 and p["kernels"]["thread_dependent"] == calls > 0

    shard(1, 1, True, "b1")
    r = invoke("merge", tmp_path / "b1", tmp_path / "a2", "--out", tmp_path / "bm")
    assert r.exit_code != 0 and "score shard(s) 2/2 again with the backend running 1 thread (backend 'fake' has no " \
        "--threads option" in r.output and "--threads 1" not in r.output, r.output
    assert not (tmp_path / "bm").exists()

    for name in ("a1", "a2"):  # shards of an earlier version: calls not counted, so no count is stated
        f = tmp_path / name / "results.json"
        rec = json.loads(f.read_text())
        del rec["provenance"]["kernels"]["thread_dependent"]
        f.write_text(json.dumps(rec))
    assert invoke("merge", tmp_path / "a1", tmp_path / "a2", "--out", tmp_path / "cm").exit_code == 0
    assert provenance(tmp_path / "cm")["kernels"]["threads"] is None


def test_a_run_stating_no_count_is_another_kernel_path_where_a_call_depends():
    rec, here = Kernels(runtime="r", build="portable", threads=None), Kernels(runtime="r", build="portable", threads=2)
    note, moved = kernel_path.thread_note(rec, here, 3)
    assert moved and "not recorded as one count, here 2; 3 decode call(s)" in note
    assert kernel_path.thread_note(rec, here, 0)[1] is False
    assert kernel_path.joined_threads([(1, 0), (2, 4), (2, 1)], 1) == (2, 5)
    assert kernel_path.joined_threads([(1, 0), (2, 0)], 3) == (3, 0)
    assert kernel_path.joined_threads([(1, None), (2, 0)], 2) == (1, None)
    assert kernel_path.thread_conflict([(1, 2), (2, 0), (3, 1)]) == (1, 3)
