"""The reproduction verdict's rule: an interval of run - published against a margin (:func:`kind`, the one rule of
reproduction.judge and of the --until-settled looks), the margin a door takes (:func:`checked_margin`), and the
margins an interval settles read off it by that rule (:func:`settled_margins`: items like these, every item of the
task scored, where no more items can narrow it). reproduction.py re-exports them; its docstring says the verdicts."""

from __future__ import annotations

import math
import numbers

from abricot_local.errors import UsageError, opt
from abricot_local.metrics import covered

REPRODUCED, DIFFERS, UNSETTLED, UNSETTLEABLE, UNDEFINED = (
    "reproduced", "differs", "cannot tell yet", "cannot settle", "cannot tell")
KINDS = (REPRODUCED, DIFFERS, UNSETTLED, UNSETTLEABLE, UNDEFINED)
GRID = 1000  # settled_margins' figures: margins in thousandths, the decimals the intervals are printed with


def checked_margin(margin, what: str = "") -> float:
    """A margin M (``--margin`` of run and compare; a verdict's) as a float: the one check of every door that takes
    one (run's option, the published verdict, compare, its equivalence verdicts, a --until-settled question): a
    finite number more than 0, in the metric's own units, else a UsageError saying so (``what``: the margin's name,
    default ``--margin``)."""
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not (math.isfinite(margin) and margin > 0):
        raise UsageError(f"{what or opt('margin')} must be a finite number more than 0 (in the metric's own units), "
                         f"got {margin!r}")
    return float(margin)


def kind(lo: float, hi: float, margin: float, rounding: float = 0.0, *, exact: bool = False) -> str | None:
    """The verdict an interval of run - published (the published value's rounding in it) settles against the margin:
    the one rule of reproduction.judge and of the --until-settled looks (sequential). REPRODUCED inside (-M, M),
    DIFFERS wholly beyond it; UNSETTLEABLE where no item can settle it: ``exact`` (every item scored: the interval is
    the exact difference +- the rounding, holding a bound of +-M: "this task cannot settle M", for more items there
    are none, never an open "cannot tell") or, a ``rounding`` given, an interval lying within twice it of a bound (the
    exact value would lie within the rounding of the margin: a look may stop there); else None (cannot tell yet)."""
    if -margin < lo and hi < margin:
        return REPRODUCED
    if lo > margin or hi < -margin:
        return DIFFERS
    if exact or (rounding > 0 and any(b - 2 * rounding <= lo and hi <= b + 2 * rounding for b in (margin, -margin))):
        return UNSETTLEABLE
    return None


def settled_margins(lo: float, hi: float, published: float, bounds: tuple[float, float] | None
                    ) -> tuple[float | None, float | None, float | None]:
    """The margins the interval [``lo``, ``hi``] of run - published (items like these over every item of the task:
    no more items to narrow it) settles, each read by the verdict's own rule at that margin (:func:`kind`; a margin
    covering every value the metric takes from ``published``, metrics.covered over ``bounds``, is cannot tell), on
    the thousandths (:data:`GRID`) the figures are printed in: (the smallest margin it calls reproduced, the largest
    up to which every one is, the largest it calls differing). Reproduced holds from max(|lo|, |hi|), open there, up to
    where a margin covers every value (None: no bounds known, no end); differs under min(|lo|, |hi|), open there, when
    the interval holds no 0. A figure none settles is None."""
    def verdict(k: int) -> str | None:
        m = k / GRID
        return UNDEFINED if covered(published, m, bounds) else kind(lo, hi, m)

    least = top = most = None
    k = max(math.floor(max(-lo, hi) * GRID) - 1, 1)  # below the bound (open there), then up to the first reproduced
    while least is None and verdict(k) != UNDEFINED and k <= max(-lo, hi) * GRID + 2:
        least, k = (k / GRID if verdict(k) == REPRODUCED else None), k + 1
    if least is not None and covered(published, math.inf, bounds):  # the last margin not covering every value
        a, b = round(least * GRID), round(least * GRID) + 1
        while not covered(published, b / GRID, bounds):
            a, b = b, 2 * b
        while b - a > 1:  # covered is monotone in the margin: the last one not covered lies in [a, b)
            a, b = ((a + b) // 2, b) if not covered(published, (a + b) // 2 / GRID, bounds) else (a, (a + b) // 2)
        top = a / GRID
    if lo > 0 or hi < 0:  # differing: from above the bound (open there) down to the first differing
        k = math.ceil(min(abs(lo), abs(hi)) * GRID) + 1
        while most is None and k >= 1 and k >= min(abs(lo), abs(hi)) * GRID - 2:
            most, k = (k / GRID if verdict(k) == DIFFERS else None), k - 1
    return least, top, most
