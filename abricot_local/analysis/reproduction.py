"""Did a run reproduce a published value? The verdict with a margin, as `compare --margin` judges two runs.

A published value p is a constant, so the 90% interval of run - published is the run's own 90%
bootstrap interval of the metric, shifted by p. Against the margin M (the task's declared
``Task.margins`` for the metric, else ``Task.default_margin``; ``run --margin`` overrides it):

- ``reproduced``: the interval lies inside (-M, M): equal within M (two one-sided tests at 5%);
- ``differs``: the interval lies wholly beyond M on one side: the run differs by more than M;
- ``cannot tell yet``: the interval holds a bound of +-M; with about how many items would settle it
  if the difference stayed what it is (stats.items_to_settle: the interval's spread scaled as 1/sqrt(n));
- ``cannot settle``: even every item of the task could not: the items needed are more than the task
  holds. The full task's 90% interval would be about +-``settles`` (h) wide: at a difference d it
  settles a margin above about |d| + h (reproduced) or under |d| - h (differs);
- ``cannot tell``: no finite interval (a constant prediction vector, a NaN metric).

A small-sample warning is added whenever the run's 90% interval is wider than the gap between the
published value and its nearest published neighbour (the same source, task and metric): at that
width the run cannot tell the published models apart. Pure: no run folder, no task is read here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from abricot_local.analysis import stats

REPRODUCED, DIFFERS, UNSETTLED, UNSETTLEABLE, UNDEFINED = (
    "reproduced", "differs", "cannot tell yet", "cannot settle", "cannot tell")
KINDS = (REPRODUCED, DIFFERS, UNSETTLED, UNSETTLEABLE, UNDEFINED)


@dataclass(frozen=True)
class Verdict:
    """One published value against a run: the kind (above) and what decided it."""

    kind: str
    margin: float
    difference: float  # run - published
    ci90: tuple[float, float]  # 90% interval of run - published
    n: int  # items the run scored
    total: int  # items the whole task holds
    items: int | None = None  # cannot tell yet: about how many items would settle it
    settles: float | None = None  # half-width of the full task's 90% interval: the margin it can settle
    warnings: tuple[str, ...] = ()

    @property
    def reasons(self) -> tuple[str, ...]:
        """The verdict in words, then its warnings (what results.json records as ``reasons``)."""
        m = f"{self.margin:g}"
        if self.kind == UNDEFINED:
            return ("cannot tell: the run's metric has no finite 90% interval (a constant vector)", *self.warnings)
        lo, hi = self.ci90
        figures = f"run - published {self.difference:+.3f}, 90% CI [{lo:+.3f}, {hi:+.3f}], {self.n} items"
        if self.kind == REPRODUCED:
            head = f"reproduced within {m}: {figures}, inside +-{m}"
        elif self.kind == DIFFERS:
            head = f"differs by more than {m}: {figures}, wholly beyond +-{m}"
        elif self.kind == UNSETTLED:
            head = (f"cannot tell yet within {m}: {figures}; about {self.items:,} of the task's {self.total} items "
                    "would settle it")
        else:
            whole = f"all {self.total}" if self.n >= self.total else f"even all {self.total}"
            d, h = abs(self.difference), self.settles
            under = f" (or, differing, under {d - h:.2f})" if d - h >= 0.005 else ""
            head = (f"this task cannot settle +-{m}: {figures}; {whole} items give a 90% CI of about +-{h:.2f}: "
                    f"at this difference it settles margins of about {d + h:.2f} or more{under}")
        return (head, *self.warnings)

    @property
    def line(self) -> str:
        return self.reasons[0]


def _bad(*values: float) -> bool:
    return any(v is None or not math.isfinite(v) for v in values)


def judge(value: float | None, ci90: tuple[float, float] | None, published: float, margin: float, *, n: int,
          total: int, neighbours: tuple[tuple[str, float], ...] = ()) -> Verdict:
    """The verdict on ``published`` of a run whose metric is ``value`` with the 90% bootstrap interval
    ``ci90`` over ``n`` items of a task of ``total``; ``neighbours``: the other published (model, value)
    of the same source, task and metric (the small-sample warning)."""
    total = max(total, n)
    if value is None or ci90 is None or _bad(value, *ci90):
        nan = float("nan")
        diff = nan if value is None else value - published
        return Verdict(UNDEFINED, margin, diff, (nan, nan), n, total)
    diff = value - published + 0.0
    lo, hi = ci90[0] - published + 0.0, ci90[1] - published + 0.0
    warnings = _small_sample(hi - lo, published, neighbours, n)
    if -margin < lo and hi < margin:
        return Verdict(REPRODUCED, margin, diff, (lo, hi), n, total, warnings=warnings)
    if lo > margin or hi < -margin:
        return Verdict(DIFFERS, margin, diff, (lo, hi), n, total, warnings=warnings)
    half = (hi - lo) / 2.0
    settles = half * math.sqrt(n / total) if n else math.inf
    gap = abs(abs(diff) - margin)
    items = stats.items_to_settle(n, gap, ci90=(lo, hi)) if gap > 0 else stats.MAX_ITEMS
    if items > total or n >= total:
        return Verdict(UNSETTLEABLE, margin, diff, (lo, hi), n, total, settles=settles, warnings=warnings)
    return Verdict(UNSETTLED, margin, diff, (lo, hi), n, total, items=max(items, n + 1), settles=settles,
                   warnings=warnings)


def _small_sample(width: float, published: float, neighbours: tuple[tuple[str, float], ...], n: int
                  ) -> tuple[str, ...]:
    """The warning when the interval is wider than the gap to the nearest published neighbour."""
    near = sorted((abs(v - published), name, v) for name, v in neighbours if math.isfinite(v))
    if not near or width <= near[0][0]:
        return ()
    gap, name, v = near[0]
    return (f"small sample: the 90% CI, {width:.2f} wide at {n} items, is wider than the gap {gap:.2f} to the nearest "
            f"published value ({name} {v:.2f}): the run cannot tell those models apart",)


def words(check) -> str:
    """A recorded published check (``record.PublishedCheck``)'s verdict in a few words; a run of an earlier
    version, with no verdict recorded: whether the value is inside its 95% CI."""
    if not check.comparable:
        return "not comparable"
    if check.verdict is None:
        return {True: "inside the 95% CI", False: "outside the 95% CI", None: "n/a"}[check.inside]
    m = f"{check.margin:g}" if check.margin is not None else "?"
    return {REPRODUCED: f"reproduced within {m}", DIFFERS: f"differs by more than {m}",
            UNSETTLED: f"cannot tell yet within {m}", UNSETTLEABLE: f"this task cannot settle {m}",
            UNDEFINED: "cannot tell (no finite CI)"}.get(check.verdict, check.verdict)
