"""Published references (declared by the tasks) and how a run is checked against them.

A registry entry's ``reproduces`` field names the published rows a model should match, as ``"ABRICOT paper:
llama-3.1-8b; CALAMITA leaderboard: Llama-3.1-8B-Instruct"``: each part is ``SOURCE: MODEL``, SOURCE a task
reference's ``source`` or one of its ``aliases`` (case-insensitive). A part names every reference of that model in
that source, over all tasks.

A published row is compared with a run only when the run made it the same way: every setting the row's protocol
fixes (tasks/base.py's :class:`Protocol`) matches the run's task config and its data is the row's release (tasks/
release.py). Otherwise the check is *not comparable*, says each difference (``shots 3, published 0``; ``data FILE is
not the release (...)``: :func:`made_otherwise`) and never answers whether the value is inside the CI. A run may
hold a task under several protocols (keys ``task@protocol``): each row is checked against the instance made under
its own protocol.

A comparable row gets the reproduction verdict (analysis/reproduction.py: reproduced within the margin, differs by
more, cannot tell yet, this task cannot settle it) from the run's 90% intervals of the metric (:class:`Evidence`:
for items like these, an accuracy's Wilson score interval, a correlation's bootstrap; for the task's own value, an
accuracy's exact hypergeometric interval, a correlation's correlation_ci: Fisher's z, guarded, narrowed), its
margin, its number of items (N: :func:`items_total`, one rule for every maker of a run's verdicts, :func:`rejudge`),
and the published value's rounding (:func:`rounding`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

from abricot_local.analysis import reproduction
from abricot_local.errors import recorded_words, render
from abricot_local.record import Published, PublishedCheck, Sample, TaskEntry
from abricot_local.tasks import release
from abricot_local.tasks.base import Reference, Task
from abricot_local.tasks.options import as_read

LEVEL90 = 0.90  # the verdict's interval: two one-sided tests at 5%, as compare's equivalence
DECIMALS = 2  # the published tables (ABRICOT's paper, the CALAMITA leaderboard) give two decimals


def rounding(value: float) -> float:
    """Half a unit of a published value's last decimal: at two decimals (0.30) +-0.005; a value that shows
    more decimals (0.305), half of its last one."""
    for d in range(DECIMALS, 7):
        if round(value, d) == value:
            return 0.5 * 10.0 ** -d
    return 0.0


@dataclass(frozen=True)
class Evidence:
    """What the verdict reads of one task instance beyond its record entry: each CI metric's 90%
    interval for items like these (an accuracy's Wilson score interval; a correlation's bootstrap, the
    95% CI's resamples: the task's seed, N_BOOT), an accuracy's for the task's own value (the exact
    hypergeometric interval of k right of n drawn from the N, stats.exact_set_ci: Wilson's narrowed by
    the finite-population correction falls short of 90% at small n, bench/coverage.py; a correlation's
    correlation_ci's, the --until-settled rule's, or why it has none: ``why``), which metrics
    are correlations, the margin the task declares for each, and how many items the whole task holds."""

    total: int
    ci90: dict[str, tuple[float, float]] = field(default_factory=dict)
    margins: dict[str, float] = field(default_factory=dict)
    within: dict[str, tuple[float, float]] = field(default_factory=dict)
    correlations: frozenset[str] = frozenset()
    why: dict[str, str] = field(default_factory=dict)  # a correlation's: why it has no interval for the task's value
    drawn: bool = True  # its items a draw of the task (every one, --sample's, a shard's): not --limit's first ones
    off: dict[str, int] = field(default_factory=dict)  # a correlation's under the 10-answer rule: its answers k off
    #                                                    the most common value (correlation_ci.too_few_off)
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)  # the values each takes (metrics.BOUNDS)


def evidence(task: Task, samples: Sequence[Sample], total: int, *, drawn: bool = True) -> Evidence:
    """``task``'s :class:`Evidence` over its ``samples`` (``total``: its items before --limit/--sample/--shard;
    ``drawn`` False: --limit's first items, no draw of the task)."""
    import numpy as np
    from abricot_local.analysis import stats
    from abricot_local.analysis.correlation_ci import correlation_ci, like_interval, too_few_off
    from abricot_local.metrics import BOUNDS, undefined

    ci90, margins, within, correlations, why, off = {}, {}, {}, set(), {}, {}
    inputs = task.metric_inputs(list(samples))
    bounds = {inp.name: BOUNDS[inp.stat] for inp in inputs if inp.stat in BOUNDS}
    for inp in inputs:
        lo, hi = like_interval(inp.stat, inp.x, inp.y, seed=task.options.seed, level=LEVEL90)
        ci90[inp.name] = (lo, hi)
        margins[inp.name] = task.margin(inp.name)
        n = len(inp.x)
        if inp.stat == "accuracy":
            k = int(np.sum(np.asarray(inp.x) == np.asarray(inp.y)))
            within[inp.name] = stats.exact_set_ci(k, n, max(total, n), level=LEVEL90)
        else:  # the sequential rule's interval: Fisher's z, floored by normal theory, guarded, narrowed
            correlations.add(inp.name)
            w = [np.asarray(inp.x, float), np.asarray(inp.y, float)]
            value, ci, no = correlation_ci(inp.stat, w, n, max(total, n), LEVEL90, task.options.seed)
            within.update({inp.name: ci} if ci else {})
            why.update({inp.name: no} if no else {})
            k = too_few_off(inp.stat, w) if ci is None and value is not None else None
            off.update({inp.name: k} if k is not None else {})
    why.update(undefined(inputs, samples))  # (metrics.undefined)
    return Evidence(total, ci90, margins, within, frozenset(correlations), why, drawn, off=off, bounds=bounds)


def all_references(tasks: tuple[str, ...] | None = None, *, strict: bool = True) -> tuple[Reference, ...]:
    """The published references of every registered task (or of ``tasks``). A task this version does not
    register (recorded by another version) has none; one named in ``tasks`` whose plugin fails to load, is
    refused, or whose ``references()`` fails is named (:class:`TaskError`, with its error). With ``tasks``
    None, or not ``strict`` (a reader of recorded runs: the rows they recorded stand), such a plugin is passed over,
    so that it blocks no other task's rows (``tasks.broken()`` names it)."""
    from abricot_local.errors import AbricotError, TaskError
    from abricot_local.tasks import all_task_names, make_task, task_class
    from abricot_local.tasks.base import TaskOptions
    from abricot_local.tasks.item_check import where

    registered = all_task_names()
    out: list[Reference] = []
    for name in dict.fromkeys(base_name(t) for t in (tasks if tasks is not None else registered)):
        if name not in registered:  # an unknown task recorded by another version has no references here
            continue
        try:
            task = make_task(name, TaskOptions(allow_download=False))
            out.extend(replace(r, release=r.release or task.data.release) for r in task.references())
        except Exception as exc:
            if tasks is None or not strict:
                continue
            if isinstance(exc, AbricotError):
                raise
            raise TaskError(f"{where(task_class(name), name)}: its published rows cannot be "
                            f"read: {type(exc).__name__}: {exc}; fix the task (or upgrade its package)") from None
    return tuple(out)


def _source_matches(ref: Reference, label: str) -> bool:
    label = label.strip().lower()
    return label == ref.source.lower() or label in (a.lower() for a in ref.aliases)


def find(source: str, model: str, refs: tuple[Reference, ...] | None = None) -> tuple[Reference, ...]:
    """The references of ``model`` in ``source`` (case-insensitive), over all tasks."""
    refs = all_references() if refs is None else refs
    return tuple(r for r in refs if _source_matches(r, source) and r.model.lower() == model.strip().lower())


def parse_reproduces(text: str, refs: tuple[Reference, ...] | None = None
                     ) -> tuple[tuple[Reference, ...], tuple[str, ...]]:
    """The references a registry ``reproduces`` field names, and the parts that name none."""
    refs = all_references() if refs is None else refs
    found: list[Reference] = []
    unknown: list[str] = []
    for part in (p.strip() for p in (text or "").split(";")):
        if not part:
            continue
        label, sep, model = part.partition(":")
        rows = find(label, model, refs) if sep else ()
        if not rows:
            unknown.append(part)
        found.extend(r for r in rows if r not in found)
    return tuple(found), tuple(unknown)


def sources_of(reproduces: str, task: str) -> tuple[str, ...]:
    """Where the published rows ``reproduces`` (a registry entry's) names for ``task`` come from, in order: what a
    run that did not run the task leaves unchecked."""
    return tuple(dict.fromkeys(r.source for r in parse_reproduces(reproduces)[0] if r.task == task))


def group_rows(refs: tuple[Reference, ...]) -> list[tuple[str, str, dict[str, float]]]:
    """References as published rows: (model, source, {"task.metric": value})."""
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for r in refs:
        rows.setdefault((r.model, r.source), {})[f"{r.instance}.{r.metric}"] = r.value
    return [(m, s, v) for (m, s), v in rows.items()]


def protocols_named(text: str, refs: tuple[Reference, ...] | None = None) -> dict[str, tuple[str, ...]]:
    """task -> the protocols of the rows a ``reproduces`` field names (in the order named)."""
    out: dict[str, list[str]] = {}
    for ref in parse_reproduces(text, refs)[0]:
        if ref.protocol is not None and ref.protocol.name not in out.setdefault(ref.task, []):
            out[ref.task].append(ref.protocol.name)
    return {task: tuple(names) for task, names in out.items()}


def reproduced_protocols(text: str, where: str) -> dict[str, tuple[str, ...]]:
    """:func:`protocols_named` of a registry entry's ``reproduces`` (``where``: the entry, as a message names
    it), a part naming no published row refused, with the parts this version knows: before a run scores
    anything (a typo would change the protocols it scores, and its comparison would be lost at the end)."""
    if not text:
        return {}
    unknown = parse_reproduces(text)[1]
    if unknown:
        from abricot_local.errors import UsageError
        from abricot_local.names import did_you_mean

        refs = all_references()
        sources = {r.source: r.aliases for r in refs}
        parts = {f"{name}: {r.model}" for r in refs for name in (r.source, *r.aliases)}
        known = "; ".join(source + (f" (or {', '.join(aliases)})" if aliases else "") + ": " +
                          ", ".join(sorted({r.model for r in refs if r.source == source}))
                          for source, aliases in sources.items())
        from abricot_local.tasks import broken

        unread = "; ".join(broken())
        unread = f" A task whose rows are not known (refused here) may hold it: {unread}." if unread else ""
        raise UsageError(f"{where}: reproduces {unknown[0]!r} names no published row this version knows."
                         f"{did_you_mean(unknown[0], parts)}{unread} A part is SOURCE: MODEL, among {known}; fix "
                         "the entry (or remove reproduces) and run again")
    return protocols_named(text)


def base_name(key: str) -> str:
    return key.partition("~")[0].partition("@")[0]


def entry_for(ref: Reference, tasks: dict[str, TaskEntry]) -> tuple[str, TaskEntry] | None:
    """The run's instance of ``ref``'s task to check it against: the one made under ``ref``'s
    protocol, else the first instance of the task (then not comparable), else None; an instance
    of another prompt variant than its protocol's (``KEY~VARIANT``) only when no other is there."""
    same = [(key, e) for key, e in tasks.items() if base_name(key) == ref.task]
    same.sort(key=lambda ke: "~" in ke[0])
    if ref.protocol is not None:
        own = [(key, e) for key, e in same if e.config.get("protocol") == ref.protocol.name]
        same = own or same
    return same[0] if same else None


@dataclass(frozen=True)
class CICheck:
    """Whether one published value lies inside a run's 95% CI for that task and metric, when the
    run made it the same way (``differences`` empty); ``key``: the run's task instance checked."""

    reference: Reference
    value: float | None  # the run's point estimate (None: the run lacks the task)
    ci: tuple[float, float] | None
    notes: tuple[str, ...] = ()
    differences: tuple[str, ...] = ()  # settings the run made otherwise than the row's protocol
    key: str = ""
    verdict: reproduction.Verdict | None = None  # comparable, with evidence: the reproduction verdict

    @property
    def task(self) -> str:
        return self.key or self.reference.task

    @property
    def published(self) -> float:
        return self.reference.value

    @property
    def comparable(self) -> bool:
        return not self.differences

    @property
    def precision(self) -> str:
        """The published precision (the protocol's; "" when the source does not say)."""
        return self.reference.protocol.precision if self.reference.protocol else ""

    @property
    def difference(self) -> float | None:
        return None if self.value is None else self.value - self.published

    @property
    def inside(self) -> bool | None:
        """True/False; None when the run was not made the same way or has no (finite) CI."""
        if not self.comparable or self.ci is None or any(c != c for c in self.ci):
            return None
        return self.ci[0] <= self.published <= self.ci[1]

    @property
    def text(self) -> str:
        """``0.22 in CI? yes`` (``n/a`` without a CI; ``not comparable: shots 3, published 0``)."""
        if not self.comparable:
            return f"{self.published:.2f} not comparable: {'; '.join(self.differences)}"
        if self.verdict is not None:
            return f"{self.published:.2f}: {self.verdict.kind}"
        answer = {True: "yes", False: "no", None: "n/a"}[self.inside]
        return f"{self.published:.2f} in CI? {answer}"

    def to_record(self) -> PublishedCheck:
        """The check as results.json's ``published.checks`` records it."""
        p, v = self.reference.protocol, self.verdict
        return PublishedCheck(reference=self.reference.model, source=self.reference.source, task=self.task,
                              metric=self.reference.metric, published=self.published, value=self.value,
                              ci95=self.ci, difference=self.difference, inside=self.inside, notes=self.notes,
                              protocol=p.name if p else None, comparable=self.comparable,
                              differences=self.differences, precision=self.precision or None,
                              verdict=v.kind if v else None, margin=v.margin if v else None,
                              ci90=v.ci90 if v and not any(c != c for c in v.ci90) else None,
                              n=v.n if v else None, items_total=v.total if v else None,
                              items_to_settle=v.items if v else None,
                              settles=None if v is None or v.settles is None else round(v.settles, 6),
                              reasons=tuple(render(r, recorded_words) for r in v.reasons) if v else ())


def made_otherwise(ref: Reference, entry: TaskEntry) -> tuple[str, ...]:
    """Where a run's task ``entry`` was made otherwise than ``ref``: each setting its protocol fixes that differs (none
    without a protocol), then each data file recorded that is not the release it was made on (tasks/release.py)."""
    config = as_read(dict(entry.config), [entry.config])  # one recorded before shot_seed: its shots' seed, its seed
    settings = ref.protocol.differences(config) if ref.protocol is not None else ()
    return (*settings, *release.differences(ref.release, entry.data))


def neighbours(ref: Reference, refs: tuple[Reference, ...]) -> tuple[tuple[str, float], ...]:
    """The other published (model, value) of ``ref``'s source, task and metric."""
    return tuple((r.model, r.value) for r in refs if r.source == ref.source and r.task == ref.task
                 and r.metric == ref.metric and r.model != ref.model)


def check(ref: Reference, entry: TaskEntry | None, key: str = "", evidence: Evidence | None = None,
          margin: float | None = None, refs: tuple[Reference, ...] = ()) -> CICheck:
    """Compare ``ref`` with a run's task entry (``key``: its name of that instance); with the instance's ``evidence``,
    the reproduction verdict at ``margin`` (None: the task's), the small-sample warning read against ``refs``."""
    if entry is None:
        return CICheck(ref, None, None, ("the run has no such task",))
    ci = entry.metrics.get(f"{ref.metric}_ci95")
    value = entry.metrics.get(ref.metric)
    differences = made_otherwise(ref, entry)
    verdict = None
    if evidence is not None and not differences:
        m = margin if margin is not None else evidence.margins.get(ref.metric, Task.default_margin)
        near = neighbours(ref, refs)  # the other published values of its source, task and metric
        verdict = reproduction.judge(value, evidence.ci90.get(ref.metric), ref.value, m, n=entry.n,
                                     total=evidence.total, neighbours=near,
                                     within=evidence.within.get(ref.metric), rounding=rounding(ref.value),
                                     correlation=ref.metric in evidence.correlations, drawn=evidence.drawn,
                                     why=evidence.why.get(ref.metric, ""), off=evidence.off.get(ref.metric),
                                     bounds=evidence.bounds.get(ref.metric))
    return CICheck(ref, value, (float(ci[0]), float(ci[1])) if ci else None,
                   differences=differences, key=key, verdict=verdict)


def check_run(ref: Reference, tasks: dict[str, TaskEntry], evidence: dict[str, Evidence] | None = None,
              margin: float | None = None, refs: tuple[Reference, ...] = ()) -> CICheck | None:
    """``ref`` against the run's instance of its task (:func:`entry_for`); None: the run lacks it.
    ``evidence``: per instance key, what the reproduction verdict reads (:func:`check`)."""
    found = entry_for(ref, tasks)
    if found is None:
        return None
    return check(ref, found[1], found[0], (evidence or {}).get(found[0]), margin, refs)


@dataclass(frozen=True)
class VerdictTask:
    """A task of a run as its published verdict reads it: its key in the record, the task (the run's instance of
    it), its samples, and the items its data holds as counted here (None: not known here; :func:`items_total`)."""
    key: str
    task: Task
    samples: tuple[Sample, ...]
    total: int | None = None


def reproduced_tasks(reproduces: str | None) -> frozenset[str]:
    """The tasks (base names) whose published rows ``reproduces`` names: those a published verdict reads."""
    return frozenset(r.task for r in parse_reproduces(reproduces)[0]) if reproduces else frozenset()


def items_total(key: str, entry: TaskEntry | None, recorded: Published | None = None, data: int | None = None):
    """Task ``key``'s N (the items its data holds: the finite-population correction's), by one rule: its entry's
    ``available`` (what --limit/--sample/--shard selected from; `merge` keeps it); else ``recorded``'s (the run's
    verdict's) ``items_total``: a record older than ``available``; else ``data`` (counted here); else None, and no
    verdict: the items scored are never taken for N (that would call them the whole task, its value exact)."""
    if entry is not None and entry.available:
        return entry.available
    stated = [c.items_total for c in (recorded.checks if recorded else ()) if c.task == key and c.items_total]
    return stated[0] if stated else data or None


def rejudge(reproduces: str | None, tasks: dict[str, TaskEntry], judged: Sequence[VerdictTask],
            margin: float | None = None, *, drawn: bool = True, recorded: Published | None = None) -> Published:
    """A run's published verdicts (``published``), their one maker (a run's end and --resume --margin, `merge`,
    `report --verify`, `check`): :func:`verdict` at ``margin`` on the :func:`evidence` of each of ``judged`` whose task
    ``reproduces`` names, N by :func:`items_total` (``recorded``: its recorded block); ``drawn`` False: --limit's."""
    wanted, made = reproduced_tasks(reproduces), {}
    for t in judged:
        total = items_total(t.key, tasks.get(t.key), recorded, t.total) if base_name(t.key) in wanted else None
        if total is not None:
            made[t.key] = evidence(t.task, t.samples, total, drawn=drawn)
    return verdict(reproduces, tasks, made, margin)


def verdict(reproduces: str, tasks: dict[str, TaskEntry], evidence: dict[str, Evidence],
            margin: float | None = None) -> Published:
    """results.json's ``published``: the rows ``reproduces`` (a registry entry's) names, each against the
    run's instance of its task with the reproduction verdict; ``margin``: ``--margin`` (None: each task's)."""
    refs, unknown = parse_reproduces(reproduces)
    known = all_references(tuple(dict.fromkeys(r.task for r in refs)))
    found = [check_run(r, tasks, evidence, margin, known) for r in refs]
    checks = tuple(c.to_record() for c in found if c is not None)
    missing = tuple(sorted({r.task for r, c in zip(refs, found) if c is None}))
    return Published(reproduces=reproduces or None, checks=checks, tasks_not_run=missing, unknown=tuple(unknown),
                     margin=margin, method=reproduction.METHOD)
