"""A printed or stored resume command works wherever and whenever it is pasted: the tasks a run resolved (no
--tasks given) are named, so data that lands later makes no other run of it; every path option is absolute;
RUNNING (what a kill -9 leaves) and FAILED hold the command as INTERRUPTED does, and `runs` and `check` say it;
a full disk at the lock says how to go on. Fake backend, invented data, in-process."""

from __future__ import annotations

import errno
import shlex
import shutil
import sys
import types
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.backends.fake import FakeBackend
from abricot_local.cli import cli
from abricot_local.errors import NoSpaceError
from abricot_local.run import folder as results, states
from invented_data import write_discotex
from tests.conftest import FIXTURE, fail_after


def invoke(monkeypatch, args: list[str]):
    """`abricot-local ARGS` as a shell runs it: sys.argv is what its printed commands replay."""
    monkeypatch.setattr(sys, "argv", ["abricot-local", *args])
    return CliRunner().invoke(cli, args)


def said(r, head: str = "resume with: ") -> str:
    return next(ln for ln in r.output.splitlines() if head in ln).split(head, 1)[1]


def stored(path: Path) -> str:
    """The resume command a state file holds."""
    return next(ln for ln in path.read_text().splitlines() if ln.startswith("resume: ")).removeprefix("resume: ")


@pytest.fixture
def data(tmp_path):
    write_discotex(tmp_path / "d" / "discotex", 4)  # 8 items; no ABRICOT data yet
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    return tmp_path / "d"


RUN = ["run", "fake", "--backend", "fake", "--data-dir", "../d"]  # no --tasks: every task whose data is here


def test_a_pasted_resume_command_names_the_tasks_it_ran_and_works_from_anywhere_after_data_lands(
        tmp_path, data, monkeypatch):
    monkeypatch.chdir(tmp_path / "x")
    assert invoke(monkeypatch, [*RUN, "--out", "ref"]).exit_code == 0
    with monkeypatch.context() as m:
        fail_after(m, 2, KeyboardInterrupt)
        r = invoke(monkeypatch, [*RUN, "--out", "rel"])
    assert r.exit_code == 130, r.output
    line = said(r)
    assert stored(tmp_path / "x" / "rel" / "INTERRUPTED") == line
    assert shlex.split(line) == ["abricot-local", "run", "fake", "--backend", "fake", "--data-dir", str(data),
                                 "--out", str(tmp_path / "x" / "rel"), "--tasks", "discotex", "--resume"]
    (data / "abricot").mkdir()  # another task's data lands
    shutil.copy(FIXTURE, data / "abricot" / "dataset_it.csv")
    monkeypatch.chdir(tmp_path / "y")  # pasted elsewhere (was: --tasks recorded discotex, given abricot_abs,...)
    r = invoke(monkeypatch, shlex.split(line)[1:])
    assert r.exit_code == 0, r.output
    name = "samples-discotex.jsonl"
    assert (tmp_path / "x" / "rel" / name).read_bytes() == (tmp_path / "x" / "ref" / name).read_bytes()
    assert sorted(p.name for p in (tmp_path / "x" / "rel").glob("samples-*")) == [name]


def test_running_holds_the_resume_command_a_kill_leaves_and_runs_and_check_say_it(tmp_path, data, monkeypatch):
    monkeypatch.chdir(tmp_path / "x")
    out = tmp_path / "x" / "k"
    seen, real = [], FakeBackend.score_many

    def score_many(self, reqs):  # as a kill -9 finds the folder: RUNNING, 2 items saved
        if len(seen) == 2:
            seen.append((out / results.RUNNING).read_text())
            raise KeyboardInterrupt
        seen.append(None)
        return real(self, reqs)

    with monkeypatch.context() as m:
        m.setattr(FakeBackend, "score_many", score_many)
        r = invoke(monkeypatch, [*RUN, "--out", "k"])
    assert r.exit_code == 130, r.output
    line = said(r)
    (out / "INTERRUPTED").unlink()
    (out / results.RUNNING).write_text(seen[-1])
    (out / results.LOCK).write_text("999999")  # no process holds it
    assert stored(out / results.RUNNING) == line and "--tasks discotex" in line
    monkeypatch.chdir(tmp_path / "y")
    r = invoke(monkeypatch, ["runs", str(out)])
    assert r.exit_code == 0 and "stopped, 2 of 8 items" in r.output and r.output.rstrip().endswith(
        f"resume with: {line}"), r.output
    r = invoke(monkeypatch, ["check", str(out)])
    assert r.exit_code != 0 and f"resume with: {line}" in r.output, r.output
    r = invoke(monkeypatch, shlex.split(line)[1:])
    assert r.exit_code == 0 and (out / "results.json").is_file(), r.output


def test_failed_keeps_the_resume_command_the_terminal_said(tmp_path, data, monkeypatch):
    monkeypatch.chdir(tmp_path / "x")
    with monkeypatch.context() as m:
        fail_after(m, 2, NoSpaceError("no space left on device writing somewhere"))
        r = invoke(monkeypatch, [*RUN, "--out", "f"])
    assert r.exit_code == 2, r.output
    line = said(r, "once there is space again, resume with: ")
    out = tmp_path / "x" / "f"
    assert stored(out / "FAILED") == line and f"--out {out}" in line
    state = states.run_state(out)
    assert state.detail == "no space left on device writing somewhere"  # the error, as it was
    assert state.describe().endswith(f"; resume with: {line}")


class _FullLock:
    """The lock file's pid written to a full disk."""

    def __init__(self, fh):
        self._fh = fh

    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, key):
        return getattr(self._fh, key)


def test_a_full_disk_at_the_lock_says_how_to_go_on(tmp_path, data, monkeypatch):
    monkeypatch.chdir(tmp_path / "x")
    real = results.open_own

    def full_lock(path, flags, mode):
        fh = real(path, flags, mode)
        return _FullLock(fh) if Path(path).name == results.LOCK else fh

    with monkeypatch.context() as m:
        m.setattr(results, "open_own", full_lock)
        r = invoke(monkeypatch, [*RUN, "--out", "new"])
    lines = r.output.splitlines()
    at = lines.index(next(ln for ln in lines if ln.startswith("error: no space left on device writing ")))
    assert r.exit_code == 2 and lines[at].endswith(".lock"), r.output
    assert lines[at + 1] == "nothing scored is kept; once there is space again, run the same command again"
    with monkeypatch.context() as m:  # a --resume of a run that holds items: the command that resumes it
        fail_after(m, 2, KeyboardInterrupt)
        line = said(invoke(monkeypatch, [*RUN, "--out", "cut"]))
    with monkeypatch.context() as m:
        m.setattr(results, "open_own", full_lock)
        r = invoke(monkeypatch, [*RUN, "--out", "cut", "--resume"])
    assert r.exit_code == 2 and r.output.rstrip().endswith(
        f"2 of 8 items (discotex 2/8) saved in cut; once there is space again, resume with: {line}"), r.output


def test_the_apis_resume_call_names_the_tasks_it_resolved_and_an_absolute_folder(tmp_path, data, monkeypatch):
    import abricot_local as al
    from abricot_local.run.session import Interrupted

    monkeypatch.chdir(tmp_path / "x")
    fail_after(monkeypatch, 2, KeyboardInterrupt)
    with pytest.raises(Interrupted) as err, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the skipped ABRICOT task's)
        al.evaluate("fake", backend="fake", data_dir="../d", out="o", progress=False)
    call = f"abricot_local.evaluate(..., tasks=['discotex'], out={str(tmp_path / 'x' / 'o')!r}, resume=True)"
    assert err.value.message.endswith(f"resume with: {call}")
    assert stored(tmp_path / "x" / "o" / "INTERRUPTED") == call


def test_the_advice_s_commands_name_the_tasks_and_absolute_paths(tmp_path, monkeypatch):
    from abricot_local.cli.run import grow_command, settle_command

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["abricot-local", "run", "m.gguf", "--data", "abricot=a/d.csv",
                                      "--data=discotex=~/t", "--models=my.toml", "--model-dir", "gg", "--sample", "10",
                                      "--out", "o"])
    grown = shlex.split(grow_command(Path("o"), 20, types.SimpleNamespace(sample=10, tasks=("abricot_abs@calamita",))))
    assert grown == ["abricot-local", "run", "m.gguf", "--data", f"abricot={tmp_path / 'a/d.csv'}",
                     "--data=discotex=~/t", f"--models={tmp_path / 'my.toml'}", "--model-dir", str(tmp_path / "gg"), "--out",
                     str(tmp_path / "o"), "--sample", "20", "--tasks", "abricot_abs", "--resume"]
    drawn = shlex.split(grow_command(Path("o"), 20, types.SimpleNamespace(sample=None, tasks=("discotex",))))
    assert "--out" not in drawn and "--resume" not in drawn and drawn[-2:] == ["--tasks", "discotex"]
    settle = shlex.split(settle_command(Path("o"), 40, types.SimpleNamespace(tasks=("discotex~card", "discotex"))))
    assert settle[-5:] == ["--max-items", "40", "--tasks", "discotex", "--resume"]
