"""The output folder: results.json, samples-<task>.jsonl, checkpoints, resume and the lock.

While a run is going, every scored item is appended (flushed and fsync'd) to
``.checkpoint/samples-<task>.jsonl``; ``.checkpoint/run.json`` records what
must match for a resume. Only a finished run writes ``samples-<task>.jsonl``
and, last, ``results.json``, each atomically (temp file, fsync, rename).
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from pathlib import Path

from abricot_local.errors import ResultsError

SCHEMA_VERSION = 1
RESULTS = "results.json"
CHECKPOINT = ".checkpoint"
LOCK = ".lock"


def samples_name(task: str) -> str:
    return f"samples-{task}.jsonl"


def dumps_line(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False, allow_nan=True) + "\n"


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ResultsError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_jsonl(path: Path, *, repair: bool = False) -> list[dict]:
    """Records of a JSON-lines file. A torn last line (a crash mid-write) is dropped,
    and with ``repair`` cut from the file so appends continue cleanly."""
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    out, good_end, pos = [], 0, 0
    for k, raw in enumerate(lines):
        end = pos + len(raw) + 1
        last = k == len(lines) - 1
        if raw.strip():
            try:
                out.append(json.loads(raw))
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


def load_results(folder: Path) -> dict:
    path = Path(folder) / RESULTS
    if not path.exists():
        raise ResultsError(f"{folder} holds no {RESULTS} (not a finished run)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ResultsError(f"cannot read {path}: {exc}") from None


class OutputDir:
    """One run's output folder, held by one writer at a time."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.ckpt = self.path / CHECKPOINT
        self._handles: dict[str, object] = {}
        self._lock = None

    # -- lock ------------------------------------------------------------------------------
    def acquire(self) -> None:
        """Take ``.lock`` with flock: the kernel drops it when the process dies, so a lock
        left by a crashed or killed run is never an obstacle."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fh = open(self.path / LOCK, "a+")
        except OSError as exc:
            raise ResultsError(f"cannot create output folder {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            fh.close()
            raise ResultsError(
                f"{self.path} is in use by another run (process {holder}); wait for it or choose another --out"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._lock = fh

    def release(self) -> None:
        for fh in self._handles.values():
            fh.close()
        self._handles.clear()
        if self._lock is not None:
            (self.path / LOCK).unlink(missing_ok=True)
            self._lock.close()  # closing drops the flock
            self._lock = None

    def __enter__(self) -> "OutputDir":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    # -- start / resume --------------------------------------------------------------------
    def start(self, manifest: dict, *, resume: bool) -> None:
        """Begin a run, or continue one whose recorded manifest equals ``manifest``."""
        finished = (self.path / RESULTS).exists()
        recorded_path = self.ckpt / "run.json"
        if not resume:
            if finished:
                raise ResultsError(
                    f"{self.path} already holds a finished run; choose another --out (or --resume to reuse it)"
                )
            if recorded_path.exists():
                raise ResultsError(
                    f"{self.path} holds an interrupted run; add --resume to continue it, or choose another --out"
                )
        elif recorded_path.exists() or finished:
            if recorded_path.exists():
                recorded = json.loads(recorded_path.read_text(encoding="utf-8"))
            else:
                recorded = load_results(self.path).get("manifest", {})
            diff = sorted(k for k in set(recorded) | set(manifest) if recorded.get(k) != manifest.get(k))
            if diff:
                raise ResultsError(
                    f"cannot resume {self.path}: {', '.join(diff)} differ from the recorded run "
                    "(same model file, data and options are needed)"
                )
        else:
            raise ResultsError(f"nothing to resume in {self.path}: it holds no checkpoint")
        atomic_write(recorded_path, json.dumps(manifest, indent=1, sort_keys=True))

    def done(self, task: str) -> dict[str, dict]:
        """Samples already scored for ``task`` (from a finished file or the checkpoint)."""
        found = {s["id"]: s for s in read_jsonl(self.path / samples_name(task))}
        for s in read_jsonl(self.ckpt / samples_name(task), repair=True):
            found.setdefault(s["id"], s)
        return found

    def append(self, task: str, sample: dict) -> None:
        fh = self._handles.get(task)
        try:
            if fh is None:
                self.ckpt.mkdir(parents=True, exist_ok=True)
                fh = open(self.ckpt / samples_name(task), "a", encoding="utf-8")
                self._handles[task] = fh
            fh.write(dumps_line(sample))
            fh.flush()
            os.fsync(fh.fileno())
        except OSError as exc:
            raise ResultsError(f"cannot write the checkpoint in {self.ckpt}: {exc.strerror or exc}") from None

    def finalize(self, results: dict, samples: dict[str, list[dict]]) -> Path:
        """Write the samples files, then results.json; then drop the checkpoint."""
        for task, rows in samples.items():
            atomic_write(self.path / samples_name(task), "".join(dumps_line(r) for r in rows))
        atomic_write(self.path / RESULTS, json.dumps(results, indent=2, ensure_ascii=False) + "\n")
        for fh in self._handles.values():
            fh.close()
        self._handles.clear()
        if self.ckpt.exists():
            for f in self.ckpt.iterdir():
                f.unlink()
            self.ckpt.rmdir()
        return self.path / RESULTS


def saved_counts(folder: Path) -> dict[str, int]:
    """Items on disk per task in a run folder (finished samples files and the checkpoint)."""
    folder = Path(folder)
    counts: dict[str, int] = {}
    for where in (folder, folder / CHECKPOINT):
        for f in sorted(where.glob("samples-*.jsonl")) if where.is_dir() else []:
            task = f.name[len("samples-"):-len(".jsonl")]
            ids = {s.get("id") for s in read_jsonl(f)}
            counts[task] = max(counts.get(task, 0), len(ids))
    return counts
