"""An OSError on a path given by a user, as the one line an :class:`AbricotError` prints: which path,
and what about it (a name over the file system's 255 bytes, a file where a folder was wanted, a
folder where a file was, a full disk...). The CLI's command group turns every such OSError into this
line (cli/app.py); a Python caller's door can do the same (``raise path_error(err) or err``). And
:func:`once_each`: things named by folders, each folder once however it is written."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from abricot_local.errors import AbricotError, NoSpaceError, UsageError

SHOWN = 160  # characters of a path shown whole; a longer one is shortened in the middle, its length said
_WHY = {
    errno.ENAMETOOLONG: "a name in it is longer than the file system allows (255 bytes a name, 4096 a path)",
    errno.ENOTDIR: "a part of it that should be a folder is a file",
    errno.EISDIR: "it is a folder, where a file was wanted",
    errno.EEXIST: "something is there already, where a new folder or file was to be made",
    errno.ENOENT: "it does not exist (or a folder on its way does not)",
    errno.EACCES: "permission denied",
    errno.EPERM: "the operation is not permitted there",
    errno.EROFS: "it is on a read-only file system",
    errno.ELOOP: "it goes through too many symbolic links (a loop?)",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "the file would be larger than this system allows",
    errno.ENXIO: "it is a special file with nothing behind it",
}


def shown_path(path: object) -> str:
    """``path`` as a message shows it: whole, or shortened in the middle with its length in bytes."""
    text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    if len(text) <= SHOWN:
        return text
    return f"{text[:SHOWN // 2]}...{text[-SHOWN // 4:]} ({len(os.fsencode(text))} bytes)"


def path_error(err: OSError) -> AbricotError | None:
    """The one-line error of an OSError that names a path (None when it names none: not a path's
    problem, left to its caller). A full disk or quota is a NoSpaceError."""
    if err.filename is None:
        return None
    where = shown_path(err.filename)
    if err.filename2 is not None:
        where += f" -> {shown_path(err.filename2)}"
    why = _WHY.get(err.errno) or (err.strerror or str(err)).lower()
    cls = NoSpaceError if err.errno in (errno.ENOSPC, errno.EDQUOT) else UsageError
    return cls(f"{where}: {why}")


T = TypeVar("T")


def once_each(items: Iterable[T], folder: Callable[[T], object]) -> list[T]:
    """``items`` in order, each folder (``folder(item)``) once, as first named: compared resolved (``r20`` given and
    found again under ``.``, a link and its target: one run)."""
    seen: set[Path] = set()
    out = []
    for item in items:
        key = Path(folder(item)).resolve()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out
