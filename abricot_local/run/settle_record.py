"""A ``--until-settled`` run's recorded rules read back (``tasks.<key>.sequential``, through analysis.settled.restored,
the one reader): the record a --resume grows (:func:`earlier_in`: its results.json, or the one the cut grow's
checkpoint kept), the looks they took (:func:`taken`, what a grown run keeps; :func:`looked` and
:func:`took_notes`, what a fixed-n one says, however many grows later), whether they all stopped (:func:`stopped`),
their verdict lines (:func:`lines`), the bound a run open at its last look goes on to (analysis.settled.next_bound) and the
advice that says so (:func:`advice`: one text for the CLI and the API). The rule's making, its looks and ``check``'s
replay are settle.py's."""

from __future__ import annotations

from pathlib import Path

from abricot_local.analysis import sequential as sq
from abricot_local.analysis.settled import far_beyond, next_bound  # a run open at its last look: its bound, its reach
from abricot_local.analysis.settled import restored  # the one reader of a recorded rule
from abricot_local.errors import ResultsError, UsageError, opt
from abricot_local.record import (CHECKPOINT, RESULTS, RUN_MANIFEST, Record, TaskEntry, growth, read_manifest,
                                  read_record, read_run, sample_words)
from abricot_local.run.owned import refuse_link
from abricot_local.run.resume import GROWN_FROM

TOOK = "its rule took looks"  # how a note of the looks an earlier rule took begins (looked, took_notes)


def record_in(folder: Path) -> Record | None:
    """The finished run's record in ``folder``; None when there is none or it cannot be read (the ordinary resume
    says what is wrong with it)."""
    if not (Path(folder) / RESULTS).is_file():
        return None
    try:
        return read_run(folder)
    except ResultsError:
        return None


def earlier_in(folder: Path) -> Record | None:
    """The finished run a --resume finds in ``folder`` to grow, whose rules' looks it keeps or says: its record
    (:func:`record_in`); where a grow was cut after its first new item (resume.reopen removed results.json then),
    the record its checkpoint kept (``.checkpoint/grown-from.json``) when the checkpoint's manifest grows it (the
    same run, a larger sample: any other is not this run's); None when there is neither. A kept record that is a
    link, or cannot be read, is refused: planned afresh, the rules would spend their looks' error again."""
    folder = Path(folder)
    ckpt = folder / CHECKPOINT
    kept, manifest = ckpt / GROWN_FROM, ckpt / RUN_MANIFEST
    if (folder / RESULTS).is_file() or not manifest.is_file():
        return record_in(folder)
    refuse_link(manifest)
    refuse_link(kept)
    if not kept.exists():
        return None
    try:
        now = read_manifest(manifest)
    except ResultsError:
        return None  # the ordinary resume says what is wrong with it
    try:
        record = read_record(kept)
    except ResultsError as err:
        raise ResultsError(f"{err.raw()}: it holds the record of the finished run this interrupted grow grows (the "
                           "looks its rules took); restore it, or remove it to resume with each rule planned afresh "
                           "(the error of the looks taken then spent again)") from None
    return record if record.manifest is not None and growth(record.manifest, now) else None


def refuse_said_looks(folder: Path, record: Record | None, sample: int | None) -> None:
    """Refuse an --until-settled grow of ``record`` (the finished run in ``folder``) where a task's record says its
    looks in a note only (a fixed-n run grown by --sample from a run --until-settled: :func:`took_notes`): its rule
    would plan those looks afresh and spend their error again, so the bound its verdict states would not hold."""
    said = {key: notes for key, notes in took_notes(record, sample).items()
            if record is not None and record.tasks[key].sequential is None}
    if said:
        key, notes = next(iter(said.items()))
        raise UsageError(f"{folder} holds a fixed-n run grown from a run {opt('until_settled', True)} ({key}: "
                         f"{notes[0]}): its looks are said in a note, not kept as a rule, so a grow "
                         f"{opt('until_settled', True)} would take them again and spend their error twice; grow it "
                         f"with {opt('sample', 'N')} (its fixed-n verdict says the looks taken), or run "
                         f"{opt('until_settled', True)} anew into another {opt('out')}")


def took_notes(record: Record | None, sample: int | None) -> dict[str, tuple[str, ...]]:
    """Per task of ``record`` (the finished run a --resume ``--sample`` grows), what its record says of looks a
    rule took: its rule's (:func:`looked`), or, a fixed-n run grown from such a run, the notes its record holds of
    them (carried as they were: the record says the looks taken however many grows later). Empty for none."""
    out: dict[str, tuple[str, ...]] = {}
    for key, e in (record.tasks if record is not None else {}).items():
        said = ((looked(restored(e.sequential), sample),) if e.sequential is not None
                else tuple(w for w in e.warnings if w.startswith(f"{TOOK} (")))
        if any(said):
            out[key] = tuple(w for w in said if w)
    return out


def taken(record: Record | None) -> dict[str, sq.Sequential]:
    """Per task, the rule ``record`` holds (its looks taken: ``planned[:taken]``, their error spent): what a run
    grown from it by --resume keeps (sequential.grown), or says it took (:func:`looked`). Empty for no record, or
    one no rule ruled."""
    if record is None:
        return {}
    return {key: restored(e.sequential) for key, e in record.tasks.items() if e.sequential is not None}


def looked(state: sq.Sequential, sample: int | None) -> str:
    """A task of a run that is not --until-settled, grown (``--sample``) from a --until-settled run whose rule
    ``state`` took looks: those looks, the error they spent and the bound its fixed-n verdict has with them
    (Bonferroni: theirs and its alpha), as its resume line and its recorded warning say (what it could have been
    instead, on the resume line only: :func:`grow_instead`); "" when none was taken."""
    if not state.taken:
        return ""
    spent = sum(1.0 - state.level(k) for k in range(1, state.taken + 1))
    until = opt("until_settled", True)
    return (f"{TOOK} ({until}) at {', '.join(map(str, state.planned[:state.taken]))} items before "
            f"{sample_words(sample)} grew the run (error {spent:.4g} spent): the fixed-n {100 * (1 - state.alpha):g}% "
            f"verdict does not account for them (with them, wrong with probability at most {spent + state.alpha:.4g})")


def grow_instead(record: Record | None, sample: int | None) -> str:
    """What a --sample grow of ``record`` (the finished run it grows) could have been instead, on its resume line
    only: an --until-settled grow keeps the looks where a task's rule is recorded; "" when none is (a fixed-n run
    grown from such a run: an --until-settled grow of it is refused, :func:`refuse_said_looks`, so its recorded
    note says no such thing)."""
    if not taken(record):
        return ""
    bound = "" if sample is None else f" {opt('max_items', sample)}"  # none: every item, as no --sample
    return f"; {opt('until_settled', True)}{bound} would go on with the looks kept instead"


def stopped(record: Record) -> bool:
    """Whether every rule of a --until-settled run's record has stopped (a rung paused at the sweep's look has not)."""
    rules = [e.sequential for e in record.tasks.values() if e.sequential is not None]
    return bool(rules) and all(restored(r).stopped for r in rules)


def lines(entries: dict[str, TaskEntry]) -> list[str]:
    """The verdict lines of a run's rules: each verdict at its last look, reached how, where, with what guarantee."""
    out = []
    for key, entry in entries.items():
        if entry.sequential is None:
            continue
        state = restored(entry.sequential)
        out += [state.line(lk) for lk in state.latest]
    return out


def advice(record: Record, command) -> str:
    """A --until-settled run that stopped at its bound with a verdict open: the bound's last look was taken (its
    verdict line says `look k of k`), and a larger bound plans more (``command(m)``: a door's words for the run
    grown to ``m`` items, still --until-settled), first each open verdict whose last look had no interval, with why
    (its note: too few items off a vector's commonest value, with the count; a constant vector), which more items
    help only if the answers vary; "" otherwise. Where the estimate of the items that would settle an open verdict
    lies far beyond that look (analysis.settled.far_beyond: the rule of :class:`~abricot_local.analysis.settled.Reach`),
    each such verdict says so with its figure, and the bound is the largest that could settle them, near the
    estimate (at most the task's items); none could (on the margin): a wider ``--margin``, and no command."""
    m = next_bound(record)
    if m is None:
        return ""
    said = "".join(f"{lk.question}: no interval at {lk.n} items ({lk.note}): more items help only if the answers "
                   "vary; " for e in record.tasks.values() if e.sequential is not None
                   for lk in restored(e.sequential).open if lk.interval is None and lk.note)
    head = f"not settled by {opt('max_items', record.config.sample)}, its last look: {said}"
    far = far_beyond(record)
    if far:
        said = "".join(f"{q}: {r.words('the next look')}; " for q, r in far)
        bounds = [r.bound for _, r in far if r.bound is not None]
        if not bounds:
            return f"{head}{said}no larger {opt('max_items')} is likely to settle it"
        m = max(bounds)
        return (f"{head}{said}the run grown to {opt('max_items', m)} keeps the items it holds and the looks it took (the "
                f"new looks spend only the error left):\n  {command(m)}")
    return (f"{head}{opt('max_items', m)} plans a look at {m} items, and the run goes on to it (the items it holds and "
            f"the looks it took kept: the new looks spend only the error left):\n  {command(m)}")
