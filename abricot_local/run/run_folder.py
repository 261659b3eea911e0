"""A run's output folder across the run's life (:class:`RunFolder`): before its path is known, while the run holds
it (the lock, RUNNING, the checkpoint: run/folder.py's OutputDir), when it is finished, FAILED, INTERRUPTED by
Ctrl-C or SIGTERM, or left by a signal or a lost remote device from another thread while llama.cpp does not
return. What it says leaves through the run's hooks (``say``, ``hint``); every state file is written by OutputDir."""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from abricot_local.errors import AbricotError, NoSpaceError, opt, recorded_text, recorded_words, render, shell_word
from abricot_local.record import RESULTS, Manifest
from abricot_local.run.folder import OutputDir
from abricot_local.record.outputs import INTERRUPTED, MARKERS, RUNNING
from abricot_local.run.owned import signals_held
from abricot_local.run.resume import resumable
from abricot_local.run.saved import saved_files
from abricot_local.run.states import items_text, recorded_tasks, saved_counts


def resume_words(folder: Path, tasks: tuple[str, ...] = ()) -> str:
    """The options that resume a run in ``folder`` (errors.opt: each door writes them), where a door gives no
    hint of its own (``tasks``, the run's task keys, which a door's hint names: not needed here)."""
    return f"{opt('out', shell_word(str(folder)))} {opt('resume', True)}"


@dataclass
class RunFolder:
    """One run's output folder from before its path is known (a default folder is named once the plan
    is made) to the run's end, and every state it shows: RUNNING and the checkpoint while scoring,
    results.json once finished, FAILED with the error, INTERRUPTED after Ctrl-C or SIGTERM, or when a
    signal or a lost remote device ends the process from another thread while llama.cpp does not return
    (:meth:`stuck`, :meth:`lost`: the folder this run holds, marked through this object; ``say``: the line that
    leaves the process, ``hint``: (folder, the run's task keys) -> the call that resumes the run in it, which
    RUNNING and FAILED hold too (a kill -9 prints nothing); ``within``: a sweep's folder, which that call names:
    the sweep resumed whole, every model, never one model into its own folder as a sweep; ``sweep_done``: the sweep's
    folders that held a finished run as this model began, which a signal before this model saved anything counts and
    names the tasks of)."""

    path: Path | None = None
    say: Callable[[str], None] = lambda line: None
    hint: Callable[..., str] = resume_words  # (folder, the run's task keys) -> the call
    totals: dict[str, int] = field(default_factory=dict)  # the items of each task, once planned
    out: OutputDir | None = None  # while this run holds the folder
    grown: tuple[int, int] | None = None  # a --resume growing the finished run here: --sample n -> m
    bound: str = "sample"  # what ``grown`` counts: the run's --sample, or ("max_items") its bound --until-settled
    resume: bool = False  # the run is a --resume (its folder, once taken, is left INTERRUPTED however little it saved)
    within: Path | None = None  # a sweep's folder (run.session.Folders.root): what its resume call names
    sweep_done: tuple[Path, ...] = ()  # a sweep's: the folders it named that held a finished run as this model began
    # (run.session.Folders.finished), none outside a sweep
    found: tuple | None = field(default=None, init=False)  # results.json as the run began (:meth:`as_found`)

    def __post_init__(self) -> None:
        self.found = _identity(self.path)

    def as_found(self) -> bool:
        """Whether the folder's results.json is the one it held as the run began (a --resume's finished run: this
        run wrote none, and removed none)."""
        return self.found is not None and _identity(self.path) == self.found

    def complete(self) -> bool:
        """Whether the folder holds a finished run that a signal leaves complete: results.json written by this run,
        or the finished run a --resume found there and does not grow (:attr:`grown`)."""
        return self.path is not None and (self.path / RESULTS).is_file() and not (self.grown and self.as_found())

    @contextmanager
    def taken(self, manifest: Manifest, *, resume: bool):
        """The folder held (its lock), refusing what it cannot take before any model loads; a full disk that
        leaves no room for the lock says how to go on, as one later does (:meth:`go_on`)."""
        out = OutputDir(self.path)
        try:
            with signals_held():  # a signal as the lock is taken: raised once it is held here, given back below
                try:
                    out.acquire()
                except NoSpaceError as err:
                    raise NoSpaceError(f"{err.raw()}\n{self.go_on('there is space again')}") from None
                self.out, out.tell, self.resume = out, self.say, resume
            out.check(manifest, resume=resume)
            yield out
        finally:
            self.out = None
            out.release()

    @contextmanager
    def scoring(self, manifest: Manifest, *, resume: bool):
        """The held folder RUNNING while the block scores into it (the checkpoint; results.json written
        last by :meth:`OutputDir.finalize`); a failure leaves FAILED with its reason, Ctrl-C INTERRUPTED,
        and Ctrl-C once results.json is written finishes the tidy-up and ends the block (the run is complete).
        A run that grows a finished one and stops before its first new item leaves that run as it was; a run
        without --resume stopped before it saved an item leaves nothing (:meth:`OutputDir.abandon`)."""
        out = self.out
        try:
            out.running(self.totals, self.resume_line(out.path))
        except KeyboardInterrupt:  # before start(): a finished run here is one this --resume grows
            self._stopped(out, resume, growing=(out.path / RESULTS).is_file())
            raise
        try:
            out.start(manifest, resume=resume)
            yield out
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM as the CLI turns it
            if out.growing is not None or not out.finished():
                self._stopped(out, resume, growing=out.unopened())  # (reopened: the grow INTERRUPTED, resumable)
                raise
            out.tidy_finished(self.totals)
        except Exception as err:
            if out.unopened():
                out.tidy_finished(self.totals)
            else:
                out.failed(recorded_text(err) if isinstance(err, AbricotError) else f"{type(err).__name__}: {err}",
                           self.resume_line(out.path))
            if isinstance(err, NoSpaceError):  # the run's ending says what is kept and how to go on, as Ctrl-C's
                raise NoSpaceError(f"{err.raw()}\n{self.go_on('there is space again')}") from None
            raise

    def _stopped(self, out: OutputDir, resume: bool, *, growing: bool) -> bool:
        """The folder as a signal before results.json leaves it, the one rule of Ctrl-C's and of a signal while
        llama.cpp does not return (:meth:`interrupted`): the finished run a --resume grows as it was, a run with an
        item saved (or a --resume's folder: the items an earlier run saved kept) INTERRUPTED, a new run with none
        saved gone (OutputDir.abandon: the files it made, and the folders). True when it left nothing to resume."""
        if growing:
            out.tidy_finished(self.totals)
        elif resume or saved_files(out.path):
            if not hasattr(out, "totals"):  # stopped before it showed RUNNING (a model's load)
                out.running(self.totals)
            out.interrupted(self.resume_line(out.path))
        else:
            out.abandon()
            return True
        return False

    def resume_line(self, folder: Path) -> str:
        """The INTERRUPTED file's advice: this door's call that resumes the run in ``folder`` (its ``hint``), its
        options in the record's words; "" (each door's way, OutputDir.interrupted) where the door gives none."""
        return "" if self.hint is resume_words else render(self.resume_call(folder), recorded_words)

    def resume_call(self, folder: Path) -> str:
        """The call that resumes the run in ``folder`` (``hint``'s): a sweep's names the sweep's folder; the tasks
        the run resolved named (``totals``' keys once planned, before that a --resume's as its folder records them:
        data that lands later makes no other run of it)."""
        return self.hint(self.within or folder, tuple(self.totals) or recorded_tasks(folder))

    def stuck(self, _signum: int = 0) -> None:
        """A signal came and the backend did not return (backends.on_stuck): the folder left INTERRUPTED, what is
        saved said; the process ends next."""
        self.say(self.interrupted())

    def interrupted(self) -> str:
        """What a signal leaves of the folder, and the text to say (the one this run holds too, when a signal ends
        the process from the watchdog thread while llama.cpp does not return): by :meth:`_stopped`'s rule, the
        folder INTERRUPTED, what is saved and the call that resumes said; before the run saved an item (and no
        --resume), what it wrote removed (a folder it did not take left as it was) and no command said."""
        out_dir, holding, resume_hint = self.path, self.out, self.resume_call
        if out_dir is not None and (out_dir / RESULTS).is_file():  # the signal came once the run was written
            if holding is not None:
                if holding.unopened():
                    holding.tidy_finished(self.totals)  # no state file beside the finished run it left as it was
                holding.release()
            if not self.complete():  # the finished run a grow found, before it scored a new item (or planned it)
                return f"\ninterrupted: {self.as_it_was(out_dir)}.\ngrow it with: {resume_hint(out_dir)}"
            return f"\ninterrupted: the run in {out_dir} is complete (results.json is written)"
        fresh = out_dir is None or not (self.resume or saved_files(out_dir))  # nothing this run could resume
        if holding is not None:
            try:
                fresh = self._stopped(holding, self.resume, growing=False)  # (a grow it holds: results.json, above)
            except AbricotError:
                pass  # the state file is a courtesy; the checkpoint is what counts
            holding.release()  # no lock file, and no folder this run made and left empty
        shows = not fresh and (resumable(out_dir) or any((out_dir / m).is_file() for m in MARKERS))
        if shows and holding is None and not (out_dir / INTERRUPTED).exists():
            try:  # stopped before it took the folder (a resume, planning): the run there INTERRUPTED
                with OutputDir(out_dir) as folder:
                    folder.running(self.totals)
                    folder.interrupted(self.resume_line(out_dir))
            except AbricotError:
                pass  # another run holds the folder: its state is its own
        if not shows:  # what this run made is gone; a folder it did not take, as it was
            done = self.sweep_done  # a sweep's models finished before this one: its --resume goes on from them
            if done:
                tasks = tuple(self.totals) or finished_tasks(done)
                return (f"\ninterrupted: nothing scored yet of this model; the sweep in {self.within} holds "
                        f"{len(done)} finished run(s).\nresume with: {self.hint(self.within, tasks)}")
            where = f" (no run folder at {out_dir})" if out_dir and not out_dir.exists() else ""
            return f"\ninterrupted: nothing scored yet, nothing to resume{where}; run the same command again to start"
        saved = saved_counts(out_dir, self.totals)  # what is on disk (a resume's earlier items too)
        what = items_text(saved, self.totals) if any(saved.values()) else "no item"
        return f"\ninterrupted: {what} saved in {out_dir}.\nresume with: {resume_hint(out_dir)}"

    def as_it_was(self, path: Path) -> str:
        """What a grow stopped before its first new item leaves: the finished run it found, as it was."""
        n = self.grown[0]
        what = (f"{opt('sample', n)} run" if self.bound == "sample" else
                f"run of {n} items ({opt('until_settled', True)})")
        return f"the run in {path} is its finished {what}, as it was (no new item scored)"

    def lost(self, err: AbricotError) -> None:
        """A remote device went away (a backend's ``watch_remote``) and takes the process with it: the folder left
        FAILED with the error (no RUNNING marker left: it says why it stopped), what happened and how to go on
        said, and the process ends with the error's code."""
        import sys

        self.say(self.lost_text(err))
        sys.stderr.flush()
        os._exit(err.exit_code)

    def lost_text(self, err: AbricotError) -> str:
        """:meth:`lost`'s folder marked and its text."""
        holding = self.out
        if holding is not None:
            if holding.unopened():  # no new item yet: the finished run it grows stays as it was
                holding.tidy_finished(self.totals)
            elif (self.path / RUNNING).is_file():
                holding.failed(recorded_text(err), self.resume_line(self.path))
            holding.release()
        return f"\nerror: {err.raw()}\n{self.go_on('it is back')}"

    def go_on(self, once: str) -> str:
        """How to go on after a failure that leaves the folder (a lost device, a full disk), ``once`` its cause is
        gone: what the folder keeps and the call that resumes the run there (this door's ``hint``), by
        :meth:`interrupted`'s words (a grow stopped before its first new item: the finished run, as it was); a
        folder holding no run to resume: the same call again."""
        path = self.path
        if path is not None and not self.complete() and (path / RESULTS).is_file():
            return f"{self.as_it_was(path)}; once {once}, grow it with: {self.resume_call(path)}"
        if path is None or not resumable(path):
            return f"nothing scored is kept; once {once}, run the same command again"
        saved = saved_counts(path, self.totals)  # what is on disk (a resume's earlier items too)
        what = items_text(saved, self.totals) if any(saved.values()) else "no item"
        return f"{what} saved in {path}; once {once}, resume with: {self.resume_call(path)}"


def _identity(folder: Path | None) -> tuple | None:
    """Which file ``folder``'s results.json is (a rewrite is another: atomic, a new inode), None when none."""
    try:
        st = os.stat(folder / RESULTS) if folder is not None else None
    except OSError:
        return None
    return None if st is None else (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def finished_tasks(finished: Sequence[Path]) -> tuple[str, ...]:
    """The task keys the first of ``finished`` (a sweep's finished runs' folders) resolved: what the sweep's resume
    call names (data landing later makes no other run of the models left); () when none can be read."""
    from abricot_local.record import read_run
    from abricot_local.record.settings import task_keys

    try:
        return task_keys(read_run(finished[0]).config) if finished else ()
    except AbricotError:
        return ()
