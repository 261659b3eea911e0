"""SHA-256 of model and data files, from their bytes.

A hash is remembered (in ``cache_dir()/sha256-memo.json``, and for the rest of
the process) against what a rewrite of the file cannot keep: its device,
inode, size, modification and status-change times in nanoseconds. ``rsync -t``,
a restore or bit rot can keep a file's size and mtime, but writing it moves
its ctime, which no user call can set back; so a changed file is hashed again.
``fresh=True`` (``check``, ``--resume``) ignores the memo file and reads the
bytes (a hash computed earlier in this same process, of the same unchanged
file, is from the bytes too and is reused).

Every digest says where it came from: ``"computed"`` (read in this process)
or ``"memo"`` (remembered from an earlier process).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from .cache import cache_dir
from .errors import AbricotError, IntegrityError

CHUNK = 8 * 1024 * 1024
COMPUTED, MEMO = "computed", "memo"
RECORDED = "recorded"  # a model taken as its finished run recorded it, its file not here: never read (models.locate)
_KEYS = ("dev", "ino", "size", "mtime_ns", "ctime_ns")
_seen: dict[tuple, str] = {}  # stat key (device and inode first) -> sha256 computed in this process
_fresh = [0]  # > 0 inside afresh(True): every digest is read from the bytes
_kept = [0]  # > 0 inside unwritten(): a computed hash is remembered in this process only

Progress = Callable[[int, int], None]  # (bytes read, total)


@dataclass(frozen=True)
class Digest:
    sha256: str
    origin: str  # COMPUTED or MEMO


@contextlib.contextmanager
def afresh(enabled: bool = True) -> Iterator[None]:
    """Within the block, the memo file is not trusted: every file is hashed from its bytes
    (check, --resume; data files included)."""
    _fresh[0] += bool(enabled)
    try:
        yield
    finally:
        _fresh[0] -= bool(enabled)


@contextlib.contextmanager
def unwritten() -> Iterator[None]:
    """Within the block, nothing is written to the memo file (a dry run writes nothing); a hash
    computed is still remembered for the rest of the process."""
    _kept[0] += 1
    try:
        yield
    finally:
        _kept[0] -= 1


def _key(st: os.stat_result) -> dict:
    return {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns}


def memo_file() -> Path:
    return cache_dir() / "sha256-memo.json"


def _memo_load() -> dict:
    """The memo file's entries (one that cannot be read, as jsonfiles.loads refuses it: none)."""
    from .jsonfiles import BadJSON, loads

    try:
        data = loads(memo_file().read_bytes())
        return data if isinstance(data, dict) else {}
    except (OSError, BadJSON):
        return {}


def _memo_lookup(real: str, key: dict) -> str | None:
    """The memo file's hash for this file as it is now: under its path, else under another
    path of the same file (a hard link: same device, inode, size and times)."""
    memo = _memo_load()
    entries = [memo.get(real)] + [v for k, v in memo.items() if k != real]
    for entry in entries:
        if isinstance(entry, dict) and all(entry.get(k) == v for k, v in key.items()) and entry.get("sha256"):
            return str(entry["sha256"])
    return None


def memo_store(path: Path | str, digest: str) -> None:
    """Remember ``digest`` for ``path`` as it is now (best effort: a read-only cache, a full disk or another
    process holding the memo's lock too long only cost a rehash next time). Read, merged and written under
    the memo's lock (jsonfiles.locked), with the one atomic write (jsonfiles.atomic_write: the umask's mode,
    no temp file left by an error or Ctrl-C), as calibrations.json is: two processes hashing at once keep
    both entries, and a reader sees the old memo or the whole new one."""
    from .jsonfiles import atomic_write, locked

    real = os.path.realpath(path)
    try:
        entry, target = {**_key(os.stat(real)), "sha256": digest}, memo_file()
        with locked(target, "process hashing a file"):
            memo = {k: v for k, v in _memo_load().items() if os.path.exists(k)}  # drop deleted files
            memo[real] = entry
            atomic_write(target, json.dumps(memo, indent=0, sort_keys=True))
    except (OSError, AbricotError):  # atomic_write and locked say an OSError as a ResultsError
        pass
    else:
        _seen[tuple(entry[k] for k in _KEYS)] = digest


def identity(path: Path | str) -> tuple | None:
    """What names a file's content as of now (hard links share it), else None."""
    try:
        key = _key(os.stat(os.path.realpath(path)))
    except OSError:
        return None
    return tuple(key[k] for k in _KEYS)


def remembered(path: Path | str) -> str | None:
    """The hash remembered for ``path`` as it is now, else None (nothing is read)."""
    real = os.path.realpath(path)
    try:
        key = _key(os.stat(real))
    except OSError:
        return None
    return _seen.get(tuple(key[k] for k in _KEYS)) or _memo_lookup(real, key)


def file_digest(path: Path | str, *, fresh: bool = False, memo: bool = True,
                progress: Progress | None = None) -> Digest:
    """The SHA-256 of a regular file and where it came from; see the module's text."""
    real = os.path.realpath(path)
    fresh = fresh or _fresh[0] > 0
    try:
        st = os.stat(real)
        if not stat.S_ISREG(st.st_mode):
            raise AbricotError(f"{path} is not a regular file (a folder, pipe or device); give a file")
        key = _key(st)
        seen = _seen.get(tuple(key[k] for k in _KEYS))
        if seen and memo:
            return Digest(seen, COMPUTED)
        if memo and not fresh:
            hit = _memo_lookup(real, key)
            if hit:
                return Digest(hit, MEMO)
        digest = hashlib.sha256()
        done = 0
        with open(real, "rb") as fh:
            for block in iter(lambda: fh.read(CHUNK), b""):
                digest.update(block)
                done += len(block)
                if progress:
                    progress(done, st.st_size)
            after = _key(os.fstat(fh.fileno()))
    except OSError as exc:
        raise AbricotError(f"cannot read {path}: {exc.strerror or exc}") from None
    hexdigest = digest.hexdigest()
    if memo and after == key and _kept[0]:  # not written to while it was read; a dry run
        _seen[tuple(key[k] for k in _KEYS)] = hexdigest
    elif memo and after == key:
        memo_store(real, hexdigest)
    return Digest(hexdigest, COMPUTED)


def sha256_file(path: Path | str, *, memo: bool = True, fresh: bool = False) -> str:
    """SHA-256 of a file, streamed; remembered as the module's text says."""
    return file_digest(path, memo=memo, fresh=fresh).sha256


def verify_file(path: Path, *, sha256: str | None, size: int | None, what: str, fresh: bool = False,
                pinned_by: str = "", reinstall: str = "") -> Digest | None:
    """Raise :class:`IntegrityError` when ``path`` differs from the expected size or hash;
    the digest when a hash was expected. ``pinned_by``: the models.toml entry that pins a file the tool did
    not download (``[alias] in FILE``, a ``source = "local"`` entry): a mismatch is that entry's to fix (its
    ``sha256``, ``size`` or ``path``), never the file's to delete; ``reinstall``: the command that reinstalls the
    Python package the file comes from (models/pypi.py): a file of an installed package is never the user's to
    delete, the package is reinstalled; else the file is a download, said damaged."""
    got_size = os.path.getsize(path)
    if size is not None and got_size != size:
        fix = _fix_pin(pinned_by, "size") if pinned_by else _fix_package(reinstall) if reinstall else \
            "The file was not used; delete it and download it again."
        raise IntegrityError(f"{what}: expected {size} bytes, got {got_size} ({path}). {fix}")
    if not sha256:
        return None
    got = file_digest(path, fresh=fresh)
    if got.sha256 != sha256.lower():
        fix = _fix_pin(pinned_by, "sha256") if pinned_by else _fix_package(reinstall) if reinstall else (
            "The file was not used. Delete it and retry; if the repository was re-uploaded, pin another revision "
            "and sha256 in your own models.toml.")
        raise IntegrityError(f"{what}: sha256 mismatch, expected {sha256.lower()}, got {got.sha256} ({path}). {fix}")
    return got


def _fix_package(reinstall: str) -> str:
    """What to do when a file that comes from an installed Python package is damaged: reinstall the package
    (``reinstall``: its command); deleting a file inside an installed package would break it."""
    return (f"The file was not used: it comes from an installed Python package, not a download (deleting it would "
            f"break the package, not fix it); reinstall the package: {reinstall}")


def _fix_pin(pinned_by: str, key: str) -> str:
    """What to do when a file the user gave differs from what its models.toml entry pins: the entry is wrong
    (or names another file), the file is left as it is."""
    return (f"The file was not used, and is left as it is (it is your file, not a download): it differs from the "
            f"{key} that {pinned_by} pins; fix `{key}` there if this is the file you mean, else its `path`.")
