"""Temporary files beside a file being made (a download, a model assembled from a package's chunks, a quantized
rung), and the one rule that removes those a killed process left.

A temporary file is named ``.<the file's name>.<8 characters><suffix>`` (tempfile.mkstemp's) in the file's folder.
Its maker holds it with an exclusive ``flock`` for as long as it writes it (:func:`temp_beside`); the kernel drops
the lock when the process ends, kill -9 included. :func:`remove_stale` removes a temporary file whose lock it can
take (its maker is gone, or, for quantize, its folder is held: ``.quantize.lock``) and leaves one a live process
holds. It touches only names its caller's pattern matches (:func:`temp_pattern`: the maker's own naming), and
only regular files (never a link); where the file system has no locks, nothing is removed.

A download's resumable partial file (:func:`hold_partial`) is named for its URL instead, so that the next download
of that URL into that file finds it: ``.<the file's name>.<16 hex digits>.partial``. It is held the same way, and
``remove_stale`` removes it only where its caller asks (:func:`partial_pattern`: the partials of other URLs).
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import tempfile
from pathlib import Path

PART = ".part"  # a download's or an assembly's temporary file
PARTIAL = ".partial"  # a download's resumable partial file (:func:`hold_partial`)


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


def partial_pattern(name: str, but: str | None = None, suffix: str = PARTIAL) -> re.Pattern:
    """The names :func:`hold_partial` gives the resumable partial files of a file named ``name`` (one per URL:
    ``.<name>.<16 hex>.partial``, or another ``suffix``), ``but`` the one of that key."""
    key = rf"(?!{re.escape(but)}\.)" if but else ""
    return re.compile(rf"\.{re.escape(name)}\.{key}[0-9a-f]{{16}}{re.escape(suffix)}")


def hold_partial(dst: Path, key: str, on_wait=None, suffix: str = PARTIAL) -> tuple[int, Path, bool] | None:
    """The resumable partial file of ``dst`` for ``key`` (16 hex digits): ``.<dst's name>.<key>.partial`` beside
    ``dst``, opened (made empty when absent) and locked by this process: ``(fd, path, waited)``. Another process
    holding it (downloading the same file now) is waited for, ``on_wait(path)`` told first, ``waited`` then True: two
    never write one partial. None when it cannot be held safely, where a fresh :func:`temp_beside` does: a link
    (never followed), not a regular file, not this user's, more than one link, or a file system without locks.
    Closing ``fd`` drops the lock, as :func:`temp_beside`'s. OSError when it cannot be made. ``suffix``: another
    ending than ``.partial`` (a model pull's, ``.incomplete``, is the one huggingface_hub's cache tools list)."""
    path, waited = dst.parent / f".{dst.name}.{key}{suffix}", False
    while True:
        made = True
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            made = False
            try:
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # removed meanwhile: make it
            except OSError:
                return None  # a link (O_NOFOLLOW: ELOOP), or not ours to write
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_nlink != 1:
                os.close(fd)
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another process writes it now: wait for it
                if on_wait and not waited:
                    on_wait(path)
                waited = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            if os.path.samestat(os.fstat(fd), os.lstat(path)):  # still the file at its name (not published)
                return fd, path, waited
        except FileNotFoundError:
            pass  # published or removed while this waited: hold the next one
        except OSError:  # no locks on this file system: a partial two processes could write, not used
            os.close(fd)
            if made:
                path.unlink(missing_ok=True)
            return None
        except BaseException:  # Ctrl-C while waiting
            os.close(fd)
            raise
        os.close(fd)
