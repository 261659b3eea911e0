"""Did a run reproduce a published value? The verdict with a margin, as `compare --margin` judges two runs.

A published row is a number on a finite set: the task's N items (ABRICOT's 127 rows), the ones the run scores. So
the question is that set's own value. A run of n of the N items gives it a 90% interval (``within``: an accuracy's
exact hypergeometric interval, stats.exact_set_ci, which holds the set's accuracy 90% of the time or more at every
n; a correlation's bootstrap interval narrowed around the value by the finite-population correction sqrt((N - n) /
(N - 1))); at n = N the run's value is the set's and the verdict is exact. The published value is a constant,
rounded: the interval of run - published is the run's, shifted by it and widened by half its last decimal
(``rounding``: +-0.005 at two decimals). Against the margin M (the task's declared ``Task.margins`` for the metric,
else ``Task.default_margin``; ``run --margin``):

- ``reproduced``: the interval lies inside (-M, M): equal within M (two one-sided tests at 5%; at
  n = N, "reproduced within M" exactly);
- ``differs``: the interval lies wholly beyond M on one side (at n = N, "differs by d");
- ``cannot tell yet``: the interval holds a bound of +-M; with about how many of the task's items would
  settle it if the difference stayed what it is (stats.items_to_settle: the interval's spread scaled
  as 1/sqrt(n), then stats.of_population: never more than N); all N, with the estimate within twice
  the published value's rounding of M: that even all N may not tell (the exact value may fall within the rounding of M);
- ``cannot settle``: not even every item could: every item scored, the exact difference lies within the
  published value's rounding of the margin (its interval holds a bound of +-M; on it, without rounding), where
  more items cannot help (:func:`kind`: the one rule, the --until-settled looks' too);
- ``cannot tell``: no finite interval (a constant prediction vector, a NaN metric: the note says which
  side is constant; below N, ``items`` all N: more items help only if that side varies), a correlation over
  fewer than stats.MIN_CORRELATION_ITEMS items or the same in every resample; a margin covering every value the
  metric takes from the published one (metrics.covered: no run could differ by more). Under the 10-answer rule (fewer than 10 answers off a vector's most common value, k of the n; under 10
  items too), about ceil(10 n / k) items would hold 10 at the run's rate: the note says so and ``items`` holds it
  (none with k = 0), which the grow advice offers as the items the verdict is judged on, not what settles it
  (:func:`judged_only`). A --limit run's ``items`` are what a --sample draw would need, for a correlation never
  fewer than :data:`FLOOR` (11: 10 answers off the most common one, and it).

The wider interval of items like these (whether the model generalises: no correction; ``ci90``) is
judged too, as a second reason: there "this task cannot settle M" when more items than the task holds
would be needed (``settles``: the half-width all N items would give), with the margins it settles: below N, what all
N would tell with the power items_to_settle asks (a guess at a larger run); every item scored, the interval is final
and settles what the verdict's rule reads off it (margin_rule.settled_margins). A small-sample warning is added
whenever the verdict's interval is wider than the gap between the published value and its nearest
published neighbour (the same source, task and metric): at that width the run cannot tell the
published models apart. Pure: no run folder, no task is read here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from abricot_local.analysis import stats
from abricot_local.analysis.margin_rule import (DIFFERS, KINDS as KINDS, REPRODUCED, UNDEFINED, UNSETTLEABLE,
                                                UNSETTLED, checked_margin, kind, settled_margins)
from abricot_local.metrics import covered
from abricot_local.errors import opt
# the verdicts' method, recorded (record.Published.method): 2 since a correlation's interval for the task's own
# value is correlation_ci's, --limit's first items are no draw, and an estimate on the margin below N can tell; 3
# since that interval's centre is corrected for Fisher's bias and z's skewness drawn without replacement, with t;
# 4 since the 10-answer rule holds for items like these at N too, and its cannot tell estimates the items needed; 5
# since a correlation's intervals are the jackknife's on Fisher's z (correlation_ci.jackknife_ci: method 3's bootstrap
# moments broke down near r = 1), none where r is +-1 with an item left out
# and a rung's paired accuracy interval near N the restricted exact one (up to 200 changed answers while few are
# expected among the items unseen), elsewhere above 40 changed Tango's taken outward to the task's grid (paired_exact);
# 6 since a correlation's cannot tell estimates the items that give 10 answers under 10 items too, never fewer than
# FLOOR, and says "judge" where those are the fewest it is judged on; 7 since a NaN metric below N offers the whole
# task, and a margin covering every value the metric takes (metrics.covered) is cannot tell, never reproduced; 8 since
# a run of every item says the margins its own interval settles (margin_rule.settled_margins), not the power guess
METHOD = 8
MIN_ANSWERS = stats.MIN_CORRELATION_ITEMS  # the 10-answer rule's count (metrics.interval_read)
FLOOR = MIN_ANSWERS + 1  # the fewest items a correlation is judged on: 10 answers off the most common one, and it
DRAWN_CANNOT_TELL = "; and "  # a --limit verdict's note: why a draw of its items would still cannot tell follows
NAN2 = (math.nan, math.nan)


@dataclass(frozen=True)
class Verdict:
    """One published value against a run: the kind (above) and what decided it."""

    kind: str
    margin: float
    difference: float  # run - published
    ci90: tuple[float, float]  # 90% interval of run - published: the task's own value, the published rounding included
    n: int  # items the run scored
    total: int  # items the whole task holds
    items: int | None = None  # cannot tell yet: about how many of the task's items would settle it; cannot tell
    #                           under the 10-answer rule: about how many would hold 10 answers off the commonest
    settles: float | None = None  # items like these: half-width of a 90% CI over all the task's items
    warnings: tuple[str, ...] = ()
    rounding: float = 0.0  # half a unit of the published value's last decimal
    like_ci90: tuple[float, float] = NAN2  # items like these: the interval without the correction
    like_kind: str = ""  # its verdict ("": none)
    like_items: int | None = None  # its cannot tell yet: about how many items like these would settle it
    like_margins: tuple[float | None, ...] = ()  # its cannot settle over every item: margin_rule.settled_margins
    note: str = ""  # cannot tell: why

    @property
    def exact(self) -> bool:
        return self.n >= self.total

    def _figures(self) -> str:
        lo, hi = self.ci90
        r = f"; the published value's rounding +-{self.rounding:g} included" if self.rounding else ""
        if self.exact:
            return (f"run - published {self.difference:+.3f} on all {self.total} items of the task (exact; "
                    f"[{lo:+.3f}, {hi:+.3f}] with the published value's rounding +-{self.rounding:g})")
        return (f"run - published {self.difference:+.3f}, 90% CI [{lo:+.3f}, {hi:+.3f}] for the task's {self.total} "
                f"items ({self.n} scored{r})")

    def _head(self) -> str:
        m = f"{self.margin:g}"
        if self.kind == UNDEFINED:
            return f"cannot tell: {self.note or 'the run has no value'}"
        if self.kind == REPRODUCED:
            return f"reproduced within {m}: {self._figures()}, inside +-{m}"
        if self.kind == DIFFERS:
            if self.exact:
                return f"differs by {self.difference:+.3f}: {self._figures()}, beyond +-{m}"
            return f"differs by more than {m}: {self._figures()}, wholly beyond +-{m}"
        if self.kind == UNSETTLED:
            return f"cannot tell yet within {m}: {self._figures()}; {self._need()}"
        where = "within the published value's rounding of the margin" if self.rounding else "on the margin"
        return (f"this task cannot settle +-{m}: {self._figures()}; the difference is {where}: even all {self.total} "
                "items leave it there")

    def _need(self) -> str:
        """cannot tell yet: the items that would settle it. All N give the exact value, but an exact value within
        the published value's rounding of the margin tells nothing: with the estimate that near (within twice the
        rounding; within it, where it stays, even all N cannot tell) the advice says so, no promise."""
        m = f"{self.margin:g}"
        if self.items < self.total:
            return f"about {self.items:,} of the task's {self.total} items would settle it"
        near = abs(abs(self.difference) - self.margin)
        if not self.rounding or not near <= 2 * self.rounding:
            return f"all {self.total} of the task's items would tell (the value then exact)"
        band = f"the published value's rounding (+-{self.rounding:g}) of +-{m}"
        if near <= self.rounding:
            return (f"all {self.total} items would give the exact value, but the difference is within {band}: "
                    f"if it stays there even that cannot tell (this task likely cannot settle +-{m})")
        return f"all {self.total} items would give the exact value; within {band} even that may not tell"

    def _like(self) -> str:
        """Items like these (whether the model generalises), or "" when not judged."""
        if not self.like_kind:
            return ""
        m, head = f"{self.margin:g}", "items like these (whether the model generalises): "
        if self.like_kind == UNDEFINED:
            return head + f"no interval ({self.note})" if self.note else ""
        lo, hi = self.like_ci90
        figures = f"run - published 90% CI [{lo:+.3f}, {hi:+.3f}] over {self.n} items"
        if self.like_kind == REPRODUCED:
            return head + f"{figures}: reproduced within {m}"
        if self.like_kind == DIFFERS:
            return head + f"{figures}: differs by more than {m}"
        if self.like_kind == UNSETTLED:
            return head + (f"{figures}: cannot tell yet within {m}; about {self.like_items:,} items like these would "
                           "settle it")
        d, h = abs(self.difference), self.settles or 0.0
        if self.like_margins:  # every item scored: the interval is final, and settles what it settles
            return head + (f"{figures}: this task cannot settle +-{m}: all {self.total} items give a 90% CI of about "
                           f"+-{h:.2f}, and {_settled(*self.like_margins)}")
        za, zb = stats.z_power(0.10, stats.POWER)
        p = h * (za + zb) / za  # what all the items tell from a margin with the power items_to_settle asks
        under = f" (or, differing, under {d - p:.2f})" if d - p >= 0.005 else ""
        whole = f"all {self.total}" if self.exact else f"even all {self.total}"
        return head + (f"{figures}: this task cannot settle +-{m}: {whole} items give a 90% CI of about +-{h:.2f}, "
                       f"and tell a difference about {p:.2f} or more from a margin ({stats.POWER:.0%} power): at "
                       f"this difference it settles margins of about {d + p:.2f} or more{under}")

    @property
    def reasons(self) -> tuple[str, ...]:
        """The verdict in words, items like these, then the warnings (what results.json records as ``reasons``)."""
        like = self._like()
        return (self._head(), *((like,) if like else ()), *self.warnings)

    @property
    def line(self) -> str:
        return self.reasons[0]


def _bad(*values: float) -> bool:
    return any(v is None or not math.isfinite(v) for v in values)


def judge(value: float | None, ci90: tuple[float, float] | None, published: float, margin: float, *, n: int,
          total: int, neighbours: tuple[tuple[str, float], ...] = (), within: tuple[float, float] | None = None,
          rounding: float = 0.0, correlation: bool = False, drawn: bool = True, why: str = "",
          off: int | None = None, bounds: tuple[float, float] | None = None) -> Verdict:
    """The verdict on ``published`` (rounded to +-``rounding``) of a run whose metric is ``value`` over ``n``
    items of a task of ``total``: ``ci90``, its 90% interval for items like these; ``within``, for the task's
    own value (None: ``ci90`` narrowed by the finite-population correction); ``correlation``: a bootstrap
    interval, read only from stats.MIN_CORRELATION_ITEMS items and with a spread; ``neighbours``: the other
    published (model, value) of the same source, task and metric (the small-sample warning); ``why``: why a
    correlation has no interval for the task's own value (correlation_ci's guard), or, ``value`` NaN, why it is
    undefined (metrics.undefined: which side is constant); ``off``: with ``why`` the 10-answer rule's, the k
    answers off the most common value (correlation_ci.too_few_off), from which :func:`_rate_items` estimates the
    items that would hold 10 such answers; ``drawn`` False:
    the items are the task's first (--limit), no draw of it: the task's value is not judged from them; ``bounds``:
    the metric's values (metrics.covered). A margin no finite number above 0 is refused (:func:`checked_margin`)."""
    margin = checked_margin(margin)
    total = max(total, n)
    base = dict(margin=margin, n=n, total=total, rounding=rounding)
    if value is None:  # the run records no such metric (a published row of a metric its task does not give)
        return Verdict(UNDEFINED, difference=math.nan, ci90=NAN2,
                       note="the run has no such metric: its task records none of that name", **base)
    vacuous = covered(published, margin, bounds)
    if vacuous:  # no value the run could give differs by more: none is said reproduced
        return Verdict(UNDEFINED, difference=value - published + 0.0, ci90=NAN2, note=vacuous, **base)
    if _bad(value):
        note = f"the run's metric is undefined (NaN): {why}" if why else \
            "the run's metric is undefined (NaN: a constant vector)"
        items = None
        if n < total:  # no rate to scale: only items where the constant side varies help, all N give the value
            items, more = _whole_task(total)
            note += f"; {more}"
            if not drawn:
                note = f"{_no_draw(n, total)}{DRAWN_CANNOT_TELL}{note}"
        return Verdict(UNDEFINED, difference=value - published, ci90=NAN2, note=note, items=items, **base)
    diff = value - published + 0.0
    note, items = "", None
    if (ci90 is None or _bad(*ci90)) and not (correlation and why):  # else why says why it has none
        note = "the run's metric has no finite 90% interval (a constant vector)"
    elif correlation and n < stats.MIN_CORRELATION_ITEMS:
        note = (f"fewer than {stats.MIN_CORRELATION_ITEMS} items: a correlation's bootstrap interval over {n} is not "
                "read")
        if off is not None and n < total:  # the 10-answer rule's estimate: the fewest items it is judged on
            items, more = _rate_items(off, n, total, such="answers off a vector's most common value")
            note += f"; {more}"
    elif correlation and ci90 is not None and ci90[0] == ci90[1]:
        note = "the correlation is the same in every resample: its bootstrap has no spread"
    elif correlation and why:  # no interval for the task's own value (correlation_ci), nor for items like these:
        note = why  # the same bootstrap (all N scored, the exact verdict stands; items like these are not judged)
        if off is not None and n < total:  # the 10-answer rule: how many items would hold 10 such answers
            items, more = _rate_items(off, n, total)
            note += f"; {more}"
    like = NAN2 if note else (ci90[0] - published - rounding + 0.0, ci90[1] - published + rounding + 0.0)
    gap = abs(abs(diff) - margin) - rounding  # how far the interval's nearer edge may reach and still settle it
    like_kind, like_items, settles = UNDEFINED, None, None
    if not note:
        like_kind = kind(*like, margin)
        if like_kind is None:
            n0 = stats.items_to_settle(n, gap, ci90=ci90) if gap > 0 else stats.MAX_ITEMS
            settles = (ci90[1] - ci90[0]) / 2.0 * math.sqrt(n / total) if n else math.inf
            like_kind, like_items = (UNSETTLEABLE, None) if n0 > total else (UNSETTLED, max(n0, n + 1))
    margins = settled_margins(*like, published, bounds) if like_kind == UNSETTLEABLE and n >= total else ()
    extra = dict(like_ci90=like, like_kind=like_kind, like_items=like_items, settles=settles, like_margins=margins,
                 **base)
    if n >= total:  # every item: the run's value is the set's
        own = (diff - rounding + 0.0, diff + rounding + 0.0)
        return Verdict(kind(*own, margin, exact=True), difference=diff, ci90=own, note=note, **extra)
    if not drawn:  # items: what a --sample run would need, as a draw would be judged (at least as many)
        as_drawn = judge(value, ci90, published, margin, n=n, total=total, within=within, rounding=rounding,
                         correlation=correlation, why=why, off=off)
        return Verdict(UNDEFINED, difference=diff, ci90=NAN2, items=as_drawn.items or _fewest(n, total, correlation),
                       note=_no_draw(n, total) + (f"{DRAWN_CANNOT_TELL}{note}" if note else ""), **extra)
    if note:
        return Verdict(UNDEFINED, difference=diff, ci90=NAN2, note=note, items=items, **base)
    w = within if within is not None else stats.narrowed(value, ci90, stats.fpc(n, total))
    own = (w[0] - published - rounding + 0.0, w[1] - published + rounding + 0.0)
    warnings = _small_sample(own[1] - own[0], published, neighbours, n)
    settled = kind(*own, margin)
    if settled is not None:
        return Verdict(settled, difference=diff, ci90=own, warnings=warnings, **extra)
    if gap <= 0:  # the estimate on the margin (within its rounding): only the whole task can tell, and it will
        return Verdict(UNSETTLED, difference=diff, ci90=own, items=total, warnings=warnings, **extra)  # (unless on it)
    n0 = like_items if like_kind == UNSETTLED else stats.items_to_settle(n, gap, ci90=ci90)
    items = max(stats.of_population(n0, total), n + 1)
    return Verdict(UNSETTLED, difference=diff, ci90=own, items=items, warnings=warnings, **extra)


def _settled(least: float | None, top: float | None, most: float | None) -> str:
    """What an interval over every item settles (margin_rule.settled_margins' figures: reproduced from ``least`` up to
    ``top``, differing at ``most`` or under), in words."""
    if least is None:
        return f"this interval settles margins only as differing, {most:.3f} or under" if most is not None else \
            "this interval settles no margin"
    out = f"this interval settles margins of {least:.3f} " + ("or more" if top is None else f"to {top:.3f}")
    out += f" (or, differing, {most:.3f} or under)" if most is not None else ""
    return out + (f", and above {top:.3f} a margin covers every value the metric takes" if top is not None else "")


def _rate_items(off: int, n: int, total: int, such: str = "such answers") -> tuple[int | None, str]:
    """Under the 10-answer rule, k = ``off`` of the ``n`` answers off the most common one: about ceil(10 n / k)
    items would hold 10 such answers at this run's rate (at least n + 1, at most the task's ``total``: all of them
    give the exact value, the rule then no guard of the task's own); with k = 0, no estimate. ``such``: the answers'
    words (the note before names them, or not). Never below :data:`FLOOR` (k < n). (the items, the words)"""
    need = MIN_ANSWERS
    if off <= 0:
        return None, (f"no answer off the most common one yet: no estimate of the items that would give {need} "
                      f"{such}")
    est = -(-need * n // off)  # ceil, in integers
    if est > total:
        return total, (f"about {est:,} items would give {need} {such} at this run's rate, more than the task's "
                       f"{total}: all {total} would give its exact value")
    return max(est, n + 1), f"about {max(est, n + 1):,} items would give {need} {such} at this run's rate"


def _no_draw(n: int, total: int) -> str:
    """Why a --limit run's verdict on the task's value is cannot tell: its items are the task's first, no draw."""
    return (f"the run's {n} items are the task's first ({opt('limit')}), no draw of its {total}: the task's value is "
            f"not judged from them ({opt('sample', 'N')} draws them)")


def _whole_task(total: int) -> tuple[int, str]:
    """No rate to scale (a NaN metric: a constant side): more items help only where the constant side varies, all
    ``total`` give the exact value (the items grow_advice offers, said as the whole task's). (items, words)"""
    return total, (f"more items help only if the constant side varies over them: all {total} of the task's items "
                   "give its exact value")


def _fewest(n: int, total: int, correlation: bool) -> int:
    """A --limit run's items when a draw of them would have no estimate of its own (:func:`judge`): the fewest a
    ``--sample`` run is judged on, its n, and for a correlation never below the 10-answer rule's :data:`FLOOR`
    (at most the task's ``total``)."""
    return min(max(n, FLOOR if correlation else 1), total)


def _small_sample(width: float, published: float, neighbours: tuple[tuple[str, float], ...], n: int
                  ) -> tuple[str, ...]:
    """The warning when the interval is wider than the gap to the nearest published neighbour."""
    near = sorted((abs(v - published), name, v) for name, v in neighbours if math.isfinite(v))
    if not near or width <= near[0][0]:
        return ()
    gap, name, v = near[0]
    return (f"small sample: the 90% CI, {width:.2f} wide at {n} items, is wider than the gap {gap:.2f} from this "
            f"published value ({published:.2f}) to the nearest other model's ({name} {v:.2f}): at this size a run "
            "cannot tell those two models apart, whatever its verdict on this row",)


def words(check) -> str:
    """A recorded published check (``record.PublishedCheck``)'s verdict in a few words (every item scored:
    ``differs by -0.459``, the exact difference); a run of an earlier version, with no verdict recorded:
    whether the value is inside its 95% CI."""
    if not check.comparable:
        return "not comparable"
    if check.verdict is None:
        return {True: "inside the 95% CI", False: "outside the 95% CI", None: "no 95% CI"}[check.inside]
    m = f"{check.margin:g}" if check.margin is not None else "?"
    exact = check.n is not None and check.items_total is not None and check.n >= check.items_total
    if check.verdict == DIFFERS and exact and check.difference is not None:
        return f"differs by {check.difference:+.3f}"
    return {REPRODUCED: f"reproduced within {m}", DIFFERS: f"differs by more than {m}",
            UNSETTLED: f"cannot tell yet within {m}", UNSETTLEABLE: f"this task cannot settle {m}",
            UNDEFINED: "cannot tell"}.get(check.verdict, check.verdict)


def said(check) -> tuple[str, ...]:
    """What a recorded check's verdict rests on, as the run's verdict block says it under the verdict's words: its
    figures (the task's 90% interval, or why it cannot tell and the items that would), items like these, warnings."""
    first = check.reasons[0] if check.reasons else ""
    return (first.partition(": ")[2] or first, *check.reasons[1:]) if first else ()


def items_to_grow(published) -> int | None:
    """The items a run's published checks (a ``record.Published``) that `cannot tell yet` would be settled
    with, about: the most any of them asks for (one ``--sample`` serves every task); None when none asks."""
    wanted = [c.items_to_settle for c in (published.checks if published is not None else ())
              if c.verdict in (UNSETTLED, UNDEFINED) and c.items_to_settle]  # cannot tell: --limit's, drawn anew
    return max(wanted, default=None)


def judged_only(check, limit: bool) -> bool:
    """Whether a recorded check's items (``items_to_settle``) are the fewest its verdict is judged on at all, not
    what settles it: a ``cannot tell`` (the 10-answer rule's estimate: :func:`judge`); of a ``--limit`` run
    (``limit``: every verdict ``cannot tell``, its items a draw's), one whose draw would still cannot tell (its
    reason says why, after :data:`DRAWN_CANNOT_TELL`); a draw that would be judged is told the items that settle
    it. The one rule of :func:`grow_advice`'s words."""
    if check.verdict != UNDEFINED or not check.items_to_settle:
        return False
    return not limit or any(DRAWN_CANNOT_TELL in reason for reason in check.reasons[:1])


def grow_advice(published, config, command) -> str:
    """The verdict's next step when it cannot tell yet: the call that scores the items that would settle
    it (``command(m)``: a door's words for it), for a run of ``config`` (a ``record.RunConfig``): a
    ``--sample`` run grows (its items lie inside the larger sample's; only the new ones are scored), a
    ``--limit`` run's items are drawn anew with ``--sample``; "" when nothing would. Items asked by a verdict that
    "cannot tell" (not judged at all: the 10-answer rule's; :func:`judged_only`) are said to judge it, not to settle
    it."""
    from abricot_local.errors import opt

    m = items_to_grow(published)
    sample, limit = getattr(config, "sample", None), getattr(config, "limit", None)
    if m is None or (sample is None and limit is None):
        return ""
    if sample is not None:
        how = f"the run grows to {opt('sample', m)}, keeping the items it holds and scoring only the new ones"
    else:
        how = f"{opt('sample', m)} draws them with the seed, in a new run ({opt('limit')} takes the first ones)"
    asking = [c for c in published.checks if c.items_to_settle == m]
    judged, whole = any(judged_only(c, sample is None) for c in asking), any(getattr(c, "items_total", None) == m for c in asking)
    count = f"all {m} items of the task (its exact value)" if whole else f"about {m} items" + (
        " (the fewest it is judged on at all, not what settles it)" if judged else "")
    why = f"to judge what cannot tell: {count}" if judged else f"to settle what cannot tell yet: {count}"
    return f"{why}; {how}:\n  {command(m)}"
