"""Text the command line shows (the cli package prints it; nothing here prints).

This module: a run's summary, the published verdict, the start line, progress lines;
``listings``: models, doctor, tasks, labels, runs, check. Names no task and no backend.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from abricot_local.analysis.frames import ci_words
from abricot_local.analysis.reproduction import grow_advice, said, words
from abricot_local.record.kernel_path import describe
from abricot_local.record import Published, Record
from abricot_local.record.schema import Kernels


def fmt(v, digits: int = 4) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return "nan" if v != v else f"{v:.{digits}f}"
    return str(v)


def summary(record: Record) -> str:
    """One line per task metric of a run's record, with its 95% CI and the task's chance level."""
    tw = max(14, *(len(name) for name in record.tasks)) if record.tasks else 14  # task@protocol keys are longer
    lines = [f"{'task':<{tw}} {'metric':<20} {'value':>8}  {'95% CI':<20} chance", "-" * (58 + tw)]
    for name, t in record.tasks.items():
        for key, val, ci in t.metric_items():
            ci_s = "" if not ci else "no interval" if val == val and ci[0] != ci[0] else f"[{fmt(ci[0])}, {fmt(ci[1])}]"
            chance = fmt(t.chance[key], 2) if key in t.chance else ""
            lines.append(f"{name:<{tw}} {key:<20} {fmt(val):>8}  {ci_s:<20} {chance}")
        lines.append(f"{name:<{tw}} {'n':<20} {t.n:>8}")
        for w in t.warnings:
            lines.append(f"  warning: {w}")
    return "\n".join(lines).rstrip()


def verdict(published: Published | None, quant: str = "", *, unheld: str = "", backend: str = "",
            grow: tuple | None = None, skipped: Sequence | None = None) -> str:
    """Did the run reproduce the published rows its model's registry entry names? (a record's
    ``published``; ``quant``: the run's, shown beside each source's published precision). Each
    source gets its own block; each row its reproduction verdict (reproduced within the margin,
    differs by more, cannot tell yet, this task cannot settle it) and the reasons the run recorded;
    a row made otherwise than the run is "not comparable", with each difference. ``unheld``: the rows
    the entry names that the run is not held to (run.plan.Plan.unheld: ``backend`` reads no model file, its
    numbers are not the model's): with no comparison made (``backend`` stood in for the entry's model file), why;
    with one (the entry is ``backend``'s own, a synthetic entry), the comparison shown as made on synthetic
    numbers, no row's words saying what a model does. ``grow``: (the run's RunConfig, items -> the command
    that scores them): the items that would settle a row that cannot tell yet, and that command
    (reproduction.grow_advice)."""
    if (published is None or not published.reproduces) and unheld:
        return (f"published comparison: none. The registry entry reproduces {unheld}, but this run's backend "
                f"({backend or 'synthetic'}) is synthetic: its numbers are not the model's, so they are not held "
                "against published rows.")
    if published is None or not published.reproduces:
        return f"published comparison: none: {_no_entry(backend)}"
    synthetic = bool(unheld)
    margin = f"; margin {published.margin:g} (--margin)" if published.margin is not None else ""
    lines = [f"published comparison ({published.reproduces}{margin}):" + (
        f" synthetic numbers, not a model's (backend {backend or 'synthetic'} reads no model file)" if synthetic
        else "")]
    if synthetic:
        lines.append("  a synthetic registry entry: its numbers are not the published model's, so no row says whether "
                     f"a model reproduces its published value; each row shows the comparison made on these numbers, "
                     f"marked {SYNTHETIC}")
    mark = f"{SYNTHETIC} " if synthetic else ""
    for source in dict.fromkeys(c.source for c in published.checks):
        checks = [c for c in published.checks if c.source == source]
        protocol = checks[0].protocol
        precision = f"published precision {checks[0].precision}" if checks[0].precision else \
            "the published precision is not stated"
        lines.append(f"  {source}" + (f" (protocol {protocol})" if protocol else "") +
                     f": {precision}; this run {quant or 'quant unknown'}")
        wide = max(9, *(len(c.reference) for c in checks))
        key = max(11, *(len(c.task + "." + c.metric) for c in checks))
        lines.append(f"    {'reference':<{wide}} {'task.metric':<{key}} {'published':>9} {'this run':>8} "
                     f"{'95% CI':<16} {'diff':>6}  verdict")
        for c in checks:
            ci = (ci_words(c.value, c.ci95) if c.value is not None else "") or "n/a"  # the summary's words
            lines.append(f"    {c.reference:<{wide}} {c.task + '.' + c.metric:<{key}} {fmt(c.published, 2):>9} "
                         f"{fmt(c.value, 3):>8} {ci:<16} {fmt(c.difference, 3):>6}  {mark}{words(c)}")
            if not c.comparable:
                lines.append(f"      made otherwise: {'; '.join(c.differences)}")
            lines.extend(f"      {reason}" for reason in said(c))  # the verdict's figures (its words: the row's)
            for note in c.notes:
                lines.append(f"      note: {note}")
    lines += [f"  {line}" for line in not_run(published, skipped)]
    for part in published.unknown:
        lines.append(f"  {part!r}: names no published row this version knows")
    advice = grow_advice(published, *grow) if grow else ""
    lines.extend(f"  {line}" for line in advice.splitlines())
    return "\n".join(lines)


SYNTHETIC = "(synthetic)"  # a published row's verdict made on a synthetic backend's numbers


def _no_entry(backend: str) -> str:
    """Why a run with no published comparison has none, as far as the run's ``backend`` tells: one that reads no
    model file scored a label (its numbers no model's); else the model has no registry entry that names a
    published result."""
    from abricot_local.backends import reads_model_file
    from abricot_local.errors import AbricotError

    try:
        label = bool(backend) and not reads_model_file(backend)
    except AbricotError:  # (a backend not usable here: said as for a model)
        label = False
    if label:
        return (f"this run names no published result: backend {backend!r} reads no model file, so the model it "
                "scored is a label, not a model file, and no registry entry of that label names published rows "
                "(`reproduces` in models.toml); there is nothing to compare with")
    return ("no registry entry names published rows for this run's model (`reproduces` in models.toml), so there "
            "is nothing to compare with")


def not_run(published: Published, skipped: Sequence | None = None) -> list[str]:
    """A line per task the published rows name that the run did not run: where its rows were published, and why it
    was not run: its data was not here (in ``skipped``, a record's SkippedTask: how to get it, its ``how``, else
    the options that give data), else the tasks option left it out; both said where ``skipped`` is None (not
    known). Options are named with errors.opt: each door (the command line, the API's warnings) words them."""
    from abricot_local.analysis.baselines import sources_of
    from abricot_local.errors import opt

    data = f"give it with {opt('data')}/{opt('data_dir')}"
    tasks = f"{opt('tasks')} left it out (add it to {opt('tasks')}, with its data)"
    lacking = {s.task: s for s in skipped or ()}
    lines = []
    for task in published.tasks_not_run:
        where = ", ".join(sources_of(published.reproduces or "", task)) or "its source"
        if task in lacking:
            why = f"its data was not here, so the run left it out ({lacking[task].how or data})"
        elif skipped is not None:
            why = tasks
        else:
            why = f"its data was not here ({data}), or {tasks}"
        lines.append(f"{task}: published, but not run here: {why}; its rows of {where} are not checked")
    return lines


def settled(record: Record, grow=None) -> str:
    """A ``--until-settled`` run's verdict (its record's rules; "" for another run): each verdict at the look the
    run stopped at, reached how and with what guarantee; which verdict the run's is; ``grow`` (items -> the call
    that grows the run): the look a larger bound adds, when a verdict is open at the bound (settle_record.advice)."""
    from abricot_local.run import settle_record

    found = settle_record.lines(record.tasks)
    if not found:
        return ""
    from abricot_local.errors import opt

    n = record.config.sample if record.config else None
    lines = [f"verdict ({opt('until_settled', True)}, stopped at {n} items): the run's verdict on the rows it "
             "waited for:"]
    if record.synthetic and record.published is not None and record.published.reproduces:
        lines.append(f"  {SYNTHETIC} numbers of a backend that is synthetic, not a model's: a verdict on a published "
                     "row says what the rule makes of them, never whether a model reproduces it")
    lines += [f"  {line}" for line in found]
    fixed = _fixed_n(record)
    if fixed:
        lines.append(f"  ({fixed}: it does not account for the looks this run took, and may say cannot tell yet "
                     "where this verdict is settled, or the reverse)")
    advice = settle_record.advice(record, grow) if grow else ""
    lines.extend(f"  {line}" for line in advice.splitlines())
    return "\n".join(lines)


def _fixed_n(record: Record) -> str:
    """Where the fixed-n 90% verdict over the run's items is printed beside its rule's: a rung's (its rule against
    the ladder's reference, at the rule's margin: settled.FIXED_N), in the sweep's quant ladder; a run held to
    published rows, in the published comparison above (when it compared any); "" when none is."""
    from abricot_local.errors import opt

    if any(e.sequential is not None and e.sequential.reference is not None for e in record.tasks.values()):
        return ("compare's fixed-n 90% verdict over the same items, at the rule's margin, stands beside this one in the "
                "quant ladder at the sweep's end, and in `report`'s")
    if record.published is not None and record.published.checks:
        n = record.config.sample if record.config else None
        return (f"the published comparison above is the fixed-n 90% verdict over the same items, as "
                f"{opt('sample', n)} reads them")
    return ""


def task_bars(make_bar):
    """(callback(task, done, total[, note]), close()): one bar per task, ``make_bar(total=, desc=, initial=)`` a
    tqdm-like bar (the CLI's tqdm on stderr, the API's tqdm.auto), created at a task's first call."""
    bars: dict = {}

    def bar(task: str, done: int, total: int, note: str = "") -> None:
        b = bars.get(task)
        if b is None:  # a resumed task's held items are its start (tqdm's rate: this process's items only)
            b = bars[task] = make_bar(total=total, desc=task, initial=done)
            note = resumed_note(done, note)
        b.n = done
        if note:  # a --until-settled run's next look and open verdicts
            b.set_postfix_str(note, refresh=False)
        b.refresh()

    def close() -> None:
        for b in bars.values():
            b.close()
        bars.clear()

    return bar, close


class ProgressLine:
    """Off a terminal: one plain line per task at most every ``interval`` seconds, with the
    rate and the time left (a line at the start and at the end of each task too). The rate counts the items scored
    since the task's first line: none yet (a resumed task, whose held items are not this process's work), none said."""

    def __init__(self, interval: float = 30.0, clock=time.monotonic):
        self.interval = interval
        self.clock = clock
        self.started: dict[str, tuple[float, int]] = {}
        self.last: dict[str, float] = {}
        self.notes: dict[str, str] = {}

    def update(self, task: str, done: int, total: int, note: str = "") -> str | None:
        """The line to print now, or None; ``note`` (a --until-settled run's next look and open verdicts): a line
        whenever it changes (a look was taken). A resumed task's first line has no note (:func:`resumed_note`)."""
        now = self.clock()
        if task not in self.started:
            note = resumed_note(done, note)
            self.started[task] = (now, done)
            self.last[task] = now
            self.notes[task] = note
            return f"{task}: {done}/{total} items" + (" (resumed)" if done else "") + (f"; {note}" if note else "")
        if done < total and now - self.last[task] < self.interval and note == self.notes.get(task, ""):
            return None
        self.last[task], self.notes[task] = now, note
        t0, d0 = self.started[task]
        said = f"; {note}" if note else ""
        if done <= d0:  # nothing scored here yet (a resumed task's looks at the items it holds): no rate to say
            return f"{task}: {done}/{total} items" + (" (resumed)" if done else "") + said
        rate = (done - d0) / (now - t0) if now > t0 else 0.0
        eta = f", ETA {_duration((total - done) / rate)}" if rate > 0 and done < total else ""
        speed = f"{rate:.2f} items/s" if rate >= 0.1 or rate <= 0 else f"{1 / rate:.0f} s/item"
        return f"{task}: {done}/{total} items, {speed}{eta}{said}"


def resumed_note(done: int, note: str) -> str:
    """A task's note at its first progress: none when it resumes with items held (``done``), as its rule has not
    read them yet (a --until-settled run's "next look at 20 items; open: no look yet" with 40 held: stale); its
    looks at them follow at once, each its own line."""
    return "" if done else note


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def start_line(plan, facts: tuple[str, ...], kernels: Kernels | None) -> str:
    """What is about to run: model, quant, tasks with item counts, then what the backend resolved
    (its ``start_facts()``: engine, context, threads...); then the kernel path (what decides the
    arithmetic: docs/numerics.md)."""
    quant = plan.quant or "?"
    tasks = ", ".join(f"{r.task.key} ({len(r.items)} items)" for r in plan.runs)
    where = f" ({Path(plan.model_path).name})" if plan.model_path else ""
    line = f"run: {plan.model_label}{where}, quant {quant}; tasks: {tasks}; " + ", ".join(
        (f"backend {plan.backend}", *facts))
    return line + (f"\nkernels: {describe(kernels)}" if kernels is not None else "")

