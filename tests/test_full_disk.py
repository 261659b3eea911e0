"""A full disk and the output folder's lock (issue 21, items 5 and 10): one line naming the file
that could not be written, no `.lock` left, the state file FAILED with that reason (or no folder
when nothing was written), and `--resume` continuing; the lock taken before the model loads; a
failed `--resume` creating no folder. Fake backend, invented data: no model."""

from __future__ import annotations

import errno
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local import jsonfiles
from abricot_local.run import execute, folder as results, states
from abricot_local.cli import cli
from invented_data import write_discotex

PAGE = 4096  # tmpfs allocates whole pages


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def data(tmp_path):
    return write_discotex(tmp_path / "d", 4)  # 8 items


def run_fake(data, out, *extra):
    return invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--out", out, *extra)


def markers(out: Path) -> list[str]:
    return sorted(m for m in results.MARKERS if (out / m).exists())


def the_one_error(r) -> str:
    """The run's only error line, which must name a file it could not write; no traceback."""
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error")]
    assert r.exit_code == 2 and len(errors) == 1, r.output
    assert errors[0].startswith("error: no space left on device writing "), r.output
    assert "Traceback" not in r.output and not isinstance(r.exception, OSError), r.output
    return errors[0].removeprefix("error: ")


def check_left_as_promised(out: Path, message: str) -> None:
    """No lock left; either no folder (nothing was written) or FAILED saying why, beside what was saved."""
    assert not (out / results.LOCK).exists()
    if out.exists():
        assert markers(out) == ["FAILED"], sorted(p.name for p in out.iterdir())
        assert f"error: {message}\n" in (out / "FAILED").read_text()
        state = states.run_state(out)
        assert state.state == "failed" and state.detail == message and state.total == 8


def finish(data, out: Path) -> None:
    """Space is back: --resume continues a folder that holds a run, a new run starts otherwise."""
    r = run_fake(data, out, *(["--resume"] if out.exists() else []))
    assert r.exit_code == 0, r.output
    assert markers(out) == [] and not (out / results.LOCK).exists()


# -- a real full filesystem -------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs (mount needs root or CAP_SYS_ADMIN: otherwise the test skips saying so)."""
    where = tmp_path / "disk"
    where.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                              capture_output=True, text=True)
    except OSError as exc:
        pytest.skip(f"cannot mount a small tmpfs here ({exc.strerror}); the injected-ENOSPC test covers the code")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip()}); "
                    "the injected-ENOSPC test covers the code")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=True)  # lazy: a failed test may hold a file open


def fill(disk: Path, free_pages: int) -> Path:
    """Fill ``disk`` but ``free_pages`` pages; the filler's path (delete it to free the space)."""
    filler = disk / "filler"
    filler.unlink(missing_ok=True)
    total = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    filler.write_bytes(b"\0" * (total - free_pages * PAGE))
    assert os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize == free_pages * PAGE
    return filler


def test_a_real_full_disk_at_every_write_is_one_line_and_resumes(tmp_path, data, small_disk):
    """Before: an OSError traceback from the lock or the checkpoint, a stale .lock, RUNNING saying
    "0 of 3" and an empty checkpoint. Each page count below stops the run at another write."""
    ref = tmp_path / "ref"
    assert run_fake(data, ref).exit_code == 0
    named = []
    for free in range(0, 16):
        out = small_disk / f"o{free}"
        filler = fill(small_disk, free)
        r = run_fake(data, out)
        filler.unlink()
        if r.exit_code == 0:
            break
        message = the_one_error(r)
        named.append(Path(message.removeprefix("no space left on device writing ")).relative_to(out))
        check_left_as_promised(out, message)
        finish(data, out)
        assert (out / "samples-discotex.jsonl").read_bytes() == (ref / "samples-discotex.jsonl").read_bytes()
        for f in out.iterdir():
            f.unlink()
        out.rmdir()
    else:
        raise AssertionError("the run never fitted in 64 KiB")
    assert {str(p) for p in named} >= {".lock", "RUNNING", ".checkpoint/run.json",
                                       ".checkpoint/samples-discotex.jsonl", "results.json"}, named


# -- the same, injected (any machine) ---------------------------------------------------------
class FullFor:
    """Writes to files named in ``full`` fail with ENOSPC after ``allowed[name]`` writes (0: at
    once); a file rewritten in place ("r+": its own blocks) still works, as on a full disk."""

    def __init__(self, monkeypatch, full: set[str], allowed: dict[str, int] | None = None):
        self.full, self.allowed = set(full), dict(allowed or {})
        self.temps: dict[int, str] = {}
        real_open, real_fdopen, real_mkstemp = results.open_own, os.fdopen, tempfile.mkstemp

        def mkstemp(*a, **kw):  # atomic_write's temp file stands for its target
            fd, path = real_mkstemp(*a, **kw)
            self.temps[fd] = Path(path).name[1:].rsplit(".", 2)[0]  # ".results.json.x1y2.tmp"
            return fd, path

        def fdopen(fd, mode="r", *a, **kw):
            fh = real_fdopen(fd, mode, *a, **kw)
            return self.wrap(fh, self.temps.pop(fd, ""), mode)

        def opener(file, flags, mode):  # the output folder's own files, opened never through a link
            return self.wrap(real_open(file, flags, mode), Path(file).name, mode)

        monkeypatch.setattr(jsonfiles.tempfile, "mkstemp", mkstemp)
        monkeypatch.setattr(jsonfiles.os, "fdopen", fdopen)
        monkeypatch.setattr(results, "open_own", opener)

    def wrap(self, fh, name: str, mode: str):
        if name not in self.full or mode.startswith("r"):  # reads, and rewrites in place
            return fh
        return _Full(fh, self, name)


class _Full:
    def __init__(self, fh, disk: FullFor, name: str):
        self._fh, self._disk, self._name = fh, disk, name

    def write(self, text):
        left = self._disk.allowed.get(self._name, 0)
        if left <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        self._disk.allowed[self._name] = left - 1
        return self._fh.write(text)

    def __getattr__(self, key):
        return getattr(self._fh, key)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


@pytest.mark.parametrize("full, allowed", [
    ({".lock"}, {}),
    ({"RUNNING"}, {}),
    ({"run.json"}, {}),
    ({"samples-discotex.jsonl"}, {}),  # the checkpoint's first line
    ({"samples-discotex.jsonl", "FAILED"}, {"samples-discotex.jsonl": 2}),  # FAILED by rewriting RUNNING in place
    ({"results.json"}, {}),
])
def test_enospc_at_each_write_is_one_line_and_resumes(tmp_path, data, monkeypatch, full, allowed):
    ref = tmp_path / "ref"
    assert run_fake(data, ref).exit_code == 0
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        FullFor(m, full, allowed)
        r = run_fake(data, out)
    message = the_one_error(r)
    assert Path(message.removeprefix("no space left on device writing ")).name in full
    check_left_as_promised(out, message)
    assert out.exists() == (full not in ({".lock"}, {"RUNNING"}))  # nothing written: no folder
    if allowed:
        assert "items: 2 of 8 items" in (out / "FAILED").read_text()
    finish(data, out)
    assert (out / "samples-discotex.jsonl").read_bytes() == (ref / "samples-discotex.jsonl").read_bytes()


# -- the lock before the model (issue 21 item 10) ---------------------------------------------
def no_load(plan, **_):
    raise AssertionError("the model was loaded for a run the folder refuses")


def test_a_second_run_on_a_folder_is_refused_before_its_model_loads(tmp_path, data, monkeypatch):
    out = tmp_path / "o"
    held = results.OutputDir(out)
    held.acquire()
    try:
        with monkeypatch.context() as m:
            m.setattr(execute, "open_backend", no_load)
            r = run_fake(data, out)
        assert r.exit_code == 2 and f"in use by another run (process {os.getpid()})" in r.output, r.output
    finally:
        held.release()
    assert not out.exists()  # the holder wrote nothing: its folder went with its lock
    assert run_fake(data, out).exit_code == 0
    with monkeypatch.context() as m:  # the folder's other refusals come before the load too
        m.setattr(execute, "open_backend", no_load)
        r = run_fake(data, out)
    assert r.exit_code == 2 and "already holds a finished run" in r.output, r.output


def test_a_failed_resume_creates_no_folder(tmp_path, data):
    missing = tmp_path / "no" / "such"
    r = run_fake(data, missing, "--resume")
    assert r.exit_code == 2 and f"nothing to resume: {missing} does not exist" in r.output, r.output
    assert not (tmp_path / "no").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_fake(data, empty, "--resume")  # a folder holding nothing of a run (a job killed before it began)
    assert r.exit_code == 0 and f"nothing saved in {empty}: the run starts there" in r.output, r.output
    assert (empty / "results.json").is_file()

