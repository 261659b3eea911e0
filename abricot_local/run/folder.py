"""The output folder: results.json, samples-<task>.jsonl, checkpoints, resume and the lock.

While a run is going, every scored item is appended (flushed at once: a killed process loses
nothing; fsync'd at most every SYNC_EVERY seconds and when the folder is released: a power cut
loses at most the last second's items, which a resume scores again) to
``.checkpoint/samples-<task>.jsonl``; ``.checkpoint/run.json`` records what
must match for a resume, ``.checkpoint/threads.jsonl`` the thread counts that scored the
items (run/resume.py); what a resume reuses of them, run/saved.py. Only a finished run puts
``samples-<task>.jsonl`` in place (the checkpoint's moved, or written) and, last, ``results.json``,
each atomically (temp file, fsync, rename), with the mode any file gets under the umask (0644 under umask 022).

The folder is the run's own (run/owned.py): nothing is read, written or deleted
through a link, a folder that is not a run (and not empty) or lies inside one is refused, and
finalizing deletes only the checkpoint's files the run lists (its manifest, its thread counts, the
record a grow keeps, its tasks' samples).

A folder shows its state to ``ls``: a ``RUNNING`` file while a run writes it (pid, start time,
items), ``INTERRUPTED`` after Ctrl-C or SIGTERM (N of M items saved), ``FAILED`` with the error;
none once ``results.json`` is there. Every state is written here, when a run's ``RunFolder``
(run/run_folder.py: a signal's or a lost device's too) says so; :func:`run.states.find_runs` reads
them (``runs``, ``report``).
"""

from __future__ import annotations

import fcntl
import math
import os
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence

from abricot_local.errors import NoSpaceError, ResultsError
from abricot_local.record.outputs import FAILED, INTERRUPTED, LOCK, MARKERS, RUNNING, samples_name
from abricot_local.run.owned import (close_own, guard, in_use, open_own, refuse_link, remove_own, rewrite_marker,
                                    holds_bytes, signals_held)
from abricot_local.run.states import items_text, saved_counts
from abricot_local.jsonfiles import atomic_write, dumps_line, temp_files, write_error
from abricot_local.record import (CHECKPOINT, RESULTS, RUN_MANIFEST, Manifest, Record, Sample, check_rows,
                                  write_manifest, write_record)
from abricot_local.record import kernel_path, read_run
from abricot_local.run.declared import Declared
from abricot_local.run.resume import (OWN_FILES, ThreadLog, finished_run, nothing_to_resume, reopen, starts_afresh,
                                      starts_there, thread_parts, refusal as resume_refusal_of)
from abricot_local.run.kept import grow_refusal, kept_lines
from abricot_local.run.saved import failed_before_first_item, fresh_refusal, orphan_refusal

SYNC_EVERY = 1.0  # seconds between a checkpoint's fsyncs (every line is flushed at once)
RESUME_ANY_DOOR = ("the same run again with this folder as its output, resumed (the command line: --out FOLDER "
                   "--resume; Python: out=FOLDER, resume=True)")  # an INTERRUPTED file's advice, no door named


class OutputDir:
    """One run's output folder, held by one writer at a time."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.ckpt = self.path / CHECKPOINT
        self._handles: dict[str, object] = {}
        self._synced: dict[str, float] = {}  # task -> when its checkpoint was last fsync'd (time.monotonic)
        self._lock = None
        self._made: list[Path] = []  # folders acquire() created, deepest first
        self.growing: Manifest | None = None  # the manifest of a --resume that grows the finished run here
        self.written: Record | None = None  # the record finalize wrote (its thread count as results.json states it)
        self.afresh = False  # check() took a folder whose run failed with nothing saved: started anew
        self.declared = Declared()  # what each task declares of its samples, held against each one written
        self.thread_log = ThreadLog(self.path)  # which thread count scored the items (scored_with)
        self.tell: Callable[[str], None] = lambda line: None  # a line for the user (a saved line set aside)

    # -- lock ------------------------------------------------------------------------------
    def acquire(self) -> None:
        """Take ``.lock`` with flock: the kernel drops it when the process dies, so a lock
        left by a crashed or killed run is never an obstacle. Folders created here are
        removed again on release if nothing was written in them. A folder that is not the run's
        own is refused first (owned.guard), writing nothing. A signal meanwhile is held until the lock is both made
        and held here, then raised with the lock given back (owned.signals_held): no ``.lock`` is left."""
        try:
            with signals_held():
                self._take()
        except BaseException:
            self.release()
            raise

    def _take(self) -> None:
        guard(self.path)
        try:
            self._made = [p for p in (self.path, *self.path.parents) if not p.exists()]
            self.path.mkdir(parents=True, exist_ok=True)
            fh = open_own(self.path / LOCK, os.O_RDWR | os.O_CREAT, "a+")
        except OSError as exc:
            self._tidy()
            err = write_error(self.path, exc)
            what = (f"cannot write the lock file {self.path / LOCK} in {self.path}" if self.path.is_dir() else
                    f"cannot create output folder {self.path}")  # (a folder there: on a read-only mount, say)
            raise (err if isinstance(err, NoSpaceError) else ResultsError(f"{what}: {exc.strerror}")) from None
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read(32).strip()
            fh.close()
            raise in_use(self.path, holder) from None  # (owned.lock_holder's words: its dry run's, `runs`')
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(str(os.getpid()))
            fh.flush()
        except OSError as exc:  # a full disk: no lock file, and no folder this left empty
            close_own(fh)
            (self.path / LOCK).unlink(missing_ok=True)
            self._tidy()
            raise write_error(self.path / LOCK, exc) from None
        self._lock = fh

    def release(self) -> None:
        with signals_held():  # a signal meanwhile raised once the lock file and its handle are both given back
            for fh in self._handles.values():
                close_own(fh, sync=True)
            self._handles.clear()
            self.thread_log.close(sync=True)
            if self._lock is not None:
                (self.path / LOCK).unlink(missing_ok=True)
                close_own(self._lock)  # closing drops the flock
                self._lock = None
                self._tidy()

    def _tidy(self) -> None:
        """Remove an empty checkpoint folder, then the folders acquire() created while empty:
        a run refused or stopped before it wrote anything leaves no folder behind."""
        for folder in (self.ckpt, *self._made):
            try:
                folder.rmdir()
            except OSError:  # not empty, or not there
                if folder != self.ckpt:
                    break
        self._made = []

    def __enter__(self) -> "OutputDir":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    # -- start / resume --------------------------------------------------------------------
    def check(self, manifest: Manifest, *, resume: bool) -> None:
        """Refuse a run this folder cannot take (a finished run, another run's checkpoint, no folder to
        resume), writing nothing: called before the model loads. A --resume of a folder that holds nothing of a
        run starts the run there (said in a line)."""
        finished = (self.path / RESULTS).exists()
        recorded_path = self.ckpt / RUN_MANIFEST
        if self.afresh or failed_before_first_item(self.path):  # this run starts afresh there, whatever its
            if resume and not self.afresh:                       # options (start() checks again: RUNNING by then)
                self.tell(starts_afresh(self.path, (self.path / FAILED).is_file()))
            self.afresh = True
            return
        if not resume:
            refusal = fresh_refusal(self.path, manifest)  # --resume offered only where it takes it
            if refusal:
                raise ResultsError(refusal)
        elif recorded_path.exists():
            if refusal := resume_refusal_of(self.path, manifest):
                raise ResultsError(refusal)
        elif finished:
            finished_run(self.path, manifest)  # refuses another run's folder
        elif orphan := orphan_refusal(self.path):  # saved samples no manifest vouches for
            raise ResultsError(orphan)
        elif any((self.path / m).is_file() for m in MARKERS):
            return  # a run that stopped before it saved anything (a full disk): it starts from the first item
        elif self.path in self._made:  # (a typo in --out): no folder made
            raise ResultsError(nothing_to_resume(self.path))
        else:  # empty, or a lock a run killed before it showed its state left (guard refused anything else)
            self.tell(starts_there(self.path))

    def start(self, manifest: Manifest, *, resume: bool) -> None:
        """Begin a run, or continue one whose recorded manifest equals ``manifest`` (or grows into it: a
        finished run, reopened when its first new item is scored: run/resume.py)."""
        self.check(manifest, resume=resume)
        if resume and self.finished():  # check() let it through: it grows (record.growth), reopened at its
            self.growing = manifest      # first new item: stopped before it, the finished run is left as it was
            return
        write_manifest(self.ckpt / RUN_MANIFEST, manifest)

    def done(self, task: str) -> dict[str, Sample]:
        """Samples already scored for ``task`` (from a finished file or the checkpoint), each
        line checked (record.samples: a sample that holds together), as written; a torn last line of the
        checkpoint is cut, a damaged line elsewhere set aside (saved.kept_lines: the checkpoint rewritten
        without it), and its item is scored again. A finished run a --resume grows must be whole."""
        return self._kept(task, None)

    def vouched(self, run) -> dict[str, Sample]:
        """What :meth:`done` holds for ``run`` (a tasks.selection.TaskRun as the resume rebuilt it), each saved line
        vouched for by its item (saved.kept_lines, the rule a dry run counts by too); a line its item does not give
        (a context, a gold changed) is set aside, the checkpoint rewritten without it, and its item scored again."""
        return self._kept(run.task.key, run)

    def _kept(self, task: str, run) -> dict[str, Sample]:
        kept = kept_lines(self.path, task, run, repair=True)
        found = dict(kept.found)
        for why in kept.why(task):
            self._keep(task, found, why)
        return found

    def _keep(self, task: str, found: dict[str, Sample], why: str) -> None:
        """``task``'s checkpoint rewritten to hold ``found`` alone (a cut finish's samples file folded into it,
        then removed); refused while the finished run a --resume grows is in place (it stays as it was)."""
        if self.growing is not None:
            raise ResultsError(grow_refusal(self.path, why))
        self.ckpt.mkdir(exist_ok=True)
        refuse_link(self.ckpt, folder=True)
        atomic_write(self.ckpt / samples_name(task), "".join(dumps_line(s.line) for s in found.values()))
        remove_own(self.path / samples_name(task))
        self.tell(f"resume: {why}: set aside, scored again")

    def scored_with(self, threads: Callable[[], int | None], counted: Callable[[], int]) -> None:
        """The backend that scores this run's items (execute.py): its thread count (``threads()``) and its decode
        calls so far that depend on it (``counted()``), kept in the checkpoint with the items (resume.ThreadLog);
        a --resume whose count is not the one the saved items' such calls were made with is refused here."""
        earlier = [kernel_path.part(read_run(self.path).provenance)] if self.growing is not None else None
        self.thread_log.start(threads, counted, earlier)

    def append(self, task: str, sample: Sample) -> None:
        path = self.ckpt / samples_name(task)
        self.declared.line(task, sample, f"the sample to append to {path}")  # what a reader refuses is not written
        if self.growing is not None:
            reopen(self.path, self.growing)
            self.growing = None
        self.thread_log.note()
        fh = self._handles.get(task)
        try:
            if fh is None:
                self.ckpt.mkdir(parents=True, exist_ok=True)
                refuse_link(self.ckpt, folder=True)
                fh = self._handles[task] = open_own(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "a")
            fh.write(dumps_line(sample.line))
            fh.flush()
            now = time.monotonic()
            if now - self._synced.get(task, -math.inf) >= SYNC_EVERY:
                os.fsync(fh.fileno())
                self._synced[task] = now
        except OSError as exc:  # what the failed flush left buffered is dropped (a torn line is rescored)
            if fh is not None:
                close_own(self._handles.pop(task, fh))
            raise write_error(path, exc) from None

    # -- state shown to ls and `runs` ------------------------------------------------------
    def running(self, totals: dict[str, int], resume: str = "") -> None:
        """Mark the folder RUNNING: this process, when it started, the call that resumes the run (``resume``, as
        :meth:`interrupted` takes it: a kill -9 prints nothing, and leaves this file), the items of each task. A
        folder that cannot show its state (a full disk) is not run: the error names the file."""
        self.totals, self.started = dict(totals), _now()
        self._mark(RUNNING, [_resume(resume)], strict=True)

    def interrupted(self, resume: str = "") -> None:
        """Mark the folder INTERRUPTED; ``resume``: the call that continues the run, in the words of the door that
        ran it (its ``resume_hint``: a command line, a Python call), else how each door does it."""
        self._mark(INTERRUPTED, [f"interrupted: {_now()}", _resume(resume)])

    def abandon(self) -> None:
        """A run stopped before it saved an item leaves nothing of its own (state file, manifest, thread counts, an
        empty samples file); release() then removes the folders it made."""
        names = [samples_name(t) for t in getattr(self, "totals", {})]  # (empty: called when none holds a line)
        ckpt = self.ckpt.is_dir() and not self.ckpt.is_symlink()  # never a file through a link
        for f in (*(self.path / m for m in MARKERS), *(self.ckpt / n for n in (*OWN_FILES, *names) if ckpt)):
            remove_own(f)

    def failed(self, error: str, resume: str = "") -> None:
        """Mark the folder FAILED with ``error``, and the call that resumes the run once its cause is gone (``resume``,
        as :meth:`interrupted` takes it)."""
        self._mark(FAILED, [f"failed: {_now()}", f"error: {' '.join(error.split())}", _resume(resume)])

    def _mark(self, state: str, lines: list[str], *, strict: bool = False) -> None:
        totals = getattr(self, "totals", {})
        done = saved_counts(self.path, totals)
        lines = [f"pid: {os.getpid()}", f"started: {getattr(self, 'started', '?')}", *lines, f"items: {items_text(done, totals)}",
                 "totals: " + ", ".join(f"{t}={n}" for t, n in totals.items())]
        text = "\n".join(lines) + "\n"
        try:
            atomic_write(self.path / state, text)
        except ResultsError as err:
            if not (isinstance(err, NoSpaceError) and rewrite_marker(self.path, state, text)):
                if strict:
                    raise
                return  # otherwise the state file is a courtesy; the checkpoint is what counts
        for name in MARKERS:
            if name != state:
                (self.path / name).unlink(missing_ok=True)

    def finalize(self, record: Record, samples: Mapping[str, Sequence[Sample]]) -> Path:
        """Put the samples files in place, then write results.json; then drop the checkpoint. Each task's
        samples are checked first as a reader will (record.samples), their count against ``n``. A task's
        checkpoint that holds its file's bytes is moved into place; another is written, and its checkpoint copy
        dropped at once (a resume reads a samples file beside a checkpoint as saved items), so finishing needs
        room for one task's samples more, not a second copy of all. Stopped before results.json is written (a
        full disk, a signal), the samples files go back into the checkpoint: no samples file without
        results.json."""
        for task, rows in samples.items():
            check_rows(rows, self.path / samples_name(task), record.tasks[task].n if task in record.tasks else None)
            for row in rows:
                self.declared.fields(task, row)
        parts = thread_parts(self.path)  # a resumed run's: the thread count its record states (kernel_path)
        if parts and record.provenance is not None:
            record = replace(record, provenance=kernel_path.with_threads(record.provenance, parts))
        for fh in self._handles.values():
            close_own(fh, sync=True)
        self._handles.clear()
        try:
            for task, rows in samples.items():
                place(self.path, samples_name(task), "".join(dumps_line(r.line) for r in rows).encode())
            path = write_record(self.path / RESULTS, record)  # the run is finished: what follows only tidies
        except BaseException:
            if not (self.path / RESULTS).is_file():
                for task in samples:
                    unplace(self.path, samples_name(task))
            raise
        self.written, self.growing = record, None  # (the record as written: the thread count it states)
        self.tidy_finished(samples)
        return path

    def unopened(self) -> bool:
        """Whether the finished run a --resume grows is here as it was: its results.json in place (resume.reopen
        removes it only once the checkpoint holds the whole run), which a stop leaves so (:meth:`tidy_finished`)."""
        return self.growing is not None and (self.path / RESULTS).is_file()

    def finished(self) -> bool:
        """Whether results.json is written (by this run: a folder holding one is refused, or not taken, or
        a finished run this run grows, still ``growing``: not this run's)."""
        return (self.path / RESULTS).is_file() and self.growing is None

    def tidy_finished(self, tasks) -> None:
        """What a finished run keeps beside results.json goes: the state files, temp files of the
        files it writes (left by a process killed mid-write), the checkpoint's manifest, thread counts, a grow's
        kept record (resume.OWN_FILES) and its ``tasks``' samples, then the checkpoint folder if that empties it (a
        file the run did not make stays). Any step may be cut by a signal: the next call (a --resume) completes it."""
        for fh in self._handles.values():
            close_own(fh)
        self._handles.clear()
        self.thread_log.close()
        if not (self.path / RESULTS).is_file():
            return  # no finished run: the checkpoint may be all there is of one (a grow cut as it reopened it)
        names = [samples_name(t) for t in tasks]
        ckpt = self.ckpt.is_dir() and not self.ckpt.is_symlink()
        gone = [*(self.path / m for m in MARKERS),
                *(t for n in (*names, RESULTS, *MARKERS) for t in temp_files(self.path, n)),
                *(f for n in (*OWN_FILES, *names) if ckpt
                  for f in (self.ckpt / n, *temp_files(self.ckpt, n)))]
        for f in gone:  # in this order: the state files first, the checkpoint last
            remove_own(f)
        if ckpt:
            try:
                self.ckpt.rmdir()
            except OSError:
                pass  # it holds files the run did not make: they stay


def place(folder: Path, name: str, data: bytes) -> None:
    """The samples file ``name`` in ``folder`` made to hold ``data`` (:meth:`OutputDir.finalize`): the checkpoint's
    moved into place when it holds these bytes, else written (the checkpoint's copy then dropped); one a cut
    finish left, as it is."""
    final, saved = folder / name, folder / CHECKPOINT / name
    if holds_bytes(saved, data):
        refuse_link(final)
        os.replace(saved, final)
    elif not holds_bytes(final, data):
        atomic_write(final, data)
        remove_own(saved)


def unplace(folder: Path, name: str) -> None:
    """A samples file :func:`place` put in place moved back into the checkpoint (a rename: no room needed); with no
    checkpoint (a merge's folder: its shards hold the samples), removed."""
    final, ckpt = folder / name, folder / CHECKPOINT
    try:
        if final.is_file() and not final.is_symlink():
            if ckpt.is_dir() and not ckpt.is_symlink():
                os.replace(final, ckpt / name)
            else:
                os.unlink(final)
    except OSError:
        pass  # left where it is: a resume reads it as saved items


def _resume(call: str) -> str:
    """A state file's line of the call that resumes its run (a door's), else how each door does it."""
    return f"resume: {call or RESUME_ANY_DOOR}"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
