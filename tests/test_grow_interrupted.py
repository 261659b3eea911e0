"""A grow of a finished run (`--resume` with a larger bound) cut after its first new item has removed results.json
(resume.reopen): its checkpoint keeps that record (`.checkpoint/grown-from.json`), so a --resume of the cut grow
keeps the looks the run's rules took (settle_record.earlier_in) and finishes as the uninterrupted grow does; a
`--sample` grow's note of the looks taken is kept however many grows later (settle_record.took_notes). A signal (a real
SIGINT or SIGTERM, sent as a user's lands) at any step of a grow leaves the finished run as it was or a grow that
resumes to the straight run, and says which; the lock is taken and given back whole. Fake backend, in-process."""

from __future__ import annotations

import json
import os
import shutil
import signal

import pytest
from click.testing import CliRunner
from conftest import fail_after

from abricot_local.cli import cli
from abricot_local.run import folder as folder_module

LOOKS = ("--until-settled", "--looks", "5,10")
TIMES = ("created", "wall_seconds")  # and per task: seconds, scored_now (this process's share of the work)


def run(out, models, data, *more):
    return CliRunner().invoke(cli, ["run", "fake-as-llama", "--models", str(models), "--tasks", "abricot_abs", "--data",
                                    f"abricot={data}", "--backend", "fake", "--n-ctx", "4096", "--margin", "0.3",
                                    *map(str, more), "--out", str(out)])


def untimed(out) -> dict:
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    for key in TIMES:
        doc.pop(key)
    for entry in doc["tasks"].values():
        entry.pop("seconds"), entry.pop("scored_now")
    return doc


def cut_grow(out, claims, abricot_file, monkeypatch, *grow):
    """The grow ``grow`` of the finished run in ``out`` stopped (Ctrl-C) after 3 new items."""
    with monkeypatch.context() as m:
        fail_after(m, 3, KeyboardInterrupt)
        assert run(out, claims, abricot_file, *grow, "--resume").exit_code == 130
    assert not (out / "results.json").exists() and (out / ".checkpoint" / "grown-from.json").is_file()


def test_an_interrupted_grow_resumed_is_the_uninterrupted_grow(tmp_path, claims, abricot_file, monkeypatch):
    """--max-items 15 (looks 5, 10, 15, open), grown to 30: cut, then resumed, it keeps the look at 15 (it planned
    5, 10, 30 afresh) and writes what the uninterrupted grow writes, save the times and this process's items."""
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert run(whole, claims, abricot_file, *LOOKS, "--max-items", 15).exit_code == 0
    shutil.copytree(whole, cut)
    assert run(whole, claims, abricot_file, *LOOKS, "--max-items", 30, "--resume").exit_code == 0
    cut_grow(cut, claims, abricot_file, monkeypatch, *LOOKS, "--max-items", 30)
    r = run(cut, claims, abricot_file, *LOOKS, "--max-items", 30, "--resume")
    assert r.exit_code == 0, r.output
    assert untimed(cut)["tasks"]["abricot_abs"]["sequential"]["planned"] == [5, 10, 15, 30]
    assert untimed(cut) == untimed(whole)
    assert (cut / "samples-abricot_abs.jsonl").read_bytes() == (whole / "samples-abricot_abs.jsonl").read_bytes()
    assert sorted(os.listdir(cut)) == ["results.json", "samples-abricot_abs.jsonl"]  # the kept record went too


def test_the_looks_note_of_a_sample_grow_is_kept_however_many_grows_later(tmp_path, claims, abricot_file,
                                                                          monkeypatch):
    """--sample 20 of a run whose rule took looks records the note; --sample 25 keeps it (it had nothing to read it
    from: a fixed-n record holds no rule), and so does --sample 30 cut and resumed (its checkpoint's record)."""
    out = tmp_path / "o"
    assert run(out, claims, abricot_file, *LOOKS, "--max-items", 15).exit_code == 0
    assert run(out, claims, abricot_file, "--sample", 20, "--resume").exit_code == 0
    note = [w for w in untimed(out)["tasks"]["abricot_abs"]["warnings"] if "took looks" in w]
    assert len(note) == 1 and "at 5, 10, 15 items before --sample 20" in note[0]
    r = run(out, claims, abricot_file, "--sample", 25, "--resume")
    assert r.exit_code == 0 and note[0] in r.stderr, r.output
    assert [w for w in untimed(out)["tasks"]["abricot_abs"]["warnings"] if "took looks" in w] == note
    cut_grow(out, claims, abricot_file, monkeypatch, "--sample", 30)
    assert run(out, claims, abricot_file, "--sample", 30, "--resume").exit_code == 0
    entry = untimed(out)["tasks"]["abricot_abs"]
    assert entry["n"] == 30 and [w for w in entry["warnings"] if "took looks" in w] == note


def test_a_kept_record_that_is_a_link_or_damaged_is_refused(tmp_path, claims, abricot_file, monkeypatch):
    """A kept record is read only as the run's own file: a link in its place is refused, and so is one that is no
    record (planned afresh, the rules would spend their looks' error again), saying what to do; nothing scored."""
    out = tmp_path / "o"
    assert run(out, claims, abricot_file, *LOOKS, "--max-items", 15).exit_code == 0
    cut_grow(out, claims, abricot_file, monkeypatch, *LOOKS, "--max-items", 30)
    kept = out / ".checkpoint" / "grown-from.json"
    os.replace(kept, tmp_path / "elsewhere.json")
    kept.symlink_to(tmp_path / "elsewhere.json")
    saved = (out / ".checkpoint" / "samples-abricot_abs.jsonl").read_bytes()
    r = run(out, claims, abricot_file, *LOOKS, "--max-items", 30, "--resume")
    assert r.exit_code != 0 and "symbolic link" in r.output, r.output
    assert (out / ".checkpoint" / "samples-abricot_abs.jsonl").read_bytes() == saved and kept.is_symlink()
    kept.unlink()
    kept.write_text("{", encoding="utf-8")
    r = run(out, claims, abricot_file, *LOOKS, "--max-items", 30, "--resume")
    assert r.exit_code != 0 and "grown-from.json is not valid JSON" in r.output and "remove it" in r.output, r.output
    assert (out / ".checkpoint" / "samples-abricot_abs.jsonl").read_bytes() == saved


# -- a signal at each step of a grow ----------------------------------------------------------------------------------
STEPS = ("replace", "unlink", "rmdir", "fsync")  # the file-system calls a signal is sent before (killat's)
REOPEN_STEPS = 10  # resume.reopen's, one task: 4 files written (fsync, replace each), results.json, its samples removed


@pytest.fixture
def signals():
    """SIGINT raising KeyboardInterrupt in this process (as a terminal's Ctrl-C does), whatever pytest found."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def signal_at(monkeypatch, sig, hit) -> dict:
    """Send ``sig`` to this process just before the first of the STEPS calls that ``hit(name, path)`` picks, once (a
    user's Ctrl-C or kill landing there); the state says which call it was."""
    state = {"hit": None}
    for name in STEPS:
        def call(*a, _real=getattr(os, name), _name=name, **kw):
            if state["hit"] is None and hit(_name, str(a[0]) if a else ""):
                state["hit"] = (_name, str(a[0]) if a else "")
                os.kill(os.getpid(), sig)
            return _real(*a, **kw)
        monkeypatch.setattr(os, name, call)
    return state


def in_reopen(monkeypatch, k: int):
    """``hit`` for :func:`signal_at`: the k-th call resume.reopen makes (the finished run made a checkpoint)."""
    state = {"on": False, "n": 0}
    real = folder_module.reopen

    def reopen(*a, **kw):
        state["on"] = True
        try:
            return real(*a, **kw)
        finally:
            state["on"] = False
    monkeypatch.setattr(folder_module, "reopen", reopen)

    def hit(_name, _path):
        state["n"] += state["on"]
        return state["on"] and state["n"] == k
    return hit


@pytest.fixture
def disco(discotex_dir, finished_run):
    """(args, finished, straight): the fake run of DISCOTEX's args, its finished --sample 3 run (make(into): a copy),
    and its straight --sample 8 run (read only)."""
    args = ("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(discotex_dir))
    return args, lambda into: finished_run(*args, "--sample", 3, into=into), finished_run(*args, "--sample", 8)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def tree(folder) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def same_run(a, b) -> None:
    """``a`` holds what the straight run in ``b`` holds: each task's numbers and samples, byte for byte."""
    ra, rb = (json.loads((f / "results.json").read_text(encoding="utf-8")) for f in (a, b))
    for key in ("metrics", "n", "config", "warnings", "sampled", "available"):
        assert {t: e.get(key) for t, e in ra["tasks"].items()} == {t: e.get(key) for t, e in rb["tasks"].items()}, key
    assert ra["config"] == rb["config"]
    assert sorted(os.listdir(a)) == sorted(os.listdir(b)) == ["results.json", "samples-discotex.jsonl"]
    assert (a / "samples-discotex.jsonl").read_bytes() == (b / "samples-discotex.jsonl").read_bytes()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("k", range(1, REOPEN_STEPS + 1))
def test_a_signal_at_each_step_of_reopening_a_finished_run_leaves_it_as_it_was_or_a_grow_that_resumes(
        tmp_path, monkeypatch, signals, disco, k, sig):
    """Before reopen removes results.json the finished run stays as it was (its checkpoint copies gone); after it,
    the checkpoint holds the whole run: INTERRUPTED, never tidied away as a finished run's leftovers (that deleted
    the only copy of the carried samples: `nothing to resume`, and the folder refused). Resumed, the straight run."""
    args, finished, straight = disco
    out = finished(tmp_path / "o")
    was = tree(out)
    with monkeypatch.context() as m:
        state = signal_at(m, sig, in_reopen(m, k))
        r = invoke(*args, "--sample", 8, "--resume", "--out", out)
    assert state["hit"] and r.exit_code == 130, (state, r.output)
    if (out / "results.json").exists():
        assert "is its finished --sample 3 run, as it was (no new item scored)" in r.output, r.output
        assert tree(out) == was and sorted(os.listdir(out)) == sorted(was)
    else:
        assert "3 of 8 items (discotex 3/8) saved in" in r.output and "resume with:" in r.output, r.output
        assert (out / ".checkpoint" / "run.json").is_file() and (out / "INTERRUPTED").is_file()
        assert "interrupted" in invoke("runs", out).output
    r = invoke(*args, "--sample", 8, "--resume", "--out", out)
    assert r.exit_code == 0, r.output
    same_run(out, straight)


def test_the_reopen_steps_are_the_ones_counted(tmp_path, monkeypatch, signals, disco):
    """REOPEN_STEPS is every step: one more is never reached (the grow runs to its end)."""
    args, finished, straight = disco
    out = finished(tmp_path / "o")
    with monkeypatch.context() as m:
        state = signal_at(m, signal.SIGINT, in_reopen(m, REOPEN_STEPS + 1))
        r = invoke(*args, "--sample", 8, "--resume", "--out", out)
    assert state["hit"] is None and r.exit_code == 0, r.output
    same_run(out, straight)


def test_a_signal_before_a_grow_is_planned_says_the_finished_run_as_it_was_and_how_to_grow_it(
        tmp_path, monkeypatch, disco):
    """Ctrl-C while the grow plans (hashing its data) found results.json there and took it as written by this run:
    exit 0, `complete`. It is the finished --sample 3 run, as it was: 130, and the call that grows it."""
    import abricot_local.run.plan as plan

    args, finished, straight = disco
    out = finished(tmp_path / "o")
    was = tree(out)

    def cut(*a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(plan, "make_plan", cut)
    r = invoke(*args, "--sample", 8, "--resume", "--out", out)
    assert r.exit_code == 130, r.output
    assert f"the run in {out} is its finished --sample 3 run, as it was (no new item scored)" in r.output, r.output
    assert "\ngrow it with: " in r.output and "complete" not in r.output  # (the call: this process's command line)
    assert tree(out) == was
    monkeypatch.undo()
    assert invoke(*args, "--sample", 8, "--resume", "--out", out).exit_code == 0
    same_run(out, straight)


def test_a_signal_before_an_until_settled_grow_is_planned_names_its_bound(tmp_path, claims, abricot_file, monkeypatch):
    """A run --until-settled grown by --max-items: it is said by its items and --until-settled, not as a --sample
    run; its grow call holds --max-items."""
    import abricot_local.run.plan as plan

    out = tmp_path / "o"
    assert run(out, claims, abricot_file, *LOOKS, "--max-items", 15).exit_code == 0

    def cut(*a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(plan, "make_plan", cut)
    r = run(out, claims, abricot_file, *LOOKS, "--max-items", 30, "--resume")
    assert r.exit_code == 130, r.output
    assert "is its finished run of 15 items (--until-settled), as it was (no new item scored)" in r.output, r.output
    assert "--sample" not in r.output.split("grow it with: ")[0]


@pytest.mark.parametrize("step,name,nth", [("rmdir", ".checkpoint", 1), ("rmdir", ".checkpoint", 2),
                                           ("unlink", ".lock", 1)])
def test_a_signal_once_a_grow_is_written_says_the_run_is_complete(tmp_path, monkeypatch, signals, disco, step, name,
                                                                  nth):
    """Ctrl-C as a finished grow tidies its checkpoint (finalize's, then the lock's release's) or gives back its lock:
    the run is complete (the grow's results.json written), not `its finished --sample 3 run, as it was`; no .lock is
    left beside it."""
    args, finished, straight = disco
    out = finished(tmp_path / "o")
    seen = []

    def hit(n, p):
        seen.extend([1] if n == step and p == str(out / name) else [])
        return len(seen) == nth and n == step and p == str(out / name)
    with monkeypatch.context() as m:
        state = signal_at(m, signal.SIGINT, hit)
        r = invoke(*args, "--sample", 8, "--resume", "--out", out)
    assert state["hit"], r.output
    assert r.exit_code == 0 and "as it was" not in r.output, r.output  # (the tidy-up completed, or said complete:)
    assert "interrupted" not in r.output or f"the run in {out} is complete (results.json is written)" in r.output
    same_run(out, straight)


def test_a_signal_as_the_lock_is_taken_leaves_no_lock(tmp_path, monkeypatch, signals, disco):
    """A Ctrl-C landing just after .lock is made (before the run holds it) is held until it does, then raised: the
    lock given back, the folder the run made removed (it left a folder holding only .lock, that nobody released)."""
    args, _, straight = disco
    out = tmp_path / "new"
    real = os.open

    def opened(path, *a, **kw):
        fd = real(path, *a, **kw)
        if str(path) == str(out / ".lock") and not sent:
            sent.append(fd)
            os.kill(os.getpid(), signal.SIGINT)
        return fd
    sent: list = []
    monkeypatch.setattr(os, "open", opened)
    r = invoke(*args, "--sample", 8, "--out", out)
    monkeypatch.undo()
    assert sent and r.exit_code == 130 and "nothing scored yet" in r.output, r.output
    assert not out.exists()


def test_a_signal_as_a_finished_runs_lock_is_given_back_leaves_no_lock(tmp_path, monkeypatch, signals, disco):
    """Ctrl-C at the last step of a run (its .lock removed): the run is complete (0), and no .lock is left."""
    args, _, straight = disco
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        state = signal_at(m, signal.SIGINT, lambda n, p: n == "unlink" and p == str(out / ".lock"))
        r = invoke(*args, "--sample", 8, "--out", out)
    assert state["hit"] and r.exit_code == 0 and "is complete" in r.output, r.output
    same_run(out, straight)


def test_a_resume_of_a_run_that_failed_before_its_first_item_says_it_starts_afresh(tmp_path, discotex_dir):
    """The recorded options (--n-ctx 64, which failed) are not carried: the run starts afresh with its own, and says
    so in one line."""
    args = ("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", discotex_dir, "--sample", 3)
    out = tmp_path / "o"
    r = invoke(*args, "--n-ctx", 64, "--out", out)
    assert r.exit_code != 0 and (out / "FAILED").is_file(), r.output
    r = invoke(*args, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    said = [ln for ln in r.output.splitlines() if "before its first item" in ln]
    assert said == [f"nothing saved in {out}: the run there failed before its first item, so this one starts there "
                    "afresh with its own options (the recorded ones are not carried)"], r.output
    assert json.loads((out / "results.json").read_text())["config"]["n_ctx"] != 64
