"""JSON files on disk: atomic writes with the umask's mode, and JSON-lines reading that
survives a torn last line. No knowledge of what the files hold (record/ and results.py have it)."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path

from abricot_local.errors import NoSpaceError, ResultsError


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


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), file_mode())
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise write_error(path, exc) from None


def read_jsonl_lines(path: Path, *, repair: bool = False) -> list[tuple[int, object]]:
    """(line number, value) of each line of a JSON-lines file (none when the file is missing).
    A torn last line (a crash mid-write) is dropped, and with ``repair`` cut from the file so
    appends continue cleanly; a bad line before the last one is an error naming it."""
    if not path.exists():
        return []
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ResultsError(f"cannot read {path}: {exc.strerror or exc}") from None
    lines = data.split(b"\n")
    out, good_end, pos = [], 0, 0
    for k, raw in enumerate(lines):
        end = pos + len(raw) + 1
        last = k == len(lines) - 1
        if raw.strip():
            try:
                out.append((k + 1, json.loads(raw)))
                good_end = min(end, len(data))
            except (json.JSONDecodeError, UnicodeDecodeError):
                if not (last or (k == len(lines) - 2 and not lines[-1])):
                    raise ResultsError(f"{path}: line {k + 1} is not valid JSON") from None
                break
        elif not last:
            good_end = end
        pos = end
    if repair and good_end < len(data):
        with path.open("r+b") as fh:
            fh.truncate(good_end)
    return out


def read_jsonl(path: Path, *, repair: bool = False) -> list:
    """The values of a JSON-lines file (see :func:`read_jsonl_lines`)."""
    return [value for _, value in read_jsonl_lines(path, repair=repair)]
