"""Temporary files beside a file being made (a download, a model assembled from a package's chunks, a quantized
rung), and the one rule that removes those a killed process left.

A temporary file is named ``.<the file's name>.<8 characters><suffix>`` (tempfile.mkstemp's) in the file's folder.
Its maker holds it with an exclusive ``flock`` for as long as it writes it (:func:`temp_beside`); the kernel drops
the lock when the process ends, kill -9 included. :func:`remove_stale` removes a temporary file whose lock it can
take (its maker is gone, or, for quantize, its folder is held: ``.quantize.lock``) and leaves one a live process
holds. It touches only names its caller's pattern matches (:func:`temp_pattern`: the maker's own naming), and
only regular files (never a link); where the file system has no locks, nothing is removed.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import tempfile
from pathlib import Path

PART = ".part"  # a download's or an assembly's temporary file


def temp_pattern(name: str, suffix: str = PART) -> re.Pattern:
    """The names :func:`temp_beside` gives the temporary files of a file named ``name``."""
    return re.compile(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}{re.escape(suffix)}")


def remove_stale(folder: Path, pattern: re.Pattern) -> list[str]:
    """Remove the temporary files in ``folder`` whose names ``pattern`` matches and that no live process holds
    (their lock taken now: the process that made one is gone); their names. A link, a file that is not regular,
    one that cannot be opened or locked, or one held by another process is left as it is."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    gone = []
    for name in names:
        if not pattern.fullmatch(name):
            continue
        path = Path(folder) / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue  # a link (O_NOFOLLOW), not ours to read, or gone
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by its live maker: BlockingIOError, left
            if os.path.samestat(st, os.lstat(path)):  # still the file locked (not renamed, not replaced)
                os.unlink(path)
                gone.append(name)
        except OSError:
            continue  # held by a live process, no locks on this file system, or gone meanwhile: left
        finally:
            os.close(fd)
    return gone


def temp_beside(dst: Path, suffix: str = PART) -> tuple[int, Path]:
    """A new, empty temporary file beside ``dst`` (named as :func:`temp_pattern` says), open for writing and locked
    by this process: ``(fd, path)``. Closing ``fd`` (every copy of it) drops the lock: publish or remove the file
    first. Where the file system has no locks the file is made unlocked (:func:`remove_stale` then leaves it too).
    OSError when it cannot be made."""
    while True:
        fd, name = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=suffix)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            return fd, Path(name)  # no locks here
        try:  # a remover may have taken it between mkstemp and the lock: make another
            if os.path.samestat(os.fstat(fd), os.lstat(name)):
                return fd, Path(name)
        except FileNotFoundError:
            pass
        os.close(fd)
