"""Stop when it is settled: verdicts read at planned looks, valid however many looks are taken.

Read at every look and believed the first time it settles, a 90% interval is wrong far more often than 10% of the
time (bench/sequential.py). Here the error is spent across the looks (docs/protocols.md, "Stopping when it is
settled"): look k (1, 2, ...) takes its interval at level 1 - alpha 2^-k (alpha 0.10: 95%, 97.5%, ...), the misses
sum under alpha, so a verdict read at any look, however chosen, is wrong with probability at most alpha, as a
fixed-n 90% verdict. Each look's interval is for the task's own value over n of its N items, exact at n = N (the
verdict then reproduction.judge's or compare's equivalence.verdict_of's): a published accuracy's, the exact
hypergeometric interval (stats.exact_set_ci); a correlation's, correlation_ci's (published.method 5: Fisher's z
centred for the jackknife's bias and skew, +- Student's t x the larger of the jackknife's and normal theory's se,
narrowed by stats.fpc), read once each vector has 10 items off its commonest value; a rung's paired accuracy difference, the exact
interval of the task's own difference (paired_exact.paired_set_ci: Tango's narrowed only where many answers
changed on a large task), a paired correlation's, +- z x the paired bootstrap's se, read once 10 of the items
changed their answer (equivalence.few_changed: compare's rule). A run grown by --resume keeps the looks its rule
took (:func:`grown`): its new looks spend only the error left. A verdict reads its looks'
intervals intersected: below N a settled verdict stays settled (not worse may become equivalent or better); a task
scored on to all N items (the run waiting for another's verdict) takes its exact look, which overrules it. Settled:
reproduced, differs, this task cannot settle M, equivalent, better (the interval above +M: better by more than M, as
compare words it, equivalence.classify's ``better``), not worse, worse; open: cannot tell yet, cannot tell (no
interval yet).
Pure: no printing, no file; every record field a number, a string or a tuple of them (results.json can hold it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

import numpy as np

from abricot_local import metrics
from abricot_local.analysis import equivalence, reproduction, stats
from abricot_local.analysis.correlation_ci import correlation_ci, fisher
from abricot_local.analysis.paired_exact import paired_set_ci
from abricot_local.core import DEFAULT_SEED
from abricot_local.errors import UsageError, opt

ALPHA = 0.10  # the fixed-n verdict's error: a 90% interval, two one-sided tests at 5%
FIRST_LOOK = 20  # the default looks: 20, 40, 80, ... items, then the last
SETTLED = frozenset({reproduction.REPRODUCED, reproduction.DIFFERS, reproduction.UNSETTLEABLE,
                     equivalence.EQUIVALENT, equivalence.BETTER, equivalence.NOT_WORSE, equivalence.WORSE})
PAIR_KINDS = (equivalence.EQUIVALENT, equivalence.BETTER, equivalence.NOT_WORSE, equivalence.WORSE)  # a rung's, settled
BONFERRONI = "Bonferroni over the looks: look k at level 1 - {a:g} x 2^-k"
PEEKING = "every look at level {l:g}, nothing spent (not valid under repeated looks)"


def planned_looks(total: int, looks: Sequence[int] | None = None, max_items: int | None = None,
                  first: int = FIRST_LOOK) -> tuple[int, ...]:
    """The item counts at which the verdicts are read: ``looks`` (``--looks``), else ``first``, twice it, four
    times, ...; each below the last, min(``total``, ``max_items``), which always ends the list."""
    if total < 1:
        raise UsageError("a task with no item has nothing to settle")
    if max_items is not None and max_items < 1:
        raise UsageError(f"{opt('max_items')} must be at least 1, got {max_items}")
    last = total if max_items is None else min(total, max_items)
    if looks is None:
        grid, n = [], max(1, first)
        while n < last:
            grid.append(n)
            n *= 2
    else:
        bad = [n for n in looks if int(n) < 1]
        if bad:
            raise UsageError(f"{opt('looks')}: each look is a number of items, at least 1; got {bad[0]}")
        grid = sorted({int(n) for n in looks if int(n) < last})
    return (*grid, last)


def level(k: int, alpha: float = ALPHA) -> float:
    """Look ``k``'s (1, 2, ...) interval level: 1 - alpha 2^-k."""
    return 1.0 - alpha * 2.0 ** -k


@dataclass(frozen=True)
class Question:
    """One verdict a run waits for: a published row (``published`` set: is the task's own value within ``margin``
    of it?) or a rung against its reference (``published`` None: is other - reference within ``margin``?)."""

    name: str  # the verdict's name in the record and the lines
    stat: str  # "accuracy", or a correlation of metrics.ROW_STATS ("pearson", "spearman")
    margin: float  # in the metric's units
    published: float | None = None
    rounding: float = 0.0  # a published value's: half its last decimal (baselines.rounding)

    def __post_init__(self) -> None:
        if self.stat not in metrics.ROW_STATS:
            raise UsageError(f"{self.name}: no sequential verdict for the statistic {self.stat!r}")
        reproduction.checked_margin(self.margin, f"{self.name}: the margin")

    @property
    def paired(self) -> bool:
        return self.published is None


@dataclass(frozen=True)
class Look:
    """One verdict at one look: what results.json records of it."""

    question: str
    k: int  # the look's number, 1 first
    n: int  # items scored
    total: int  # items the task holds
    level: float  # the interval's level (at n = total the value is exact, the level moot)
    margin: float
    verdict: str  # reproduction's or equivalence's kind
    value: float | None = None  # run - published, or other - reference, over the n items (None: undefined)
    interval: tuple[float, float] | None = None  # this look's interval of it for the task's own value
    running: tuple[float, float] | None = None  # the looks' intervals so far intersected: what `verdict` reads
    note: str = ""

    @property
    def settled(self) -> bool:
        return self.verdict in SETTLED

    @property
    def exact(self) -> bool:
        return self.n >= self.total

    @property
    def words(self) -> str:
        if self.verdict in PAIR_KINDS:
            return equivalence.words(self.verdict, self.margin)
        if self.verdict == reproduction.DIFFERS and self.exact:
            return f"differs by {self.value:+.3f}"
        m = f" {self.margin:g}"
        return {reproduction.REPRODUCED: "reproduced within" + m, reproduction.DIFFERS: "differs by more than" + m,
                reproduction.UNSETTLEABLE: "this task cannot settle" + m, reproduction.UNSETTLED:
                "cannot tell yet within" + m}.get(self.verdict, "cannot tell")

    @property
    def outside(self) -> bool:
        """Below every item, this look's own estimate (``value``) lies outside the interval the verdict reads
        (``running``, the looks' intervals met): the looks disagree; the verdict stands (they cover at once)."""
        v, d = self.value, self.running
        return not self.exact and d is not None and v is not None and not math.isnan(v) and not d[0] <= v <= d[1]

    @property
    def disagreement(self) -> str:
        """:attr:`outside` in words, the looks said to disagree where this look's own interval holds the estimate."""
        if not self.outside:
            return ""
        own = self.interval is None or self.interval[0] <= self.value <= self.interval[1]
        return (f"look {self.k}'s own estimate, {self.value:+.3f}, lies outside it"
                + (": the looks disagree, and a larger run would tell" if own else ""))

    @property
    def figures(self) -> str:
        """The interval the verdict read, in a few words."""
        if self.running is None:
            return self.note or "no interval"
        lo, hi = self.running
        if self.exact:
            return f"{self.value:+.3f} on all {self.total:,} items (exact)"
        return f"[{lo:+.3f}, {hi:+.3f}] at {100 * self.level:.4g}%, {self.n:,} of {self.total:,} items"


@dataclass(frozen=True)
class Sequential:
    """The stopping rule's plan and every look taken so far (:func:`start`, then :func:`look` at each planned n)."""

    total: int
    planned: tuple[int, ...]
    questions: tuple[Question, ...]
    alpha: float = ALPHA
    seed: int = DEFAULT_SEED  # the correlations' bootstrap
    spend: bool = True  # False: every look at 1 - alpha (peeking: the simulation's foil, not valid)
    looks: tuple[Look, ...] = ()

    @property
    def method(self) -> str:
        return BONFERRONI.format(a=self.alpha) if self.spend else PEEKING.format(l=1 - self.alpha)

    def level(self, k: int) -> float:
        return level(k, self.alpha) if self.spend else 1.0 - self.alpha

    @property
    def taken(self) -> int:  # looks taken
        return self.looks[-1].k if self.looks else 0

    @property
    def n(self) -> int:  # items at the last look taken
        return self.planned[self.taken - 1] if self.looks else 0

    @property
    def latest(self) -> tuple[Look, ...]:
        """Each verdict at the last look taken."""
        return tuple(lk for lk in self.looks if lk.k == self.taken)

    @property
    def settled(self) -> bool:
        return bool(self.looks) and all(lk.settled for lk in self.latest)

    @property
    def stopped(self) -> bool:
        """Every verdict settled, or the last planned look taken."""
        return self.settled or self.taken == len(self.planned)

    @property
    def next_look(self) -> int | None:
        return None if self.stopped else self.planned[self.taken]

    def exact_due(self, n: int) -> bool:
        """A rule settled before its last look whose task now holds every item (the run went on for another task's
        verdict): its exact look at ``n`` = N, no error spent, says what every item shows and supersedes it."""
        return self.settled and n >= self.total and n in self.planned[self.taken:]

    @property
    def open(self) -> tuple[Look, ...]:
        return tuple(lk for lk in self.latest if not lk.settled)

    def line(self, lk: Look) -> str:
        """A verdict at the last look as the run's last lines say it: how, where and with what guarantee."""
        guarantee = (f"{self.method}: each verdict wrong with probability at most {self.alpha:g}" if self.spend
                     else self.method)
        where = f"look {lk.k} of {len(self.planned)}"
        if lk.exact:
            early = next((e for e in self.looks if e.question == lk.question and e.k < lk.k and e.settled), None)
            was = ("" if early is None or early.verdict == lk.verdict else
                   f"; it had settled at look {early.k} as {early.words} ({early.figures}), which every item overrules")
            return f"{lk.question}: {lk.words} (every item scored, {where}: {lk.figures}{was})"
        how = "reached sequentially at" if lk.settled else "not settled by the last look,"
        odd = f"; {lk.disagreement}" if lk.outside else ""
        return f"{lk.question}: {lk.words} ({how} {where}: {lk.figures}{odd}; {guarantee})"

    def progress(self) -> str:
        """The progress line's part: the next look and each open verdict's interval."""
        if self.next_look is None:
            return "settled" if self.settled else "last look taken"
        shown = "; ".join(f"{lk.question} {lk.figures}" for lk in self.open) or "no look yet"
        return f"next look at {self.next_look:,} items; open: {shown}"


def question_name(source: str, model: str, task: str, metric: str) -> str:
    """A published row's verdict as a rule names it (the record, the lines, a report's match): ``SOURCE: MODEL
    TASK.METRIC``."""
    return f"{source}: {model} {task}.{metric}"


def pair_question_name(model: str, reference: str, task: str, metric: str) -> str:
    """A rung's verdict against its reference as a rule names it (the record, the lines, a report's match): ``MODEL
    vs REFERENCE TASK.METRIC``."""
    return f"{model} vs {reference} {task}.{metric}"


def start(total: int, questions: Sequence[Question], *, looks: Sequence[int] | None = None,
          max_items: int | None = None, alpha: float = ALPHA, seed: int = DEFAULT_SEED,
          spend: bool = True) -> Sequential:
    """The rule for a task of ``total`` items waiting for ``questions`` (:func:`planned_looks` for ``looks`` and
    ``max_items``), before any look."""
    if not questions or len({q.name for q in questions}) != len(questions) or not 0 < alpha < 1:
        raise UsageError("nothing to settle: no published row and no rung against a reference" if not questions
                         else f"alpha must be between 0 and 1, got {alpha}" if not 0 < alpha < 1
                         else "two verdicts of one sequential rule share a name")
    return Sequential(total, planned_looks(total, looks, max_items), tuple(questions), alpha, seed, spend)


def grown(state: Sequential, taken: Sequence[int]) -> Sequential:
    """``state`` before its first look, an earlier rule of its task having taken the looks ``taken`` (items: a run
    grown by ``--resume --until-settled --max-items``): those kept first, look k at its own level (the error it spent
    stays spent), then the plan's looks past the last of them at the levels after theirs, so the error left is all
    the new looks spend and every verdict keeps its bound (a fresh plan would take its looks at the first levels
    again: the error spent twice). A look past the plan's last is not kept (a run does not shrink)."""
    if state.looks:
        raise UsageError("an earlier rule's looks are kept before the first look, not after")
    kept = tuple(int(n) for n in taken if int(n) <= state.planned[-1])
    if not kept:
        return state
    if kept[0] < 1 or any(b <= a for a, b in zip(kept, kept[1:])):
        raise UsageError(f"the looks an earlier rule took are no plan: {', '.join(map(str, kept))}")
    return replace(state, planned=(*kept, *(n for n in state.planned if n > kept[-1])))


def look(state: Sequential, n: int, inputs: Mapping[str, Sequence[Any]]) -> Sequential:
    """``state`` after the look at ``n`` items (one of ``state.planned``, after the last taken). ``inputs``: per
    question's name, over the first ``n`` items of the nested order, a row's metric inputs ``(x, y)`` (a task's
    ``MetricInput``'s), a pair's ``(x, y, x_ref, y_ref)`` (the rung's, then its reference's, item for item)."""
    if state.stopped and not state.exact_due(n):
        raise UsageError("the sequential rule has stopped: no look after it")
    if n not in state.planned[state.taken:]:
        raise UsageError(f"{n} items is not a look still to come: {', '.join(map(str, state.planned[state.taken:]))}")
    k = state.planned.index(n) + 1
    before = {lk.question: lk for lk in state.latest}
    out = []
    for q in state.questions:
        if q.name not in inputs:
            raise UsageError(f"the look at {n} items has no inputs for {q.name}")
        vectors = [np.asarray(v) for v in inputs[q.name]]
        if any(len(v) != n for v in vectors) or len(vectors) != (4 if q.paired else 2):
            raise UsageError(f"{q.name}: the look at {n} items needs {'four' if q.paired else 'two'} vectors of {n}")
        out.append(_judge(state, q, k, n, vectors, before.get(q.name)))
    return replace(state, looks=(*state.looks, *out))


def _judge(state: Sequential, q: Question, k: int, n: int, v: list[np.ndarray], prev: Look | None) -> Look:
    total, lvl = state.total, state.level(k)
    base = dict(question=q.name, k=k, n=n, total=total, level=lvl, margin=q.margin)
    value, own, note = (_pair if q.paired else _row)(q, v, n, total, lvl, state.seed)
    if n >= total:
        return _exact(q, value, v, n, base)
    if own is None:
        return Look(**base, verdict=reproduction.UNDEFINED, value=value, running=prev.running if prev else None,
                    note=note)
    running, note = _meet(prev.running if prev else None, own)
    kind = equivalence.classify(value, running, q.margin) if q.paired else _row_kind(running, q)
    return Look(**base, verdict=kind, value=value, interval=own, running=running, note=note)


def _row(q: Question, v: list[np.ndarray], n: int, total: int, lvl: float, seed: int):
    """run - published over the n items, its interval at ``lvl`` for the task's own value (the rounding added),
    and why there is none."""
    p, r = q.published, q.rounding
    if q.stat == "accuracy":
        right = int(np.sum(v[0] == v[1]))
        value, (lo, hi), note = right / n, stats.exact_set_ci(right, n, total, level=lvl), ""
    else:
        value, ci, note = correlation_ci(q.stat, v, n, total, lvl, seed, paired=q.paired)
        if ci is None:
            return (None if value is None else value - p), None, note
        lo, hi = ci
    return value - p, (lo - p - r + 0.0, hi - p + r + 0.0), note


def _pair(q: Question, v: list[np.ndarray], n: int, total: int, lvl: float, seed: int):
    """other - reference over the n items, its interval at ``lvl`` for the task's own value, and why there is none."""
    if q.stat != "accuracy":
        value, ci, note = correlation_ci(q.stat, v, n, total, lvl, seed, paired=q.paired)
        few = equivalence.few_changed(q.stat, int(np.sum(v[0].astype(float) != v[2].astype(float))), n)
        return (value, None, few) if ci is not None and few and n < total else (value, ci, note)
    a, b = v[0] == v[1], v[2] == v[3]
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    return (only_a - only_b) / n, paired_set_ci(only_a, only_b, n, total, level=lvl), ""


def _meet(prev: tuple[float, float] | None, own: tuple[float, float]) -> tuple[tuple[float, float], str]:
    """The running interval: ``own`` intersected with the earlier looks'; disjoint, the earlier kept."""
    if prev is None:
        return own, ""
    lo, hi = max(prev[0], own[0]), min(prev[1], own[1])
    if lo > hi:
        return prev, "this look's interval misses the earlier looks': one of them missed the value; theirs kept"
    return (lo, hi), ""


def _row_kind(d: tuple[float, float], q: Question, exact: bool = False) -> str:
    """A published row's verdict from the running interval of run - published (its rounding included): reproduction's
    rule (reproduction.kind: within twice the rounding of the margin, or ``exact`` and on it, this task cannot settle
    M), open: cannot tell yet."""
    return reproduction.kind(*d, q.margin, q.rounding, exact=exact) or reproduction.UNSETTLED


def _exact(q: Question, value: float | None, v: list[np.ndarray], n: int, base: dict) -> Look:
    """Every item scored: the verdict reproduction.judge or equivalence.verdict_of gives the task's own value."""
    if value is None or math.isnan(value):
        return Look(**base, verdict=reproduction.UNDEFINED, note="the value over every item is undefined")
    if q.paired:
        a, b = v[0] == v[1], v[2] == v[3]
        row = SimpleNamespace(a="other", b="reference", diff=value, ci90=(value, value), stat=q.stat, n=n, task="",
                              metric="", note="", detail={"a_only": int(np.sum(a & ~b)), "b_only": int(np.sum(~a & b))})
        e = equivalence.verdict_of(row, "other", "reference", q.margin, base["total"])
        return Look(**base, verdict=e.kind, value=value, interval=e.ci90, running=e.ci90, note=e.note)
    raw = float(np.mean(v[0] == v[1])) if q.stat == "accuracy" else \
        float(metrics.ROW_STATS[q.stat](v[0].astype(float), v[1].astype(float)))
    j = reproduction.judge(raw, None, q.published, q.margin, n=n, total=base["total"], rounding=q.rounding,
                           correlation=q.stat != "accuracy")
    return Look(**base, verdict=j.kind, value=value, interval=j.ci90, running=j.ci90,
                note=j.note if j.kind == reproduction.UNDEFINED else "")


def expected_stop(state: Sequential, question: Question, truth: float | None = None,
                  discordance: float | None = None) -> tuple[int, str] | None:
    """Where the rule would stop for ``question`` alone, and its verdict there, if every look's estimate were ``truth``
    (a row's: its published value unless given; a pair's: other - reference, with the rate of items whose correctness
    differs, ``discordance``): the first planned look that settles it, else the last (exact at N; at --max-items,
    cannot tell yet). Correlations: normal theory's se, 1 / sqrt(n - 3). None: a pair without a discordance."""
    if question.paired and (discordance is None or truth is None):
        return None
    q, t = question, question.published if truth is None and not question.paired else truth
    for k, n in enumerate(state.planned, 1):
        lvl, factor = state.level(k), stats.fpc(n, state.total)
        if q.paired:
            psi = max(discordance, abs(t))
            only_a = round(n * (psi + t) / 2)
            ci = paired_set_ci(only_a, min(n - only_a, round(n * (psi - t) / 2)), n, state.total, level=lvl)
            kind = equivalence.classify(t, (t, t) if n >= state.total else ci, q.margin)
        elif n < (1 if q.stat == "accuracy" else stats.MIN_CORRELATION_ITEMS):
            continue
        else:
            half, z = metrics.z_of(lvl) * math.sqrt(factor / max(1, n - 3)), fisher(t)
            lo, hi = stats.exact_set_ci(min(n, max(0, round(t * n))), n, state.total, level=lvl) if q.stat == "accuracy" else (
                math.tanh(z - half), math.tanh(z + half))
            kind = _row_kind((lo - q.published - q.rounding, hi - q.published + q.rounding), q, n >= state.total)
        if kind in SETTLED or k == len(state.planned):
            return n, kind
    return None
