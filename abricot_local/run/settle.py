"""``run --until-settled`` (issue 50): the sequential rule (analysis/sequential.py) wired into a run.

Before the loop (:func:`rule_of`, before the model loads): one ``Question`` per published row the model's registry
entry reproduces that the run's task instance is made as (analysis/questions.py: baselines.entry_for, no protocol
difference), its statistic the task's ``metric_inputs``', its margin ``--margin`` or the task's, its rounding the
published value's;
a rule per task instance over the task's N items (``sequential.start``), the looks ``--looks`` or 20, 40, 80, ...
up to ``--max-items`` (the plan's sample) or N; a --resume that grows a finished run keeps the looks its recorded
rule took (``Rule.keep``: sequential.grown), and one that makes it a fixed-n run says them (:class:`Grown`).
Nothing to settle is refused. What the rule says of itself before any item (:func:`forecast`: its looks, where it
would stop, what it cannot settle) is what the dry run and the plan lines a run prints first show of it.

In the loop (execute.py's staged loop, this module's :class:`Rule`): every task's items are taken in the nested
sample order (tasks.selection.sample_order: the first n are ``--sample n``'s), all tasks to the run's next look, a
look taken in each task's rule whose plan holds it, until every rule has stopped. The run then is the ``--sample n``
run of the look it stopped at (:func:`stopped_plan`): its samples, metrics and published block are what a fresh
``--sample n`` run writes, its record adds each task's rule (``tasks.<key>.sequential``, :func:`section`) and the
options in its config. ``check`` takes the looks again (:func:`replay`). Names no task and no backend.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from abricot_local.analysis import baselines
from abricot_local.analysis import sequential as sq
from abricot_local.analysis.questions import pair_questions, questions, statistics
from abricot_local.analysis.settled import plan_reach, record_of
from abricot_local.errors import ResultsError, UsageError, opt
from abricot_local.record import Sample
from abricot_local.record.schema import DataFile, Settle
from abricot_local.tasks import release
from abricot_local.tasks.selection import Count, prepare
from abricot_local.run.execute import Whole
from abricot_local.run.resume import finished_run
from abricot_local.run.saved import bounded, finished
from abricot_local.run.settle_record import (earlier_in, grow_instead, record_in, refuse_said_looks, restored, taken,
                                             took_notes)

INTERVAL_TOLERANCE = 1e-6  # check: a replayed interval (bootstrap, gammaln: not bit-stable across CPUs)


@dataclass(frozen=True)
class TaskRule:
    """One task instance's rule: its state, its items' ids in the nested order, each question's metric."""

    key: str
    state: sq.Sequential
    order: tuple[str, ...]
    metrics: dict[str, str]  # question name -> the task's metric input it reads


@dataclass(frozen=True)
class Pairs:
    """A rung of ``run --quants --until-settled``: its verdict, against ``reference`` (a label) whose run in ``folder``
    holds at least the items of each look; the rung's run stops at ``pause`` items (the sweep's look: it goes on once
    the reference holds the next look's items), or where its verdicts settle."""

    reference: str
    folder: Path
    pause: int


def rule_of(plan, pairs: Pairs | None = None) -> "Rule":
    """The rule of a ``--until-settled`` plan (``pairs``: a rung's, against its reference): refused when no task has
    a verdict to wait for."""
    asked = pair_questions(plan, pairs.reference) if pairs else questions(plan)
    s = plan.settle
    orders = {r.task.key: r.nested() for r in plan.runs}
    rules = {}
    for run in plan.runs:
        mine = asked[run.task.key]
        if not mine:
            continue
        state = sq.start(run.available or len(run.items), [q for q, _ in mine], looks=s.looks,
                         max_items=len(run.items), seed=run.task.options.seed)
        rules[run.task.key] = TaskRule(run.task.key, state, orders[run.task.key], {q.name: m for q, m in mine})
    if not rules:
        raise UsageError(f"nothing to settle for {opt('until_settled', True)}: {_nothing_asked(plan, pairs)}")
    return Rule(rules, orders, pairs, plan)


@dataclass(frozen=True)
class Forecast:
    """What a task's rule says of itself before any item is scored (:func:`forecast`): the looks it plans (their
    items), where it would stop if each published value were true (verdict, items, kind: sequential.expected_stop),
    and each verdict its last look cannot show within the margin, in words (settled.plan_reach)."""

    looks: tuple[int, ...]
    expected: tuple[tuple[str, int, str], ...]
    reach: tuple[str, ...]


def forecast(plan, reference: str | None = None) -> dict[str, Forecast]:
    """Each task's :class:`Forecast` by the rule a run of ``plan`` (a dry one too) follows: :func:`rule_of` on its
    tasks that are planned (nothing to settle is refused, as the run refuses it), its data hashed as the run hashes
    it (a task's data_files: small, hashed once, so a row on data not the release is not waited for, as in the run:
    tasks/release.py). ``reference``: a ladder's (its rungs' verdicts are against it). Its reach: the look at which
    its rule could first show each verdict within the margin, however the answers fall, past its last look (the rule
    the run's advice follows), with its figure, the bound that could, or a wider margin."""
    runs = tuple(r for r in plan.runs if not r.problem)
    data = plan.data or {r.task.key: tuple(DataFile(path=str(f.path), sha256=f.sha256) for f in r.task.data_files())
                         for r in runs}
    rule = rule_of(replace(plan, runs=runs, data=data), Pairs(reference, Path(), 0) if reference is not None else None)
    out, last = {}, "the plan's last look"
    for key, r in rule.rules.items():
        stops = [(q.name, sq.expected_stop(r.state, q)) for q in r.state.questions]
        far = [(q.name, plan_reach(r.state, q)) for q in r.state.questions] if r.state.planned else []
        out[key] = Forecast(tuple(r.state.planned), tuple((q, *stop) for q, stop in stops if stop is not None),
                            tuple(f"{q}: {f.words(last)}" for q, f in far if f is not None))
    return out


def _nothing_asked(plan, pairs: Pairs | None = None) -> str:
    """Why no task of ``plan`` has a verdict to wait for: no row reproduced, the run's tasks have no published row at
    all (said plainly: no registry entry can give them one; a rung's ``pairs`` wait for none), or the rows reproduced
    are not made as the run makes its tasks (its data that is not the release named: tasks/release.py's rule)."""
    bare = [] if pairs else [r.task.key for r in plan.runs if not baselines.all_references((r.task.key,))]
    none = f"{', '.join(bare)} {'has' if len(bare) == 1 else 'have'} no published row at all"
    if bare and len(bare) == len(plan.runs):
        return (f"{none}, so no verdict can be waited for, whatever the model's registry entry reproduces; "
                f"{opt('sample', 'N')} scores a fixed number of items")
    if not plan.reproduces:
        return "the model's registry entry reproduces no published row (models.toml `reproduces`)"
    data = [n for r in plan.runs for n in release.notes(r.task, plan.data.get(r.task.key, ()))]  # (tasks/release.py)
    return (f"the model's registry entry reproduces {plan.reproduces}, but no row of it was made as this run's "
            f"tasks are (their protocols and settings{', and data' if data else ''}), or none is run here" +
            (f" ({none})" if bare else "") + "".join(f"; {n}" for n in data))


def stages_of(plan, pairs: Pairs | None = None):
    """The stages ``plan`` is scored in: a ``--until-settled`` plan's :class:`Rule` over its bound (:func:`bounded`;
    nothing to settle refused, before any load), else the whole run (:class:`Grown`: execute.Whole)."""
    if not plan.settle.on:
        return Grown(plan)
    plan = bounded(plan)
    if any(r.problem for r in plan.runs):  # a --resume's task planned from the finished run's record (run.plan): no
        return Rule({}, {}, pairs, plan)  # rule to make, its data not here; run_plan finds it finished, or refuses
    return rule_of(plan, pairs)


def inputs(rule: TaskRule, task, samples: Sequence[Sample], reference: Sequence[Sample] = ()) -> dict[str, tuple]:
    """Each question's vectors over ``samples`` (the first n in the nested order): a row's metric inputs; a rung's,
    then its reference's on the same items (``reference``, in the same order)."""
    by_name = {inp.name: inp for inp in task.metric_inputs(list(samples))}
    ref = {inp.name: inp for inp in task.metric_inputs(list(reference))} if reference else {}
    return {q: (by_name[m].x, by_name[m].y, *((ref[m].x, ref[m].y) if ref else ())) for q, m in rule.metrics.items()}


def reference_samples(pairs: Pairs, key: str, ids: Sequence[str]) -> list[Sample]:
    """The reference run's samples of ``ids`` (its folder's samples file for ``key``), in that order; an item it
    does not hold refused (the sweep grows the reference first)."""
    from abricot_local.record import read_samples
    from abricot_local.run.owned import samples_name

    held = {s.id: s for s in read_samples(pairs.folder / samples_name(key), required=False)}
    missing = [i for i in ids if i not in held]
    if missing:
        raise ResultsError(f"the reference run in {pairs.folder} holds no sample of item {missing[0]} of {key}: it "
                           "must hold every item of the rung's look")
    return [held[i] for i in ids]


@dataclass
class Rule:
    """The run's rule over its tasks (execute.py's ``Stages``): the next number of items every task reaches, a look
    in each task's rule whose plan holds it, stopped when every task's rule has."""

    rules: dict[str, TaskRule]
    orders: dict[str, tuple[str, ...]]
    pairs: Pairs | None = None
    plan: object = None  # the (bounded) plan it rules
    n: int = 0  # the items of the last look taken
    until = " up to the look where its verdicts are settled"  # what a --resume that grows the run adds to its line

    @property
    def schedule(self) -> list[int]:
        return sorted({n for r in self.rules.values() for n in r.state.planned})

    def order(self, key: str) -> tuple[str, ...]:
        """The task's items in the order they are taken; a rung's, the first ``pause`` of them (its run stops at that
        look at the latest: its progress counts, and its time left is reckoned, to it)."""
        return self.orders[key] if self.pairs is None else self.orders[key][:self.pairs.pause]

    @property
    def stopped(self) -> bool:
        return all(r.state.stopped for r in self.rules.values())

    def next(self) -> int | None:
        """The items the next look reads (each task: at most its own); None once every rule has stopped."""
        if self.stopped:
            return None
        n = next(n for n in self.schedule if n > self.n)
        return None if self.pairs is not None and n > self.pairs.pause else n

    def look(self, n: int, tasks: dict, samples: dict[str, list[Sample]]) -> bool:
        """The look at ``n`` items in every rule that plans one there (``tasks``: key -> Task; ``samples``: key ->
        the first n (or all) of its items in the nested order); True (the progress lines say the notes again)."""
        self.n = n
        for key, r in self.rules.items():
            m = min(n, len(self.orders[key]))
            if (r.state.stopped and not r.state.exact_due(m)) or m not in r.state.planned[r.state.taken:]:
                continue  # a settled rule takes one more look: its exact one, once its task holds every item
            first = samples[key][:m]
            ref = reference_samples(self.pairs, key, [x.id for x in first]) if self.pairs else ()
            self.rules[key] = replace(r, state=sq.look(r.state, m, inputs(r, tasks[key], first, ref)))
        return True

    def note(self, key: str) -> str:
        """The progress line's part for ``key``: the next look and each open verdict's interval."""
        r = self.rules.get(key)
        if r is None:
            return ""
        if r.state.stopped and not self.stopped:
            return f"{r.state.progress()} at {r.state.n} items (scored on: the run waits for other tasks' verdicts)"
        return r.state.progress()

    def finished(self, folder: Path, manifest):
        """With --resume: the finished run in ``folder`` when it is this one, stopped where it settled
        (:func:`finished`), else as the ordinary resume finds it (run/resume.py). A finished run this one grows
        (a larger --max-items): each task's rule keeps the looks its recorded rule took (:meth:`keep`). A rung's run
        that holds its look already (a ladder resumed: its items at least ``pause``) is never shrunk: it is this one
        when the ordinary resume finds it so at the items it holds (the same options, model and data), and a run of
        other options is refused."""
        held = record_in(folder)
        n = held.config.sample if held is not None and held.config is not None else None
        if self.pairs is not None and n is not None and n >= self.pairs.pause:
            return finished_run(folder, replace(self.plan, sample=n).manifest())
        done = finished(folder, self.plan)
        if done is None:
            earlier = earlier_in(folder)  # (a grow cut short: the record its checkpoint kept)
            refuse_said_looks(folder, earlier, self.plan.sample)
            self.keep(taken(earlier))
        return done or finished_run(folder, manifest)

    def keep(self, earlier: dict[str, sq.Sequential]) -> None:
        """Each task's rule, before its first look, with the looks an earlier rule of it took (``earlier``: per task,
        the recorded rule: settle_record.taken) kept first, their error spent (sequential.grown): a run grown by
        --resume spends on its new looks only the error left, and they are taken again from the items held."""
        for key, r in self.rules.items():
            e = earlier.get(key)
            if e is not None and e.taken and e.total == r.state.total and not r.state.looks:
                self.rules[key] = replace(r, state=sq.grown(r.state, e.planned[:e.taken]))

    def made(self, plan):
        """The plan the run records: the ``--sample n`` plan of the items it scored (:func:`stopped_plan`)."""
        return stopped_plan(plan, self.n)

    def sections(self, home: Path) -> dict[str, Settle]:
        """Each task's rule as results.json records it (``home``: the run's folder, a rung's reference's named from
        it, so the sweep's folder may move)."""
        import os

        ref = Path(os.path.relpath(self.pairs.folder.resolve(), Path(home).resolve())) if self.pairs else None
        return {key: section(r, ref) for key, r in self.rules.items()}


@dataclass
class Grown(Whole):
    """A run that is not ``--until-settled``, taken whole (execute.Whole), and what a run asks of its stages besides
    (:class:`Rule`'s too): the finished run a --resume finds (:meth:`finished`), the plan it records (:meth:`made`),
    its rules' sections (none). A --resume that grows a finished ``--until-settled``
    run in its folder to a larger --sample says, on its resume line and as a warning of each task its record holds,
    the looks that run's rules took and the bound its fixed-n verdict has with them (settle_record.looked), or what
    its record says of them, a fixed-n run grown from one (settle_record.took_notes: said however many grows later)."""

    took: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # per task: what its earlier rule took
    until = ""  # what a --resume that grows the run adds to its line

    def finished(self, folder, manifest):
        """With --resume: the finished run in ``folder`` when it is this one (resume.finished_run)."""
        done = finished_run(folder, manifest)
        if done is None:
            earlier = earlier_in(folder)  # (a grow cut short: its checkpoint's record)
            self.took = took_notes(earlier, self.plan.sample)
            self.until = "".join(f"; {k}: {v}" for k, said in self.took.items() for v in said) + \
                (grow_instead(earlier, self.plan.sample) if self.took else "")
        return done

    def made(self, plan):
        return replace(plan, runs=tuple(replace(r, notes=(*r.notes, *self.took[r.task.key])) if r.task.key in self.took
                                        else r for r in plan.runs))

    def sections(self, home) -> None:
        return None


def stopped_plan(plan, n: int):
    """``plan`` as the ``--sample n`` plan of the items it scored: its runs, their notes and draws as a fresh
    ``--sample n`` run makes them (tasks.selection.prepare), save that a task holding fewer than ``n`` items is
    noted as stopped at its look of ``n`` (tasks.selection.Count.LOOK), not as a ``--sample`` asked for."""
    runs = []
    for run in plan.runs:
        fresh = prepare([run.task], None, n, count=Count.LOOK)[0]
        keep = {it.id for it in fresh.items}
        runs.append(replace(run, items=tuple(it for it in run.items if it.id in keep), sampled=fresh.sampled,
                            notes=fresh.notes))
    return replace(plan, sample=n, runs=tuple(runs))


def section(rule: TaskRule, reference: Path | None = None) -> Settle:
    """A task's rule as results.json records it (``tasks.<key>.sequential``; a rung's: its reference's folder)."""
    return record_of(rule.state, None if reference is None else str(reference))


def replay(recorded: Settle, task, samples: Sequence[Sample], reference: Sequence[Sample] = (),
           metrics: dict[str, str] | None = None) -> list[str]:
    """``check``: the recorded looks taken again over ``samples`` (the run's, in the nested order; a rung's:
    ``reference``, its reference's on the same items): each look's verdict exactly, its intervals within
    :data:`INTERVAL_TOLERANCE`, and the stop where it was; what differs."""
    state = restored(recorded)
    stats = statistics(task)
    metrics = metrics or {q.name: q.name.rpartition(".")[2] for q in state.questions}
    if any(m not in stats for m in metrics.values()):
        return [f"sequential: a question reads no metric of the task ({', '.join(metrics.values())})"]
    rule = TaskRule("", replace(state, looks=()), (), metrics)
    again = rule.state
    while not again.stopped and again.next_look is not None and again.next_look <= len(samples):
        n = again.next_look
        again = sq.look(again, n, inputs(rule, task, samples[:n], reference[:n]))
    if again.exact_due(len(samples)):  # settled, then every item scored for another task's verdict
        n = again.total
        again = sq.look(again, n, inputs(rule, task, samples[:n], reference[:n]))
    out = []
    if len(again.looks) != len(state.looks):
        out.append(f"sequential: {len(state.looks)} verdicts at the looks recorded, {len(again.looks)} taken again")
    for a, b in zip(state.looks, again.looks):
        where = f"sequential look {a.k} ({a.n} items) {a.question}"
        if (a.k, a.n, a.verdict) != (b.k, b.n, b.verdict):
            out.append(f"{where}: recorded {a.verdict} at {a.n}, taken again {b.verdict} at {b.n}")
        for name in ("value", "interval", "running", "level"):
            x, y = getattr(a, name), getattr(b, name)
            if not _close(x, y):
                out.append(f"{where}: {name} recorded {x}, taken again {y}")
    if again.n != recorded.n and not out:
        out.append(f"sequential: stopped at {recorded.n} items, taken again at {again.n}")
    return out


def _close(x, y) -> bool:
    if x is None or y is None:
        return x is None and y is None
    if isinstance(x, (tuple, list)):
        return len(x) == len(y) and all(_close(a, b) for a, b in zip(x, y))
    return abs(float(x) - float(y)) <= INTERVAL_TOLERANCE
