"""A folder another live process holds (its ``.lock`` flock'd) is "in use" by one rule, run.owned.lock_holder: the
run, its dry run (with or without --resume) and the resume refuse it in the same words (owned.guard), and `runs`
lists it as running, never as interrupted; once the lock is let go the folder is the interrupted run it holds.
The rule opens the existing ``.lock`` only, never through a link, and creates none. (The other process is played by
this one: a flock on another open file of ``.lock`` conflicts as another process's would.)"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.run.owned import lock_holder
from conftest import fail_after

PID = "424242"


@pytest.fixture
def base(discotex_dir):
    return ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(discotex_dir),
            "--n-ctx", "4096", "--sample", "4"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def held(lock: Path) -> int:
    """``lock`` made and flock'd as a run holds it, its pid written; the descriptor (closing it lets go)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, PID.encode())
    return fd


def test_a_folder_in_use_is_said_in_use_by_the_run_its_dry_run_and_runs(tmp_path, base, monkeypatch):
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        fail_after(m, 2, KeyboardInterrupt)
        assert invoke(*base, "--out", out).exit_code == 130  # an interrupted run, 2 items saved
    said = f"error: {out} is in use by another run (process {PID}); wait for it or choose another --out"
    fd = held(out / ".lock")
    try:
        codes = set()
        for extra in (["--dry-run"], ["--dry-run", "--resume"], [], ["--resume"]):
            r = invoke(*base, "--out", out, *extra)
            assert r.output.strip() == said, extra
            codes.add(r.exit_code)
        assert len(codes) == 1 and 0 not in codes  # the run's refusal, its code too
        r = invoke("runs", out)
        assert r.exit_code == 0 and "running, 2 of 4 items" in r.output and "interrupted" not in r.output, r.output
        assert (out / "INTERRUPTED").is_file() and not (out / "RUNNING").exists()  # nothing written meanwhile
    finally:
        os.close(fd)
    r = invoke(*base, "--out", out, "--dry-run")  # let go: the interrupted run it holds
    assert r.exit_code in codes and "holds an interrupted run (2 items saved)" in r.output, r.output
    assert "interrupted, 2 of 4 items" in invoke("runs", out).output


def test_the_rule_reads_no_link_and_makes_no_lock(tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    assert lock_holder(here) is None and not (here / ".lock").exists()  # none made
    fd = held(there / ".lock")
    try:
        assert lock_holder(there) == PID
        (here / ".lock").symlink_to(there / ".lock")
        assert lock_holder(here) is None  # never through a link (the run refuses the link itself)
    finally:
        os.close(fd)
    assert lock_holder(there) is None  # let go: a killed run's lock holds nothing
