"""quantize's output folder, and the models.toml it keeps there.

Before anything is written the folder is refused when quantize may not write there: a link, a
file, a run's folder or one inside a run (results.json or a .checkpoint), a models.toml quantize
did not write (or cannot read back whole). One quantize at a time holds the folder
(``.quantize.lock``, flock: the kernel drops it when a process dies), so the temporary files an
earlier call left when it was killed are known stale and removed; a signal that ends the process while llama.cpp
does not return removes the temporary file of the rung being written and the lock first (:func:`let_go`). models.toml keeps every entry
it holds (a second SOURCE's ladder is added beside the first's); each rung quantize writes is
listed with its SHA-256 and ``from_sha256`` (its SOURCE's) before its file takes its name, so a
file at a rung's name that models.toml does not list as this SOURCE's is never quantize's to keep
or to overwrite.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from abricot_local.errors import UsageError
from abricot_local.models.temps import remove_stale
from abricot_local.record import CHECKPOINT, RESULTS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

FRAGMENT = "models.toml"
LOCK = ".quantize.lock"
HEAD = "# written by abricot-local quantize"
# a rung's temporary file (temp_for) and models.toml's (jsonfiles.atomic_write): tempfile.mkstemp's 8 characters
_TMP = re.compile(rf"\..+\.gguf\.[a-z0-9_]{{8}}\.tmp|\.{re.escape(FRAGMENT)}\.[a-z0-9_]{{8}}\.tmp")
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_MAX_FRAGMENT = 16 << 20  # bytes: a models.toml of thousands of rungs is far smaller
Entries = dict  # alias -> its table (str, int, float, bool or lists of them), in the file's order


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        part = next((p for p in path.parents if p.exists() and not p.is_dir()), path.parent)
        raise UsageError(f"cannot use {path}: {part} is a file, not a folder") from None


def _run_folder(folder: Path) -> Path | None:
    """``folder`` or the nearest folder above it that holds a run (results.json or a checkpoint)."""
    for p in (folder.absolute(), *folder.absolute().parents):
        if (p / RESULTS).is_file() or (p / CHECKPOINT).is_dir():
            return p
    return None


def check(folder: Path) -> None:
    """Refuse ``folder`` before anything is made there (see the module's text); writes nothing."""
    st = _lstat(folder)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise UsageError(f"the output folder {folder} is a symbolic link; give the folder itself")
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"the output folder {folder} is a file, not a folder: give a folder for the rungs")
    run = _run_folder(folder)
    if run is not None:
        where = "is" if run == folder.absolute() else f"lies inside the run folder {run}, which is"
        raise UsageError(f"the output folder {folder} {where} a run's (it holds {RESULTS} or {CHECKPOINT}): quantize "
                         "writes its rungs only into a folder of its own; give another one")
    if st is not None:
        read_entries(folder)  # a models.toml that is not quantize's, or not whole: refused now


def make(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"the output folder {folder} is a file, not a folder: give a folder for the rungs") from None
    except NotADirectoryError:
        part = next((p for p in folder.parents if p.exists() and not p.is_dir()), folder.parent)
        raise UsageError(f"cannot make the output folder {folder}: {part} is a file, not a folder") from None


@contextmanager
def held(folder: Path) -> Iterator[None]:
    """The folder held by this quantize alone for the block (another one writing there: refused)."""
    path = folder / LOCK
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UsageError(f"another quantize is writing in {folder}; wait for it to end, or give another "
                             "folder") from None
        try:  # the file may have been removed by the holder we waited on: take the one there now
            same = os.path.samestat(os.fstat(fd), os.lstat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    from abricot_local.backends import on_stuck

    forget = on_stuck(lambda _signum: let_go(folder))  # llama.cpp did not return after a signal: the process ends
    try:
        yield
    finally:
        forget()
        try:
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)  # the flock goes with it


def let_go(folder: Path) -> None:
    """What a quantize holding ``folder`` leaves when a signal ends the process while llama.cpp's quantizer does not
    return (backends.on_stuck; no Python unwinds after it): the rungs written and listed kept, the temporary file of
    the one being written removed (held: none is another's) and the lock, so the folder is as a Ctrl-C that unwound
    leaves it, and the same command goes on from there. Best effort: the process is ending."""
    try:
        clean_stale(folder)
        (folder / LOCK).unlink(missing_ok=True)
    except OSError:
        pass


def clean_stale(folder: Path) -> list[str]:
    """Remove the temporary files a killed quantize left in ``folder`` (held: none is in use); their names. The
    rule every maker of a temporary file shares (models/temps.py): only its own names, only regular files, never
    one a live process holds."""
    return remove_stale(folder, _TMP)


def temp_for(dst: Path) -> Path:
    """A new temporary file beside ``dst``, named as :func:`clean_stale` knows them."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    return Path(tmp)


def read_entries(folder: Path) -> Entries:
    """The entries of ``folder``'s models.toml ({} when there is none); refused when quantize did not
    write it, or when it cannot be read back whole (nothing of it is ever dropped)."""
    path = folder / FRAGMENT
    st = _lstat(path)
    if st is None:
        return {}
    if not stat.S_ISREG(st.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise UsageError(f"{path} is {what}: quantize writes its own models.toml there; give another folder")
    if st.st_size > _MAX_FRAGMENT:
        raise UsageError(f"{path} is {st.st_size:,} bytes, not a models.toml quantize wrote; give another folder")
    with open(path, "rb") as fh:
        raw = fh.read(_MAX_FRAGMENT + 1)
    if not raw.startswith(HEAD.encode()):
        raise UsageError(f"{path} is there and was not written by quantize: it is left as it is; give another folder "
                         "(nothing was written)")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} was written by quantize but is no longer valid TOML ({exc}): fix it or remove it; "
                         "nothing was written") from None
    for alias, table in data.items():
        if not isinstance(table, dict) or not all(_writable(v) for v in table.values()):
            raise UsageError(f"{path}: [{alias}] holds a value quantize cannot write back (a table or a date): fix "
                             "it or remove it; nothing was written")
    return data


def _writable(value) -> bool:
    if isinstance(value, list):
        return all(_writable(v) for v in value)
    return isinstance(value, (str, int, bool)) or (isinstance(value, float) and math.isfinite(value))


def write_entries(folder: Path, entries: Entries) -> None:
    """models.toml holding ``entries``, in order, each value as it was read or given."""
    from abricot_local.jsonfiles import atomic_write

    lines = [f"{HEAD}: rungs written by llama.cpp's quantizer. `from_sha256`: the SHA-256 of the file (the "
             "SOURCE) a rung's ladder was made from; a rung is kept only for that SOURCE"]
    for alias, table in entries.items():
        lines += ["", f"[{_value(alias)}]"] + [f"{k if _BARE.fullmatch(k) else _value(k)} = {_value(v)}"
                                                for k, v in table.items()]
    atomic_write(folder / FRAGMENT, "\n".join(lines) + "\n")


def _value(v) -> str:
    """A TOML value (JSON's spelling is TOML's for strings, numbers, booleans and arrays of them)."""
    return json.dumps(v, ensure_ascii=False)
