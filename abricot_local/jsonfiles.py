"""JSON files on disk: atomic writes with the umask's mode, JSON read safely from what other
tools and earlier runs left (:func:`loads`, :func:`read_json`), and JSON-lines reading that
survives a torn last line. No knowledge of what the files hold (record/ and run/results.py have it).

Whatever a file holds, reading it is one line or a value: a file that is not a regular one (a
FIFO, a device, a link to either) is refused before a byte is read, and so is one larger than any
file of its kind (:func:`read_regular`: :data:`MAX_JSON_BYTES`, :data:`MAX_JSONL_BYTES`); text that
is not UTF-8 names the byte and its offset; nesting deeper than :data:`MAX_DEPTH` and an integer longer than
:data:`MAX_DIGITS` digits are refused (Python's parser would raise RecursionError, or
ValueError past 4300 digits, and such a value breaks whatever reads it later)."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from abricot_local.errors import AbricotError, NoSpaceError, ResultsError

MAX_DEPTH = 64  # objects and lists within each other (a run's record needs about 6)
MAX_DIGITS = 40  # digits of an integer (a count, a size, a seed: 20 at most)
MAX_JSON_BYTES = 256 * 2**20  # a JSON document: a run's record, an lm-eval results file, kld.json (MBs at most)
MAX_JSONL_BYTES = 2**30  # a JSON-lines file: samples (a few KB an item: 1,600 DISCOTEX items are ~10 MB)
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class BadJSON(ValueError):
    """What :func:`loads` refuses, in words (a caller names the file)."""


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise BadJSON(f"holds an integer of {len(text.lstrip('-')):,} digits (at most {MAX_DIGITS})")
    return int(text)


def depth(value) -> int:
    """How deeply lists and objects nest in ``value`` (a scalar: 0); iterative, any depth."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if d <= MAX_DEPTH:
                stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def loads(data: bytes | str):
    """The JSON value of ``data``, or :class:`BadJSON` saying what is wrong (not UTF-8, not
    JSON, nested too deep, an integer too long), worded to follow a file's name."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadJSON(f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    try:  # json.loads(data, parse_int=_int), its decoder made once (the BOM refused as json.loads refuses it)
        text = isinstance(data, str) and not data.startswith("\ufeff")
        value = _DECODER.decode(data) if text else json.loads(data, parse_int=_int)
    except RecursionError:
        raise BadJSON(f"nests lists or objects deeper than {MAX_DEPTH} levels") from None
    except BadJSON:
        raise
    except ValueError as exc:  # JSONDecodeError, and Python's own limits
        raise BadJSON(f"is not valid JSON ({str(exc)[:160]})") from None
    # each list or object opens with its own [ or {: text holding at most MAX_DEPTH of them nests no deeper
    if (not text or data.count("[") + data.count("{") > MAX_DEPTH) and depth(value) > MAX_DEPTH:
        raise BadJSON(f"nests lists or objects deeper than {MAX_DEPTH} levels")
    return value


_DECODER = json.JSONDecoder(parse_int=_int)


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def read_regular(path: Path, limit: int, error: type[AbricotError] = ResultsError, what: str = "") -> bytes:
    """The bytes of the regular file ``path`` (a link to one is followed), refused in one line when it is
    not one (a FIFO, a device, a folder: nothing is read, nothing waits) or holds more than ``limit``
    bytes (a real file of its kind never does; ``what``: what the file is, for the message)."""
    named = f"{what + ' ' if what else ''}{path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))  # a FIFO opens at once
    except OSError as exc:
        raise error(f"cannot read {named}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
            raise error(f"{named} is {kind}, not a regular file; nothing was read")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 24, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise error(f"cannot read {named}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if total > limit:
        raise error(f"{named} holds more than {_size(limit)}, more than any such file; it was not read")
    return b"".join(chunks)


def read_json(path: Path, error: type[AbricotError] = ResultsError, what: str = ""):
    """The JSON value in ``path`` (a regular file of at most :data:`MAX_JSON_BYTES`); an unreadable
    or refused file is ``error`` naming it (``what``: what the file is, for the message)."""
    data = read_regular(Path(path), MAX_JSON_BYTES, error, what)
    try:
        return loads(data)
    except BadJSON as exc:
        raise error(f"{what + ' ' if what else ''}{path} {exc}") from None


def dumps_line(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False, allow_nan=True) + "\n"


def file_mode() -> int:
    """The mode open() gives a new file under the current umask (mkstemp's files are 0600)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_error(path: Path, exc: OSError) -> ResultsError:
    """An OSError while writing ``path`` as one line; a full disk or quota is a NoSpaceError."""
    if exc.errno == errno.ENOSPC:
        return NoSpaceError(f"no space left on device writing {path}")
    if exc.errno == errno.EDQUOT:
        return NoSpaceError(f"disk quota exceeded writing {path}")
    return ResultsError(f"cannot write {path}: {exc.strerror or exc}")


def atomic_write(path: Path, text: str | bytes) -> None:
    """Write ``text`` (str, or bytes: a figure) to ``path`` so that readers see the old file or the whole new one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        with (os.fdopen(fd, "wb") if isinstance(text, bytes) else os.fdopen(fd, "w", encoding="utf-8")) as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), file_mode())
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise write_error(path, exc) from None
    except BaseException:  # Ctrl-C or SIGTERM mid-write: no temp file left behind
        Path(tmp).unlink(missing_ok=True)
        raise


LOCK_WAIT = 30.0  # seconds a writer waits for another one


@contextmanager
def locked(path: Path, by: str):
    """The block run by one writer of ``path`` at a time (a read, a merge and :func:`atomic_write`, so no
    other writer's entry is lost): ``path.lock`` taken with flock (the kernel drops it when a process
    dies), never through a link; waits up to :data:`LOCK_WAIT` seconds for another writer (``by``: what
    writes it, for the message), then says who holds it. The lock file is removed when done only by the
    call that made it (``O_EXCL``); a file of that name this call did not make (another writer's, one a
    killed writer left, a user's own ``notes.json.lock``) is locked as it is, never written nor removed."""
    import fcntl

    lock = path.with_name(path.name + ".lock")
    deadline = time.monotonic() + LOCK_WAIT
    mine = None  # (device, inode) of the lock file this call made: another writer may flock it first
    while True:
        fd, made = _lock_file(lock)
        if fd is None:
            continue  # removed between two opens: make it
        st = os.fstat(fd)
        mine = (st.st_dev, st.st_ino) if made else mine
        made = mine == (st.st_dev, st.st_ino)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            if time.monotonic() > deadline:
                raise ResultsError(f"{path} is being written by another {by} for over {LOCK_WAIT:g} s (its lock: "
                                   f"{lock}); try again when it is done") from None
            time.sleep(0.02)
            continue
        if _at(lock, fd):  # the file locked must still be the lock (its maker removes it when done)
            break
        os.close(fd)
    try:
        yield
    finally:
        if made and _at(lock, fd):
            try:
                os.unlink(lock)  # then the flock dropped: a writer waiting on it takes the next one
            except OSError:
                pass
        os.close(fd)


def _lock_file(lock: Path) -> tuple[int | None, bool]:
    """``lock`` opened for flock: (fd, made: this call created it), (None, False) when it vanished between the
    two opens. Never through a link; a link or a file that is not a regular one is refused in one line."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        try:
            return os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), True
        except FileExistsError:  # another writer's, or a file this did not make: locked as it is, left as it is
            fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ResultsError(f"{lock} is a link; a lock is never taken through one: remove it") from None
        raise write_error(lock, exc) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
        raise ResultsError(f"{lock} is {kind}, not the regular file a lock is; move it away")
    return fd, False


def _at(lock: Path, fd: int) -> bool:
    """Whether ``lock``'s name still holds the file open as ``fd`` (not removed, not replaced)."""
    try:
        return os.path.samestat(os.stat(lock, follow_symlinks=False), os.fstat(fd))
    except OSError:
        return False


def temp_files(folder: Path, name: str) -> list[Path]:
    """The temp files :func:`atomic_write` of ``folder/name`` leaves when killed mid-write."""
    return sorted(Path(folder).glob(f".{glob_escape(name)}.*.tmp"))


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


class TornLineError(ResultsError):
    """A JSON-lines file whose last line is cut short (``text``: what is left of it)."""

    def __init__(self, message: str, text: bytes):
        super().__init__(message)
        self.text = text


def read_jsonl_lines(path: Path, *, repair: bool = False, torn_ok: bool = True) -> list[tuple[int, object]]:
    """(line number, value) of each line of a JSON-lines file (none when the file is missing).
    A torn last line (a crash mid-write) is dropped, and with ``repair`` cut from the file so
    appends continue cleanly (a last line missing only its newline gets it back); without
    ``torn_ok`` (a finished file, written whole) it is a :class:`TornLineError`. A bad line
    before the last one is an error naming it; a file that is not a regular one, or larger than
    :data:`MAX_JSONL_BYTES`, is refused (:func:`read_regular`)."""
    if not path.exists():
        return []
    data = read_jsonl_data(path)
    out, good_end = _jsonl_rows(data, path, torn_ok)
    if repair and good_end < len(data):
        with path.open("r+b") as fh:
            fh.truncate(good_end)
    elif repair and data and not data.endswith(b"\n"):  # whole, but appends would join it
        with path.open("ab") as fh:
            fh.write(b"\n")
    return out


def read_jsonl_data(path: Path) -> bytes:
    """The bytes of the JSON-lines file ``path``, as :func:`read_jsonl_lines` reads them (:func:`read_regular`)."""
    return read_regular(path, MAX_JSONL_BYTES)


def jsonl_rows(data: bytes, path: Path, *, torn_ok: bool = True) -> list[tuple[int, object]]:
    """:func:`read_jsonl_lines` of the bytes ``data`` read from ``path`` (named by an error), nothing repaired."""
    return _jsonl_rows(data, path, torn_ok)[0]


def _jsonl_rows(data: bytes, path: Path, torn_ok: bool) -> tuple[list[tuple[int, object]], int]:
    """(line number, value) of each line of ``data`` and where its last good line ends."""
    lines = data.split(b"\n")
    out, good_end, pos = [], 0, 0
    for k, raw in enumerate(lines):
        end = pos + len(raw) + 1
        last = k == len(lines) - 1
        if raw.strip():
            try:
                out.append((k + 1, loads(raw)))
                good_end = min(end, len(data))
            except BadJSON as exc:
                if not (last or (k == len(lines) - 2 and not lines[-1])):
                    raise ResultsError(f"{path}: line {k + 1} {exc}") from None
                if not torn_ok:
                    raise TornLineError(f"{path}: its last line ({k + 1}) is cut short ({exc})", raw) from None
                break
        elif not last:
            good_end = end
        pos = end
    return out, good_end


def read_jsonl(path: Path, *, repair: bool = False) -> list:
    """The values of a JSON-lines file (see :func:`read_jsonl_lines`)."""
    return [value for _, value in read_jsonl_lines(path, repair=repair)]
