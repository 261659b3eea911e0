"""What in an output folder is the tool's own. A run creates, reads, writes and deletes only
files it made, and never through a symbolic link: before it takes a folder, :func:`guard`
refuses one inside another run (naming the outer run), one that is not a run folder and not
empty (naming what is there), and a link or a non-regular file where the tool keeps its own
files (``.lock``, the state files, results.json, ``.checkpoint/``, a link in it, and the samples files:
:func:`refuse_links`, which ``runs`` says too), and one another live process holds (its ``.lock``:
:func:`lock_holder`, the one rule of "in use" that ``runs`` says too). A dry run and a --resume, before they read
the folder, refuse it by :func:`guard` too (run.saved.held_items, run.found.resumed_plan); a sweep's --out itself a
link is refused in :func:`linked`'s words as its folders are named (run.request.RunRequest.out_folder)."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import signal
import stat
import threading
from contextlib import contextmanager
from pathlib import Path

from abricot_local.errors import ResultsError, opt
from abricot_local.record import CHECKPOINT, RESULTS, RUN_MANIFEST
from abricot_local.record.outputs import LOCK, MARKERS, SAMPLES_GLOB, is_run_folder, lstat_or_none
from abricot_local.record.outputs import samples_name  # noqa: F401  (the run's modules take the naming rule from here)

SHOWN = 5  # entries a refusal names
_STARTING = re.compile(rf"\.({'|'.join(MARKERS)})\.[^/]+\.tmp")  # a run starting there this moment: its state file


def refuse_link(path: Path, *, folder: bool = False) -> None:
    """``path`` absent, or a regular file (``folder``: a folder) that is no link; else refused."""
    st = lstat_or_none(path)
    if st is None:
        return
    if stat.S_ISLNK(st.st_mode):
        raise linked(path)
    if not (stat.S_ISDIR if folder else stat.S_ISREG)(st.st_mode):
        raise ResultsError(f"{path} is not a {'folder' if folder else 'regular file'}, so it is not the run's own: "
                           f"choose another {opt('out')}")  # (never advice to remove what it did not make)


def linked(path: Path) -> ResultsError:
    """The refusal of ``path``, a symbolic link where a run would read or write (:func:`refuse_link`'s words)."""
    return ResultsError(f"{path} is a symbolic link: abricot-local reads and writes only files it made, never "
                        f"through a link; choose another {opt('out')}")


def _stale_lock(path: Path) -> bool:
    """A ``.lock`` a run left (killed before it showed its state): a regular file holding a pid."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        return stat.S_ISREG(st.st_mode) and (st.st_size == 0 or os.read(fd, 32).strip().isdigit())
    finally:
        os.close(fd)


def lock_holder(folder: Path) -> str | None:
    """The process that holds ``folder``'s ``.lock`` now (the pid it wrote there, "" when it wrote none yet), None
    when no live process holds it (no ``.lock``, a killed run's: the kernel dropped its flock, a link or no regular
    file: :func:`refuse_link`'s to say). The one rule of a folder in use: a run's refusal (:func:`guard`,
    run.folder.OutputDir.acquire), its dry run's and ``runs``'s (run.states). The existing file is opened never
    through a link and never created, and a shared flock tried and let go at once."""
    try:
        fd = os.open(folder / LOCK, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # another process holds it: the pid it wrote there
            pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            return pid if pid.isdigit() else ""
        except OSError:
            return None  # (no flock on this file system: nothing can tell)
        return None
    finally:
        os.close(fd)  # (a shared flock taken here is let go with it)


def in_use(folder: Path, holder: str) -> ResultsError:
    """The refusal of ``folder``, whose ``.lock`` the process ``holder`` (:func:`lock_holder`) holds."""
    return ResultsError(f"{folder} is in use by another run (process {holder if holder.isdigit() else 'unknown'}); "
                        f"wait for it or choose another {opt('out')}")


def _names(folder: Path, entries: list[str]) -> str:
    def one(name: str) -> str:
        path = folder / name
        if path.is_symlink():
            return f"{name} (a link)"
        if path.is_dir():
            return f"{name}/ (a run)" if is_run_folder(path) else f"{name}/"
        return name

    shown = ", ".join(one(e) for e in entries[:SHOWN])
    return shown + (f" and {len(entries) - SHOWN} more" if len(entries) > SHOWN else "")


def guard(folder: Path) -> None:
    """Refuse ``folder`` for a run unless it is new, empty or a run's own, outside any other run, no link itself,
    held by no other live process (:func:`lock_holder`), with nothing but the run's own regular files where it keeps
    them. Writes nothing."""
    folder = Path(folder)
    outer = next((p for p in folder.absolute().parents if is_run_folder(p)), None)
    if outer is not None:
        raise ResultsError(f"{folder} lies inside the run folder {outer}; a run folder holds one run: choose a "
                           "folder outside it")
    if lstat_or_none(folder) is None:
        return
    refuse_link(folder, folder=True)
    if not folder.is_dir():
        raise ResultsError(f"{folder} is not a folder; choose another {opt('out')}")
    if (holder := lock_holder(folder)) is not None:
        raise in_use(folder, holder)
    if not is_run_folder(folder):
        try:
            entries = sorted(e for e in os.listdir(folder) if not (e == LOCK and _stale_lock(folder / e))
                             and not _STARTING.fullmatch(e))
        except OSError as exc:
            raise ResultsError(f"cannot read {folder}: {exc.strerror or exc}") from None
        if entries:
            raise ResultsError(f"{folder} is not a run folder and is not empty: it holds {_names(folder, entries)}; "
                               f"a run writes only into a new or empty folder, or its own: choose another {opt('out')}")
    refuse_links(folder)


def refuse_links(folder: Path) -> None:
    """The run's own paths in ``folder`` refused (:func:`refuse_link`) where one is a link or not what a run makes
    there: ``.lock``, results.json, the state files, the samples files, the checkpoint folder, its manifest and
    anything in it that is a link (a run makes none: its threads.jsonl and grown-from.json are never read through
    one either). The one rule a run and its dry run (:func:`guard`) and ``runs`` (run.states) refuse a folder's
    links by, reading nothing through them."""
    folder = Path(folder)
    for name in (LOCK, RESULTS, *MARKERS):
        refuse_link(folder / name)
    ckpt = folder / CHECKPOINT
    refuse_link(ckpt, folder=True)
    for where in (folder, ckpt):
        for path in sorted(where.glob(SAMPLES_GLOB)) if where.is_dir() else ():
            refuse_link(path)
    refuse_link(ckpt / RUN_MANIFEST)
    try:
        linked = sorted(e.name for e in os.scandir(ckpt) if e.is_symlink()) if ckpt.is_dir() else []
    except OSError:
        linked = []  # (a checkpoint that cannot be listed: what reads it says so)
    for name in linked:
        refuse_link(ckpt / name)


_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def open_own(path: Path, flags: int, mode: str):
    """``path`` opened as a text file, never through a link (O_NOFOLLOW), and only a regular file."""
    fd = os.open(path, flags | _NOFOLLOW | os.O_NONBLOCK, 0o666)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return os.fdopen(fd, mode, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def remove_own(path: Path) -> None:
    """Unlink ``path`` (a link itself, never its target); gone already, or not removable: left."""
    try:
        os.unlink(path)
    except OSError:
        pass


def close_own(fh, *, sync: bool = False) -> None:
    """Close a file whose last flush may have failed (a full disk): what it still buffers is dropped.
    ``sync``: its data fsync'd first (a checkpoint left for a resume), as far as the disk allows."""
    try:
        if sync:
            fh.flush()
            os.fsync(fh.fileno())
    except (OSError, ValueError):
        pass
    try:
        fh.close()
    except OSError:
        pass


def holds_bytes(path: Path, data: bytes) -> bool:
    """Whether ``path`` is a regular file (no link) holding exactly ``data``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return False
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read() == data
    finally:
        os.close(fd)


@contextmanager
def signals_held():
    """SIGINT and SIGTERM held while the block runs (the few statements that take or give back a folder's lock: the
    file made and its handle kept, or the file removed and the handle dropped, never one without the other) and
    handed to their own handlers once it ends (KeyboardInterrupt raised there); nests. Outside the main thread, and
    for a handler that is no Python function (SIG_DFL, SIG_IGN), nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    held: list = []
    swapped = [s for s, h in before.items() if callable(h)]
    try:
        for s in swapped:
            signal.signal(s, lambda signum, frame: held.append((signum, frame)))
        yield
    finally:
        _restore(swapped, before)
        if held:
            before[held[0][0]](*held[0])


def _restore(swapped: list, before: dict) -> None:
    """Each of ``swapped`` given back its handler in ``before``, the last first: one that raises as soon as it is
    back (a signal meanwhile) leaves none of the others holding signals."""
    if swapped:
        try:
            _restore(swapped[1:], before)
        finally:
            signal.signal(swapped[0], before[swapped[0]])


def rewrite_marker(folder: Path, state: str, text: str) -> bool:
    """On a full disk: ``folder``'s state file renamed to ``state`` and rewritten in place
    (truncated first, so its own blocks take the new text). False when there is none."""
    old = next((folder / m for m in (state, *MARKERS) if (folder / m).is_file()), None)
    if old is None:
        return False
    try:
        os.replace(old, folder / state)
        with open_own(folder / state, os.O_RDWR, "r+") as fh:
            fh.truncate(0)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError:
        return False
    return True


def fresh_folder(parent: Path, name: str) -> tuple[Path, list[Path]]:
    """A default run folder, and the folders made for it (deepest first): ``parent/name`` made now, or, when
    another run (started in the same second) or anything else has that name, the first of ``name-02``,
    ``name-03``, ... that this call makes (mkdir is atomic: two runs never get the same folder; the names sort in
    the order they were taken). When no folder can be made there (a file in the way, no permission),
    ``parent/name``, made by no one: the run's folder says why."""
    above = [p for p in (parent, *parent.parents) if not p.exists()]  # deepest first
    n = 1
    for _ in range(1000):
        path = parent / (name if n == 1 else f"{name}-{n:02d}")
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            break
        try:
            path.mkdir()
            return path, [path, *above]
        except FileExistsError:
            n += 1
        except FileNotFoundError:  # its parent removed meanwhile (another run's, left empty): made again
            continue
        except OSError:
            break
    return parent / name, []
