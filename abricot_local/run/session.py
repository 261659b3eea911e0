"""One `run` of one model or of several (a sweep), as the command line and the Python API both
make it: the plan, the output folder (lock, checkpoint, resume, refusals), the remote devices
watched, Ctrl-C saved for a resume. No printing: what a run says goes through :class:`Hooks`."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from abricot_local.errors import AbricotError
from abricot_local.record import RESULTS, Record
from abricot_local.names import path_part
from abricot_local.run.owned import fresh_folder
from abricot_local.run.request import slug
from abricot_local.run.run_folder import RunFolder, finished_tasks, resume_words


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, as the CLI turns it) ended a run: its folder is left INTERRUPTED, and
    ``message`` says what is saved and how to go on; ``complete``: the signal came once every run of the
    request was written (nothing lost, nothing to resume: the CLI exits 0, not 130)."""

    def __init__(self, message: str, complete: bool = False):
        super().__init__(message)
        self.message = message
        self.complete = complete


@dataclass(frozen=True)
class Hooks:
    """What a run tells its caller: ``notify`` (the plan's lines: downloads; a sweep's: each model's
    folder), ``warn`` (a task skipped, a task's note: one line each, as the CLI prints them),
    ``progress`` (each model's: () -> (update(task, done, total), close())), ``on_loaded`` (plan, backend,
    cost: the model is open; the cost, dry_run.of_run's, is made only for it), ``resume_hint`` ((folder, its
    run's task keys) -> the call that continues a run in it, naming those tasks where the command named none), ``say`` (the lines that leave the process: a lost RPC server; a --resume's
    own, as its folder says them: a saved line set aside, the run grown, its verdict judged again), ``done``
    (each model's :class:`Step` as it ends), ``ended`` (a sweep's request and steps once its last model
    ended: its comparison), ``before_download`` (dry_run.of_download's DryRun, None when it could not be made:
    the cost of a model's plan estimated from its registry entry before its download starts; made only for it)."""

    notify: Callable[[str], None] = lambda line: None
    warn: Callable[[str], None] = lambda line: None
    progress: Callable[[], tuple[Callable[[str, int, int], None] | None, Callable[[], None]]] | None = None
    on_loaded: Callable[[object, object, object], None] | None = None
    before_download: Callable[[object], None] | None = None
    resume_hint: Callable[..., str] = resume_words  # (folder, the run's task keys) -> the call
    say: Callable[[str], None] = lambda line: None
    done: Callable[["Step"], None] = lambda step: None
    ended: Callable[[object, list], None] = lambda request, steps: None  # a sweep's end: its request, its steps


@dataclass(frozen=True)
class Outcome:
    path: Path
    record: Record
    complete: bool = False  # --resume found the run already finished: nothing was scored or written (but:)
    rejudged: bool = False  # its verdict judged again at another --margin, results.json rewritten (run.found.rejudged)
    warnings: tuple[tuple[str, str], ...] = ()  # (task, text): what its tasks' numbers may mislead by, as made
    # (misleading.run_warnings: opt()'s, for a door to render; the record holds them in its words)


class Folders:
    """The folders of one run of ``request`` (a run.request.RunRequest): each named once, a default one made
    when first asked for; :meth:`drop_unused` removes the default ones still empty."""

    def __init__(self, request) -> None:
        self.request = request
        self._made: dict[str, tuple[Path, list[Path]]] = {}  # what fresh_folder made, by the name asked for
        self._named: dict[Path, None] = {}  # every model's folder named so far, in order

    @property
    def root(self) -> Path:
        """The folder of a sweep: --out, else results/sweep-<stamp> (made now, once)."""
        return self.request.out or self._default(Path("results"), f"sweep-{self.request.stamp}")

    def of(self, model: str, label: str | None = None) -> Path | None:
        """The folder ``model``'s run writes: in a sweep <root>/<its slug>, else --out, else results/<label>/<stamp>
        (``label``: the located model's; None before it is located: no folder yet), made now, once."""
        r = self.request
        folder = r.out_folder(model)  # --out's (RunRequest.out_folder: a sweep's refused where it is a link)
        if folder is None and r.sweep:
            folder = self.root / slug(model)
        elif folder is None and label is not None:
            folder = self._default(Path("results") / path_part(label, "model"), r.stamp)
        if folder is not None:
            self._named[folder] = None
        return folder

    def finished(self) -> list[Path]:
        """The folders named so far that hold a finished run now (its results.json): what a signal leaves complete,
        told by the folder itself (a signal between a run's results.json and its step leaves no step to tell it)."""
        return [f for f in self._named if (f / RESULTS).is_file()]

    def _default(self, parent: Path, name: str) -> Path:
        key = str(parent / name)
        if key not in self._made:
            self._made[key] = fresh_folder(parent, name)
        return self._made[key][0]

    def drop_unused(self) -> None:
        """Remove the default folders made here that are still empty, and the folders made for them, while
        empty."""
        for _folder, chain in list(self._made.values()):
            for path in chain:  # deepest first
                try:
                    path.rmdir()
                except OSError:  # not empty (written, or another run's), or gone
                    break


@dataclass(frozen=True)
class Done:
    plan: object  # run.plan.Plan
    outcome: Outcome
    folder: Path
    seconds: float  # from the output folder taken to the record written
    within: Path | None = None  # a sweep's folder (RunFolder.within): what a call that grows this run names


@dataclass(frozen=True)
class Step:
    """One model of a `run`, as it ends: its run (``done``: a --resume's found complete too; none for a ladder's rung
    a --resume found holding its looks), or (a sweep's) why it failed (``failed``, its options unrendered: errors.opt)."""

    model: str
    folder: Path | None
    done: Done | None = None
    failed: str = ""


def run(request, hooks: Hooks) -> Iterator[Step]:
    """`run` and ``evaluate``: the request's model into --out (None: results/<model>/<stamp>), or its
    models one after another into the sweep's folder (:func:`sweep`); each model's :class:`Step` as it ends
    (``hooks.done`` told first). --limit's caution is said first (``hooks.notify``). Ctrl-C anywhere else than
    inside a model's run (which says its own: :func:`run_model`), as ``hooks.done`` tells a step, between two
    models or as ``hooks.ended`` tells a sweep's end, raises :class:`Interrupted` too, saying which runs are
    complete (:func:`after_signal`)."""
    steps: list[Step] = []
    folders = Folders(request)  # this run's: a default folder made once, and gone at the end when left empty
    try:
        if request.caution:
            hooks.notify(request.caution)
        for step in _steps(request, hooks, folders):
            steps.append(step)
            hooks.done(step)
            yield step
        if request.sweep:
            hooks.ended(request, steps)
    except Interrupted:
        raise
    except KeyboardInterrupt as err:
        finished = list(dict.fromkeys([*(s.folder for s in steps if s.folder is not None and not s.failed),
                                       *folders.finished()]))
        raise Interrupted(after_signal(request, finished, hooks.resume_hint,
                                       folders.root if request.sweep else None),
                          complete=len(finished) == len(request.models)) from err
    finally:
        folders.drop_unused()


def after_signal(request, finished: list[Path], resume_hint: Callable[..., str] = resume_words,
                 root: Path | None = None) -> str:
    """What a signal outside a model's run leaves (the text of :class:`Interrupted`): the runs that finished
    (``finished``, their folders: each complete, its results.json written), and, for a sweep with models
    left, the call that goes on."""
    if not request.sweep:
        if finished:
            return f"\ninterrupted: the run in {finished[0]} is complete (results.json is written)"
        return "\ninterrupted: before the run began, nothing was written; run the same command again"
    n = len(request.models)
    if len(finished) == n:
        return f"\ninterrupted: the sweep in {root} holds its {n} runs, complete (results.json is written)"
    return (f"\ninterrupted: the sweep in {root} holds {len(finished)} of {n} runs complete (results.json is "
            f"written).\nresume with: {resume_hint(root, finished_tasks(finished))}")


def _steps(request, hooks: Hooks, folders: Folders) -> Iterator[Step]:
    if not request.sweep:
        done = run_model(request, request.models[0], request.resume, hooks=hooks, folders=folders)
        yield Step(request.models[0], done.folder, done)
        return
    if request.settle.on and len(request.models) > 1:  # (a list of one: a sweep, no ladder)
        from abricot_local.run.settle_sweep import ladder

        for model, done, failed in ladder(request, hooks, functools.partial(run_model, folders=folders),
                                          folders):
            yield Step(model, None if failed else folders.of(model), done, failed)
        return
    yield from sweep(request, hooks, folders)


def run_model(request, model: str, resume: bool, *, hooks: Hooks, folders: Folders, pairs=None, fits=None) -> Done:
    """One model of ``request`` (a run.request.RunRequest): plan, load, score, write into its folder
    (``folders``, this run's: a default one named once the model is located; ``fits``: a plan whose items must fit
    too, checked before any is scored: :func:`run_plan`). Ctrl-C (KeyboardInterrupt) at any moment (planning,
    hashing, loading, scoring) leaves the folder INTERRUPTED and raises :class:`Interrupted`."""
    from abricot_local import backends
    from abricot_local.run.dry_run import of_download
    from abricot_local.run.found import before_plan
    from abricot_local.run.plan import make_plan

    folder = RunFolder(folders.of(model), hooks.say, hooks.resume_hint, resume=resume,  # its states, a signal's too
                       within=folders.root if request.sweep else None,  # (a sweep's resume: the sweep's)
                       sweep_done=tuple(folders.finished()) if request.sweep else ())
    if resume:  # a signal before its plan: the finished run its options grow, as it was (run.found's once made)
        folder.grown, folder.bound = before_plan(folder.path, request)
    progress, close = hooks.progress() if hooks.progress else (None, lambda: None)
    forget = backends.on_stuck(folder.stuck)  # the backend did not return after a signal: the process ends now
    try:
        plan = make_plan(request, model, notify=hooks.notify,  # the name located first: an unknown one refused
                         before_download=None if hooks.before_download is None else
                         lambda dry: hooks.before_download(of_download(dry, hooks.warn)))
        folder.path = folders.of(model, plan.model_label)
        folder.totals = {r.task.key: len(r.items) for r in plan.runs}
        for s in plan.skipped:
            hooks.warn(f"skipped {s.task}: {s.said} ({s.how})")
        for r in plan.runs:
            for note in r.notes:
                hooks.warn(f"warning: {r.task.key}: {note}")
        started = time.perf_counter()
        outcome = run_plan(plan, folder, resume=resume, progress=progress, notify=folder.say, pairs=pairs, fits=fits,
                           on_loaded=hooks.on_loaded, warn=hooks.warn)
    except KeyboardInterrupt as err:  # after results.json is written (and not before a grow): the run is complete
        raise Interrupted(folder.interrupted(), complete=folder.complete() and not request.sweep) from err
    finally:
        close()
        forget()
    return Done(plan, outcome, folder.path, time.perf_counter() - started, folder.within)


def run_plan(plan, folder: RunFolder | Path, *, resume: bool = False, progress=None,
             on_loaded: Callable[[object, object, object], None] | None = None,
             warn: Callable[[str], None] = lambda line: None, notify: Callable[[str], None] | None = None,
             pairs=None, fits=None) -> Outcome:
    """``plan`` (a run.plan.Plan) executed into its folder: the folder taken (its lock, and what it
    refuses) before the model loads, the model loaded once, every task scored into the checkpoint
    (execute.py), the record made (record.py) and results.json written last; what the folder holds and what the
    run does there decided first (run/found.py: the plan it scores); a --resume of a finished
    run writes nothing (its tidy-up's leftovers go), unless it grows the run's --sample (run/resume.py:
    only the new items are scored, said through ``notify``) or gives another ``--margin`` than the one its
    verdict records (run.found.rejudged: nothing scored, its verdict judged again; no --margin keeps the recorded one).
    ``on_loaded`` (``plan``, the backend, its cost): told once the model is open, with the cost of ``plan``, made only
    for it (dry_run.of_run: its items counted with the loaded model, no other load; a --resume's, the items left; a
    ladder's rung, ``pairs``: its verdicts against its reference, as --dry-run costs them; None where it could not be
    made, said through ``warn``: it only informs, dry_run.informing).
    ``fits``: a plan whose items the loaded model must fit too, though this one scores only some of them (a ladder's
    reference: every item its looks may reach, as each rung's plan holds them), checked with the plan's own before any
    item is scored (execute.prepared)."""
    from abricot_local.run.dry_run import informing, of_run
    from abricot_local.run.execute import execute, open_backend
    from abricot_local.run.found import find, kept
    from abricot_local.run.record import record_of

    folder = folder if isinstance(folder, RunFolder) else RunFolder(Path(folder))
    folder.totals = folder.totals or {r.task.key: len(r.items) for r in plan.runs}
    start = time.perf_counter()
    found = find(plan, folder.path, resume=resume, pairs=pairs)  # what the folder holds, what the run does there
    folder.grown, folder.bound = found.grown, found.bound
    if found.finished is not None:  # nothing to score: the finished run stays as it is (its leftovers gone, its
        record = kept(found, folder.path, notify)  # verdict judged again at another --margin)
        return Outcome(folder.path / RESULTS, record, complete=True, rejudged=found.again)
    if found.line and notify:
        notify(found.line)
    asked, plan = plan, found.plan  # (as asked: its cost, on_loaded's)
    with folder.taken(found.manifest, resume=resume) as out:  # a second run on this folder is refused before any load
        backend = open_backend(plan, lost=folder.lost)  # its remote devices watched from here: a lost one marks the folder
        try:
            if on_loaded:  # the cost of the plan as asked: it only informs
                reference = pairs.reference if pairs is not None else None
                cost = informing(lambda: of_run(asked, backend, folder.path if resume else None, reference), warn)
                on_loaded(asked, backend, cost)
            with folder.scoring(found.manifest, resume=resume):
                results = execute(plan, backend, out, progress=progress, stages=found.stages, fits=fits)
                made = record_of(found.stages, plan, backend, results, time.perf_counter() - start, folder.path)
                out.finalize(made.record, made.samples)  # the samples placed, results.json written, the rest tidied
        finally:
            backend.close()
    written = out.written or made.record  # as results.json holds it (a resumed run's thread count: run/folder.py;
    return Outcome(folder.path / RESULTS, written, warnings=made.warnings)  # Ctrl-C in its tidy-up: the one made)


def sweep(request, hooks: Hooks, folders: Folders) -> Iterator[Step]:
    """The request's models one after another, each into <sweep root>/<model>/; a model that fails is said
    (``hooks.notify``) and the others go on. With --resume, each model's run goes on as one model's --resume does
    (:func:`run_model`): a finished run that is this request's is complete (nothing scored or loaded), one this
    request grows or judges again at another --margin is grown or judged again, and one of other options is refused
    as that model's error. A models.toml pin of a model it plans that is wrong (run.plan.PinsRefused: its first plan
    holds every model's, before any item) ends it."""
    from abricot_local.run.plan import PinsRefused
    from abricot_local.run.settle_sweep import resumes

    for model in request.models:
        folder = folders.of(model)
        hooks.notify(f"== {model} -> {folder}")
        try:
            done = run_model(request, model, resumes(request, folder), hooks=hooks, folders=folders)
        except PinsRefused:  # a models.toml pin of the sweep's models: the sweep's error, not this model's
            raise
        except AbricotError as err:
            hooks.notify(f"error: {model}: {err.raw()}")
            yield Step(model, None, failed=err.raw())
            continue
        yield Step(model, folder, done)
