"""Is one run as good as another: equivalence and non-inferiority verdicts with a margin.

For each run and its reference (:func:`references`: ``--reference``, else the highest-precision
quant of the same model, else the first run) and each metric compared, the difference
other - reference and its 90% interval are read against the margin M, in the metric's own units
(the task's ``margins``, else ``--margin``). The interval: an accuracy's, Tango's score interval of
paired proportions (stats.paired_score_ci, from the discordant items: no changed answer of 12 items
is about +-0.18, not [0, 0]); a correlation's, compare.py's paired bootstrap (none below
stats.MIN_CORRELATION_ITEMS items, none when the difference is the same in every resample).

Which question: the task's own value, a number on its N items (``totals``: compare.py reads N off
the runs). Over n of them the interval narrows by the finite-population correction (stats.fpc); an
accuracy's is the exact interval of its own difference (paired_exact.paired_set_ci; Tango's narrowed, on the set's
grid, only where many answers changed on a large task, many of them among the items not seen); at n = N the difference
is the set's and the verdict exact. The interval for items like these (whether it generalises: no correction) is kept
beside it (``like_*``); with N unknown it is the only one. An accuracy's is Tango's, approximate: where few of a large
task's items are compared it is the narrower (the exact interval's price; Tango's without the correction held the
difference as little as 88.4% at 10-20 of 1,600, bench/README.md), and a verdict it settles beyond the task's own says
so (:meth:`Equivalence.like_line`).

- ``equivalent within M``: the interval inside (-M, M) (two one-sided tests at 5%);
- ``better by more than M``: its lower bound above +M (every item compared: the difference itself);
- ``not worse by more than M``: its lower bound above -M, its upper bound M or more, its lower bound M or less;
- ``worse by more than M``: its upper bound below -M;
- ``cannot tell``: no interval, or a margin no difference of the metric can exceed (metrics.covered_difference: above
  1 for an accuracy, 2 for a correlation), whatever the runs answer;
- ``cannot tell yet``: the interval holds -M; with about how many of the task's items would settle
  it if the difference stayed what it is: an accuracy's, the least n at which its verdict's own interval (the set's,
  then Tango's for items like these) settles with the answers changing at the rates seen (:func:`_rule_settles`); a
  correlation's, stats.items_to_settle (its spread at 80% power, one-sided 5%), then stats.of_population; for items
  like these, more than the task holds: "this task cannot settle M".

The question is one-sided, the reference's point of view (is the run as good?), so the verdicts mirror where the
mirror still answers it: ``better`` mirrors ``worse``; an interval below +M that holds -M is ``cannot tell yet``, not
"not better by more than M", since the run may still be worse by more than M. compare (``judge``) and the
--until-settled looks (sequential.py, replayed by ``check``) read one rule, :func:`classify`.

Pure: reads compare.py's MetricComparison rows (duck-typed: no import of compare.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

from abricot_local.analysis import stats
from abricot_local.analysis.paired_exact import paired_set_ci, tango_set_ci
from abricot_local.gguf.file import highest_precision
from abricot_local.models.quants import precision_of
from abricot_local.errors import UsageError, opt
from abricot_local.metrics import BOUNDS, covered_difference

EQUIVALENT, NOT_WORSE, WORSE, UNSETTLED, UNDEFINED = (
    "equivalent", "not worse", "worse", "cannot tell yet", "cannot tell")
BETTER = "better"  # the interval above +M: the mirror of WORSE
NAN2 = (math.nan, math.nan)


@dataclass(frozen=True)
class Equivalence:
    other: str  # the run judged (label)
    reference: str  # the run it is judged against (label)
    task: str
    metric: str
    margin: float  # in the metric's units
    n: int  # items compared
    diff: float  # other - reference
    ci90: tuple[float, float]  # 90% interval of diff for the task's own value (N known), else for items like these
    kind: str  # EQUIVALENT, BETTER, NOT_WORSE, WORSE, UNSETTLED or UNDEFINED
    items: int | None = None  # cannot tell yet: about how many items would settle it (stats.MAX_ITEMS: none would)
    note: str = ""
    stat: str = ""  # the metric's statistic (accuracy: Tango's interval, the settling figure its own interval's least n)
    total: int | None = None  # the task's items (None: not known here)
    like_ci90: tuple[float, float] = NAN2  # items like these: the 90% interval without the correction
    like_kind: str = ""  # its verdict ("": not judged)
    like_items: int | None = None  # its cannot tell yet: about how many items like these would settle it
    identical: bool = False  # every log-prob of the n items bit-identical

    @property
    def exact(self) -> bool:
        """Every item of the task compared: the difference is the task's own."""
        return self.total is not None and self.n >= self.total

    @property
    def covered(self) -> str:
        """Why no difference a run could give fails this margin, or "" (metrics.covered_difference: verdict_of's
        cannot tell, whatever the runs answer)."""
        return covered_difference(self.margin, BOUNDS.get(self.stat))

    @property
    def method(self) -> str:
        return "Tango's score interval" if self.stat == "accuracy" else "paired bootstrap"

    def _figures(self) -> str:
        if self.exact:
            return f"(difference {self.diff:.3f} on all {self.total:,} items of the task: exact)"
        lo, hi = self.ci90
        whose = f"for the task's {self.total:,} items, {self.n:,} compared" if self.total is not None else \
            f"for items like these, {self.n:,} items"
        return f"(difference {self.diff:.3f}, 90% CI [{lo:.3f}, {hi:.3f}] {whose})"

    @property
    def line(self) -> str:
        """The verdict in one line (the task's own value; :attr:`lines` adds items like these)."""
        head = f"{self.other} vs {self.reference}, {self.task} {self.metric}: "
        if self.identical:
            head += f"identical on these {self.n:,} items; "
        m = f"{self.margin:g}"
        if self.kind == UNDEFINED:
            return head + f"cannot tell ({self.note or 'the difference is undefined'})"
        if self.kind != UNSETTLED:
            return head + f"{words(self.kind, self.margin)} {self._figures()}"
        what = "discordance" if self.stat == "accuracy" else "spread"
        if self.items is None or self.items >= stats.MAX_ITEMS:
            settle = "no number of items settles it: the difference sits on the margin"
        elif self.total is not None:
            settle = f"about {self.items:,} of the task's {self.total:,} items would settle it at this {what}"
        else:
            settle = f"about {self.items:,} items would settle it at this {what}"
        return head + f"cannot tell yet within {m} {self._figures()}; {settle}"

    @property
    def like_line(self) -> str:
        """Items like these (whether the difference generalises): the interval without the finite-population
        correction and what it settles; "" when the verdict's own interval is that one."""
        if self.total is None or not self.like_kind:
            return ""
        m, lo, hi = f"{self.margin:g}", *self.like_ci90
        head = "items like these (whether it generalises): "
        if self.like_kind == UNDEFINED:
            return head + f"no interval ({self.note})" if self.note else head + "no interval"
        figures = f"90% CI [{lo:.3f}, {hi:.3f}] ({self.method}, {self.n:,} items)"
        if self.like_kind != UNSETTLED:
            return head + f"{figures}: {words(self.like_kind, self.margin)}{self._stronger()}"
        k = self.like_items
        if k is None or k >= stats.MAX_ITEMS:
            return head + f"{figures}: cannot tell within {m}; no number of items settles it (on the margin)"
        if k > self.total:
            return head + (f"{figures}: this task cannot settle {m} (about {k:,} items would; it holds "
                           f"{self.total:,})")
        return head + f"{figures}: cannot tell yet within {m}; about {k:,} items like these would settle it"

    def _stronger(self) -> str:
        """Why items like these settle what the task's own interval does not: an accuracy's Tango interval,
        approximate, narrower than the exact one of the task's difference (few items of a large task)."""
        lo, hi = self.ci90
        if self.stat != "accuracy" or self.exact or self.kind == self.like_kind or \
                not self.like_ci90[1] - self.like_ci90[0] < hi - lo:
            return ""
        return ("; it settles more than the task's own line above only because Tango's interval is approximate (at "
                "this size it can hold the difference less than 90% of the time), where the task's is exact and "
                "here the wider")

    @property
    def lines(self) -> tuple[str, ...]:
        return (self.line, self.like_line) if self.like_line else (self.line,)


def words(kind: str, margin: float) -> str:
    """A settled verdict in words: ``equivalent within 0.02``, ``better by more than 0.02``, ``not worse by more than
    0.02``, ``worse by more than 0.02``."""
    m = f"{margin:g}"
    return {EQUIVALENT: f"equivalent within {m}", BETTER: f"better by more than {m}",
            NOT_WORSE: f"not worse by more than {m}", WORSE: f"worse by more than {m}"}[kind]


def few_changed(stat: str, changed: int, n: int) -> str:
    """The changed-answers rule, one rule for compare's verdict and the --until-settled looks (sequential.py): a
    correlation's difference made by fewer than stats.MIN_CORRELATION_ITEMS of the ``n`` items whose answer changed
    is not read against a margin below every item (its bootstrap settled a rung truly worse as equivalent up to 15%
    of the time at a fixed n, 18-23% under the looks); why, or "" when it is read (an accuracy's interval: none of
    this)."""
    if stat == "accuracy" or changed >= stats.MIN_CORRELATION_ITEMS:
        return ""
    return (f"{changed} of the {n} items changed their answer, fewer than {stats.MIN_CORRELATION_ITEMS}: a "
            "correlation's difference made by so few is not read against a margin (its bootstrap settled "
            "a rung truly worse as equivalent up to 15% of the time)")


def classify(diff: float, ci90: tuple[float, float], margin: float) -> str:
    """The verdict of a difference's 90% interval against the margin (module docstring)."""
    lo, hi = ci90
    if any(math.isnan(v) for v in (diff, lo, hi)):
        return UNDEFINED
    if lo > -margin:
        return EQUIVALENT if hi < margin else BETTER if lo > margin else NOT_WORSE
    return WORSE if hi < -margin else UNSETTLED


def _quant(run: Any) -> str:
    """A compared run's quant as identified (runs.Run.quant: the registry's, else the name's or the file's; what its
    flat settings' ``quant`` repeats)."""
    return str(run.quant or "").upper()


def references(runs: Sequence[Any], reference: str | None = None) -> tuple[tuple[str, str], ...]:
    """(run, its reference) by label, in the runs' order (each with ``label``, ``path``, ``base`` and a
    quant). ``reference``: a run's label or folder, the reference of every other run. Otherwise the
    runs of one model (``base``) at several quants are judged against the highest-precision one
    (gguf.file.highest_precision over models.quants.precision_of: the recorded bits per weight, else the
    quant's name; a tie by the name, then the label: whatever the runs' order), and every other run
    against the first run."""
    labels = [r.label for r in runs]
    if reference is not None:
        ref = _named(runs, reference)
        return tuple((lab, ref) for lab in labels if lab != ref)
    groups: dict[str, list[int]] = {}
    for k, r in enumerate(runs):
        if r.base:
            groups.setdefault(r.base.lower(), []).append(k)
    out = []
    for k, r in enumerate(runs):
        members = groups.get(r.base.lower(), []) if r.base else []
        quants = {_quant(runs[j]) for j in members}
        if len(members) > 1 and len(quants) > 1:
            top = members[highest_precision([precision_of(runs[j]) for j in members])]
            if top != k:
                out.append((labels[k], labels[top]))
        elif k:
            out.append((labels[k], labels[0]))
    return tuple(out)


def _named(runs: Sequence[Any], name: str) -> str:
    from pathlib import Path

    for r in runs:
        if name == r.label or name == str(r.path):
            return r.label
    wanted = Path(name).resolve()
    for r in runs:
        if Path(r.path).resolve() == wanted:
            return r.label
    raise UsageError(f"{opt('reference', name)}: not one of the runs compared; give a folder or a label: "
                     + ", ".join(r.label for r in runs))


def _interval(m: Any, sign: float, total: int | None = None) -> tuple[float, float]:
    """The 90% interval of other - reference for the task's own value (its ``total`` items: an accuracy's
    paired_exact.paired_set_ci; a correlation's narrowed by the finite-population factor), or
    (None) for items like these."""
    if m.stat == "accuracy":
        return _paired(dict(m.detail)["a_only"], dict(m.detail)["b_only"], m.n, total, sign)
    lo, hi = stats.narrowed(m.diff, m.ci90, stats.fpc(m.n, total) if total is not None else 1.0)
    return (lo + 0.0, hi + 0.0) if sign > 0 else (-hi + 0.0, -lo + 0.0)


def _paired(b: float, c: float, n: int, total: int | None, sign: float) -> tuple[float, float]:
    """An accuracy's 90% interval of other - reference (b right for ``a`` only, c for ``b`` only, of n): the set's
    (paired_exact.paired_set_ci) with its ``total`` known, else Tango's for items like these."""
    lo, hi = paired_set_ci(b, c, n, total, level=0.90) if total is not None else \
        stats.paired_score_ci(b, c, n, level=0.90)
    return (lo + 0.0, hi + 0.0) if sign > 0 else (-hi + 0.0, -lo + 0.0)


def _rule_settles(m: Any, sign: float, margin: float, total: int | None, size: int, interval=None) -> bool:
    """Whether an accuracy's verdict interval settles the margin over ``size`` items with the answers changing at the
    rates seen: b size / n and c size / n changed answers, each rounded to whole items for the set's exact interval
    (its counts are items; c one fewer where the two would pass ``size``), as they are for items like these (Tango's
    score takes them as they come). ``interval``: another of the set's (the search's first guess), else the verdict's."""
    b, c = dict(m.detail)["a_only"] * size / m.n, dict(m.detail)["b_only"] * size / m.n
    if total is not None:
        b = math.floor(b + 0.5)
        c = min(math.floor(c + 0.5), size - b)
    ci = _paired(b, c, size, total, sign) if interval is None else interval(b, c, size, total)
    ci = ci if sign > 0 or interval is None else (-ci[1] + 0.0, -ci[0] + 0.0)
    return classify(sign * (b - c) / size + 0.0, ci, margin) != UNSETTLED


def _least(settles, known: int, limit: int, start: int) -> int:
    """The least size above ``known`` (one that does not settle) at which ``settles``, up to ``limit``: from ``start``
    by doubling steps down while it settles (up while not), then bisection; stats.MAX_ITEMS when ``limit`` does not.
    The rounding to whole items can settle one size and not the next at few changed answers: the size found settles
    and the one before it does not, between the first that settles and the one from which all do
    (tests/test_compare_settle_n_71.py)."""
    low = high = max(known + 1, min(limit, start))
    step = 1
    if settles(high):
        while True:
            if high - step <= known:
                low = known
                break
            if not settles(high - step):
                low = high - step
                break
            high, step = high - step, step * 2
    else:
        while True:
            if low >= limit:
                return stats.MAX_ITEMS
            if settles(min(limit, low + step)):
                high = min(limit, low + step)
                break
            low, step = min(limit, low + step), step * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if settles(mid) else (mid, high)
    return high


def _settle(m: Any, diff: float, margin: float, like: tuple[float, float], sign: float = 1.0,
            total: int | None = None) -> int:
    """About how many items would settle it: an accuracy's, the least n at which its own interval does
    (:func:`_rule_settles`: for the task's ``total`` items, up to them, from where Tango's narrowed on the set's grid
    would, the cheap guess; None: items like these); a correlation's, of items like these, stats.items_to_settle
    (MAX_ITEMS: none). A difference on the margin stays there: no number settles it."""
    if m.stat != "accuracy" or not m.n:
        return stats.items_to_settle(m.n, abs(diff + margin), ci90=like)
    if diff + margin == 0:
        return stats.MAX_ITEMS
    limit, start = (total, _least(lambda size: _rule_settles(m, sign, margin, total, size, tango_set_ci), m.n,
                                  total, m.n + 1)) if total is not None else (stats.MAX_ITEMS, m.n + 1)
    return _least(lambda size: _rule_settles(m, sign, margin, total, size), m.n, limit, start)


def verdict_of(m: Any, other: str, ref: str, margin: float, total: int | None = None,
               identical: bool = False) -> Equivalence:
    """One MetricComparison row (runs ``m.a`` and ``m.b``) judged as ``other`` against ``ref`` at ``margin``,
    ``total``: the task's items (None: not known)."""
    sign = 1.0 if (m.a, m.b) == (other, ref) else -1.0
    diff = sign * m.diff + 0.0  # never -0.0
    total = total if total is not None and total >= m.n else None
    base = dict(other=other, reference=ref, task=m.task, metric=m.metric, margin=margin, n=m.n, diff=diff,
                stat=m.stat, total=total, identical=identical)
    vacuous = covered_difference(margin, BOUNDS.get(m.stat))
    if vacuous:  # no difference a run could give lies beyond the margin: none is said equivalent
        return Equivalence(**base, ci90=NAN2, kind=UNDEFINED, note=vacuous)
    exact = total is not None and m.n >= total
    like = NAN2 if m.stat != "accuracy" and any(math.isnan(v) for v in m.ci90) else _interval(m, sign)
    note = m.note if math.isnan(diff) or math.isnan(like[0]) else ""
    correlation = m.stat != "accuracy"  # an accuracy's interval is Tango's (or exact): no guard of these
    changed = dict(m.detail).get("changed", m.n)
    if correlation and m.n < stats.MIN_CORRELATION_ITEMS and not math.isnan(diff):
        note = (f"fewer than {stats.MIN_CORRELATION_ITEMS} items: a correlation's bootstrap interval over {m.n} is "
                "not read against a margin")
        like = NAN2
    elif (few := few_changed(m.stat, changed, m.n)) and not exact and not math.isnan(diff):  # a handful
        note = few
        like = NAN2
    like_kind = classify(diff, like, margin)
    like_items = _settle(m, diff, margin, like, sign) if like_kind == UNSETTLED else None
    if exact:
        if math.isnan(diff):
            return Equivalence(**base, ci90=NAN2, kind=UNDEFINED, note=note or "the difference is undefined")
        kind = EQUIVALENT if -margin < diff < margin else BETTER if diff > margin else \
            NOT_WORSE if diff > -margin else WORSE if diff < -margin else UNDEFINED
        return Equivalence(**base, ci90=(diff, diff), kind=kind, like_ci90=like, like_kind=like_kind,
                           like_items=like_items, note=note if kind != UNDEFINED else
                           f"the difference over all {total:,} items is exactly -{margin:g}: on the margin")
    if math.isnan(like[0]) or math.isnan(diff):
        return Equivalence(**base, ci90=NAN2, kind=UNDEFINED,
                           note=note or "the difference is undefined (a constant vector)")
    own = _interval(m, sign, total) if total is not None else like
    kind = classify(diff, own, margin)
    items = None
    if kind == UNSETTLED and m.stat == "accuracy":  # its own interval's least n (the task's: never above N)
        items = like_items if total is None else _settle(m, diff, margin, like, sign, total)
    elif kind == UNSETTLED:
        n0 = like_items if like_kind == UNSETTLED else _settle(m, diff, margin, like)
        items = stats.of_population(n0, total) if n0 < stats.MAX_ITEMS else n0
        items = items if items >= stats.MAX_ITEMS else max(items, m.n + 1)
    if total is None:
        return Equivalence(**base, ci90=own, kind=kind, items=items)
    return Equivalence(**base, ci90=own, kind=kind, items=items, like_ci90=like, like_kind=like_kind,
                       like_items=like_items)


def judge(metrics: Sequence[Any], pairs: Sequence[tuple[str, str]], margins: Mapping[tuple[str, str], float],
          margin: float | None = None, *, totals: Mapping[str, int | None] | None = None,
          identical: Collection[tuple[str, str, str]] = ()) -> tuple[Equivalence, ...]:
    """One :class:`Equivalence` per (run, reference) pair and metric compared. ``margins``: per (task,
    metric) the task's; ``margin``: one for every metric instead; ``totals``: per task its items (the
    finite-population correction; absent: items like these only); ``identical``: the (a, b, task) whose
    log-probs are bit-identical. An interval above +M is ``better by more than M`` (:func:`classify`)."""
    if margin is not None:
        from abricot_local.analysis.reproduction import checked_margin

        margin = checked_margin(margin)
    wanted = {pair: k for k, pair in enumerate(pairs)}
    totals = totals or {}
    out = []
    for m in metrics:
        if (m.a, m.b) in wanted:
            other, ref = m.a, m.b
        elif (m.b, m.a) in wanted:
            other, ref = m.b, m.a
        else:
            continue
        mg = margin if margin is not None else margins.get((m.task, m.metric), 0.02)
        same = (m.a, m.b, m.task) in identical or (m.b, m.a, m.task) in identical
        out.append(verdict_of(m, other, ref, mg, totals.get(m.task), same))
    order = {pair: k for k, pair in enumerate(pairs)}
    return tuple(sorted(out, key=lambda e: order[(e.other, e.reference)]))
