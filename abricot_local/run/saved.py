"""Whether a run may take what an output folder holds of its scored items before its results.json (run/folder.py's
writer asks, and the dry run: :func:`held_items`), and the plan as a --resume there compares it: samples saved with no
manifest (``.checkpoint/run.json``) that says how they were made are never reused (:func:`orphan_refusal`); a run
without --resume does not take a folder holding a run (:func:`fresh_refusal`, offering --resume only where it would
take it: :func:`resume_offer`); a --resume compares the plan as the run recorded there takes it (:func:`whole_tasks`,
:func:`bounded`; a dry plan's model and data as recorded: :func:`as_recorded`). Which saved lines a --resume keeps,
and how many of the plan's items that leaves, is run/kept.py's, the one reader of them (kept_lines, held): the
dry run's "saved" is what the resume then keeps."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from abricot_local.errors import ResultsError, opt
from abricot_local.record import CHECKPOINT, RESULTS, RUN_MANIFEST, Record, Refusal, read_run, refused, same_items
from abricot_local.record.outputs import FAILED, INTERRUPTED, MARKERS, SAMPLES_GLOB, lstat_or_none, task_of
from abricot_local.run.kept import Held, held
from abricot_local.run.owned import guard
from abricot_local.run.resume import nothing_to_resume, recorded_manifest, refusal, resumable, starts_there
from abricot_local.run.states import saved_counts

SHOWN = 3  # files a refusal names


def saved_files(folder: Path) -> list[Path]:
    """The samples files in ``folder`` (no results.json there: a finishing run's, cut) and its checkpoint that hold
    anything (a damaged line too), regular files only (a link is owned.guard's to refuse)."""
    folder = Path(folder)
    places = [folder / CHECKPOINT] if (folder / RESULTS).exists() else [folder, folder / CHECKPOINT]
    out = []
    for where in places:
        st = lstat_or_none(where)
        if st is None or where.is_symlink() or not where.is_dir():
            continue
        for f in sorted(where.glob(SAMPLES_GLOB)):
            st = lstat_or_none(f)
            if task_of(f.name) is not None and st is not None and not f.is_symlink() and f.is_file() and st.st_size:
                out.append(f)
    return out


def orphan_refusal(folder: Path) -> str:
    """Why no run may take ``folder``'s saved samples ("" when it may): there are some, outside a finished run,
    and no ``.checkpoint/run.json`` records the options, model and data that scored them, so nothing can tell
    whether they are this run's (a resume's, or a run of other options: reused, they would be wrong)."""
    folder = Path(folder)
    if (folder / RESULTS).exists() or (folder / CHECKPOINT / RUN_MANIFEST).exists():
        return ""
    files = saved_files(folder)
    if not files:
        return ""
    named = ", ".join(str(f.relative_to(folder)) for f in files[:SHOWN]) + (
        f" and {len(files) - SHOWN} more" if len(files) > SHOWN else "")
    return (f"{folder} holds saved samples ({named}) but no {CHECKPOINT}/{RUN_MANIFEST}, the record of the options, "
            "model and data that scored them: nothing can tell whether they belong to this run, so they are not "
            f"reused; delete them (or the folder) to start afresh there, or choose another {opt('out')}")


def holds_no_run(path: Path) -> bool:
    """Whether ``path`` is a folder that holds nothing of a run: no manifest, results.json, state file or saved
    sample (empty, or a lock left by a run killed before it showed its state): a --resume starts the run there
    (resume.starts_there), as OutputDir.check lets it."""
    path = Path(path)
    return path.is_dir() and not resumable(path) and not (path / RESULTS).exists() and \
        not any((path / m).exists() for m in MARKERS) and not saved_files(path)


def failed_before_first_item(path: Path) -> bool:
    """Whether ``path`` holds a run that failed (a prompt over --n-ctx) or was interrupted (a --resume's, or one an
    earlier abricot-local left) before it saved an item: a run of any options starts afresh there."""
    return any((path / m).is_file() for m in (FAILED, INTERRUPTED)) and not (path / RESULTS).exists() and \
        not saved_files(path)


def fresh_refusal(path: Path, manifest=None) -> str:
    """Why a run without --resume cannot take ``path`` ("" when it can: new, empty, or a run that failed before
    its first item): a finished run, another's checkpoint with items saved, or saved items with no manifest
    (saved.orphan_refusal). :meth:`OutputDir.check`'s first refusal, and what a dry run says of its --out. Given
    the run's ``manifest``, --resume is offered only where it would take the folder (:func:`resume_offer`). A folder
    another run holds now is owned.guard's to refuse, first (this is also asked by the run that holds it)."""
    if (path / RESULTS).exists():
        if why := resume_offer(path, manifest):
            return (f"{path} already holds a finished run; choose another {opt('out')} ({opt('resume', True)} would "
                    f"not take it{f' with {why.given}' if why.given else ''}: {why.why})")
        return (f"{path} already holds a finished run; choose another {opt('out')} "
                f"(or {opt('resume', True)} to reuse it)")
    if orphan := orphan_refusal(path):
        return orphan
    if not (path / CHECKPOINT / RUN_MANIFEST).exists() or failed_before_first_item(path):
        return ""
    saved, failed = sum(saved_counts(path).values()), (path / FAILED).is_file()
    held = f"{path} holds {'a failed' if failed else 'an interrupted'} run ({saved} item{'s' * (saved != 1)} saved)"
    why = resume_offer(path, manifest)  # this command's options would not do: said, the recorded ones would
    not_these = f" (not {why.given or 'these'}: {why.why})" if why else ""
    return (f"{held}; add {opt('resume', True)} to continue it with the options it recorded{not_these}, or choose "
            f"another {opt('out')}")


def resume_offer(path: Path, manifest) -> Refusal | None:
    """Why a --resume of ``manifest`` would not take the run in ``path`` (None when it would, or with no manifest to
    tell), by the resume's own rule (record.refused, on the manifest resume.refusal compares with: the checkpoint's,
    else the finished run's), in its parts, so the offer says the reason without the folder again: a refusal offers
    --resume only where the same command with it would be accepted (an unfinished run's: with its recorded options,
    saying why these would not do)."""
    if manifest is None:
        return None
    try:
        recorded = recorded_manifest(path)
        if recorded is None:  # nothing there, or a finished run that records no manifest: its refusal as it is
            why = refusal(path, manifest)
            return Refusal(str(path), why) if why else None
        why = refused(path, recorded, manifest)
        if why and (path / RESULTS).is_file():  # a --sample taking the whole of every task, as the run's (whole_tasks)
            n, available = recorded.config.sample, [t.available for t in read_run(path).tasks.values()]
            if same_items(n, manifest.config.sample, available) and \
                    not refused(path, recorded, replace(manifest, config=replace(manifest.config, sample=n))):
                return None
    except ResultsError as err:  # a record that cannot be read: no --resume takes it either
        return Refusal(str(path), err.raw())
    return why


def held_items(path: Path, plan, *, resume: bool, sweep: bool = False) -> Held:
    """What the dry ``plan`` (run.plan.Plan) given ``path`` (--out) finds there before it starts, as a dry run says
    it (a kept.Held); a folder the run refuses is that ResultsError: first, a folder the run would not take
    (owned.guard: in use by another run, a link, inside another run, not a run and not empty), by the run's own
    check, in its words, creating and locking nothing; without --resume, :func:`fresh_refusal`'s; with it, a folder
    that does not exist, the run of other options in it, by the resume's own rule (resume.refusal, on the plan
    :func:`as_recorded` makes), saved samples no manifest vouches for (:func:`orphan_refusal`); then what it holds
    (kept.held, the one reader of its saved lines). ``sweep``: a sweep's model (run.session.sweep): its folder may
    not be made yet (the run starts there) and a finished run in it is complete, not compared."""
    guard(path)  # what the run takes the folder with (run.folder.OutputDir.acquire), before anything is read
    resume = resume and (not sweep or path.is_dir())
    if not path.is_dir():
        if resume:
            raise ResultsError(nothing_to_resume(path))
        return Held()
    judged = None if sweep and (path / RESULTS).exists() else plan
    if not resume:
        if why := fresh_refusal(path, _compared(path, judged)):
            raise ResultsError(why)
        return Held()
    compared = _recorded_plan(path, plan) if judged is not None and plan.model is not None else None
    if compared is not None and (why := refusal(path, compared.manifest())):
        raise ResultsError(why)
    if orphan := orphan_refusal(path):
        raise ResultsError(orphan)
    found = held(path, plan)
    starts = starts_there(path) if holds_no_run(path) else ""
    settled = False
    if found.saved and plan.settle.on and plan.model is not None and (path / RESULTS).is_file():
        if judged is None:  # (a sweep's finished run, not compared above)
            compared = _recorded_plan(path, plan)
        settled = compared is not None and finished(path, compared) is not None  # nothing scored
    return replace(found, starts=starts, stopped=settled)


def finished(folder: Path, plan) -> Record | None:
    """With --resume: the finished ``--until-settled`` run in ``folder`` when it is this one (the same options,
    model, data and rule, its ``sample`` where it stopped): nothing to score. None otherwise (the ordinary resume
    decides: a larger bound grows it, another run is refused)."""
    from abricot_local.run.settle_record import record_in, stopped  # (the sequential rule's modules: only here)

    record = record_in(folder)
    if record is None:
        return None
    c = record.config
    if record.manifest is None or c is None or not c.until_settled or c.sample is None:
        return None
    if (c.looks, c.max_items) != (plan.settle.looks, plan.settle.max_items) or not stopped(record):
        return None
    return record if record.manifest == replace(plan, sample=c.sample).manifest() else None


def _recorded_plan(path: Path, plan):
    """The dry ``plan`` as a --resume in ``path`` compares it (:func:`as_recorded`); None when no run there records
    a manifest."""
    recorded = recorded_manifest(path)
    return None if recorded is None else as_recorded(plan, recorded)


def _compared(path: Path, plan):
    """The manifest a --resume of the dry ``plan`` in ``path`` would be compared by (:func:`as_recorded`); None when
    it cannot be told (no plan, no model, no record there or one that cannot be read: the run says what is wrong)."""
    if plan is None or plan.model is None:
        return None
    try:
        recorded = recorded_manifest(path)
    except ResultsError:
        return None
    return None if recorded is None else as_recorded(plan, recorded).manifest()


def as_recorded(plan, recorded):
    """A dry ``plan`` (run.plan.Plan, its model here or planned; a --until-settled one with its bound as its sample,
    bounded) made the plan the resume compares: the data files of each task whose items it read hashed as a
    run hashes them (a task's data_files; its data not here: ``recorded``'s taken, the resume checks them), the
    model file's SHA-256 taken as ``recorded``'s when it is not remembered (a dry run reads no GGUF through: the file
    moved or named otherwise is the resume's to check, by its bytes); the options, the model's name and the task
    versions the plan's own."""
    from abricot_local.record.schema import DataFile

    plan, model = whole_tasks(plan, recorded), plan.model
    if model.sha256 is None:
        model = replace(model, sha256=recorded.model_sha256)
    data = {r.task.key: tuple(DataFile(path=str(f.path), sha256=f.sha256) for f in r.task.data_files())
            if r.items and not r.problem else
            tuple(DataFile(path="", sha256=s) for s in recorded.data_sha256.get(r.task.key, ())) for r in plan.runs}
    return bounded(replace(plan, model=model, data=data))


def whole_tasks(plan, recorded):
    """``plan`` (run.plan.Plan) as a --resume of the run ``recorded`` (its Manifest, or None) compares it: where
    the plan's ``sample`` and the recorded one both take every item of every task (a sample at or above a task's
    items, or none, is the whole task, tasks.selection.kept), they select the same items, so the run is the same: the plan takes
    the recorded sample (and the note a task holding fewer items than it asked for records), neither a shrink nor a
    grow. The record keeps the option as it was given (check and merge rebuild the note from it); the items each
    task resolved it to are recorded per task (``sampled``: what the recorded sample drew). No --sample is the whole
    task too: ``--sample 50`` resumed without it, or a run without it resumed with ``--sample N`` at or above every
    task's items, is the same run. run_plan's and the dry run's (:func:`as_recorded`) one rule."""
    from abricot_local.tasks.selection import Count

    n, m = None if recorded is None else recorded.config.sample, plan.sample
    if n == m or not same_items(n, m, [r.available for r in plan.runs]):
        return plan
    count = Count.BOUND if plan.settle.on else Count.SAMPLE
    runs = tuple(replace(r, notes=(*(x for x in r.notes if m is None or x != count.beyond(m, r.available)),
                                   *((count.beyond(n, r.available),) if n is not None and n > r.available else ())),
                         sampled=None if n is None else min(n, r.available if plan.limit is None else
                                                            min(plan.limit, r.available)))
                 for r in plan.runs)
    return replace(plan, sample=n, runs=runs)


def bounded(plan):
    """A --until-settled plan's bound as its ``sample`` (the manifest a --resume compares): --max-items, else the
    largest task's items (every item: the run holds the first n of the nested order whatever it holds)."""
    if not plan.settle.on or plan.sample is not None or not plan.runs:
        return plan
    return replace(plan, sample=max(r.available or len(r.items) for r in plan.runs))
