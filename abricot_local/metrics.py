"""Pure metric functions (numpy/scipy) and their confidence intervals.

An accuracy (a proportion of items) gets Wilson's score interval (:func:`wilson`): it accounts for
the items not seen, so 20 right answers of 20 give [0.84, 1], not [1, 1]. A correlation gets a
percentile bootstrap interval (:func:`bootstrap_ci`). A correlation over a constant vector is NaN
(never an exception); callers report it with a warning that names the side that is constant
(:func:`constant_words`). A correlation whose vectors do not each have :data:`MIN_CORRELATION_ITEMS` items off
their most common value (:func:`interval_read`) is recorded with its value and no interval ([NaN, NaN]): a
near-constant side's r is made by a handful of items, which neither the bootstrap nor normal theory describes
(the guard of analysis/correlation_ci.py, the same rule); callers say so (:func:`few_words`).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from abricot_local.errors import ResultsError, opt

N_BOOT = 1000
CI_LEVEL = 0.95
CORRELATIONS = ("pearson", "spearman")
# a correlation's interval is read only once each vector has this many items off its most common value (the run's
# CI, the published verdict's and --until-settled's: analysis/correlation_ci.py)
MIN_CORRELATION_ITEMS = 10
# the values each statistic of ROW_STATS takes: a margin that covers them from a published value cannot fail
# (analysis/reproduction.covered)
BOUNDS = {"accuracy": (0.0, 1.0), "pearson": (-1.0, 1.0), "spearman": (-1.0, 1.0)}


def accuracy(pred, gold) -> float:
    pred, gold = np.asarray(pred), np.asarray(gold)
    return float(np.mean(pred == gold)) if len(pred) else float("nan")


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r along the last axis; NaN where either side is constant."""
    x = x - x.mean(axis=-1, keepdims=True)
    y = y - y.mean(axis=-1, keepdims=True)
    den = np.sqrt((x * x).sum(axis=-1) * (y * y).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (x * y).sum(axis=-1) / den
    r = np.where(den > 0, r, np.nan)
    return np.clip(r, -1.0, 1.0)


def pearson(x, y) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2:
        return float("nan")
    return float(_pearson_rows(x, y))


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy import stats  # (half a second to import: `run --help`, `tasks` and an accuracy task need none)

    return _pearson_rows(stats.rankdata(x, axis=-1), stats.rankdata(y, axis=-1))


def spearman(x, y) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2:
        return float("nan")
    return float(_spearman_rows(x, y))


def _accuracy_rows(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    return (pred == gold).mean(axis=-1)


ROW_STATS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "accuracy": _accuracy_rows,
    "pearson": _pearson_rows,
    "spearman": _spearman_rows,
}


def bootstrap_ci(
    stat: str, a, b, *, seed: int, n_boot: int = N_BOOT, level: float = CI_LEVEL
) -> list[float]:
    """Percentile CI of ``stat(a, b)`` over items resampled with replacement.

    Resamples where the statistic is undefined (a constant vector) are left
    out; if every one is, the interval is [NaN, NaN].
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = len(a)
    if n == 0:
        return [float("nan"), float("nan")]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    values = ROW_STATS[stat](a[idx], b[idx])
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return [float("nan"), float("nan")]
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(values, [tail, 100.0 - tail])
    return [float(lo), float(hi)]


def z_of(level: float) -> float:
    """The two-sided normal quantile of a confidence ``level`` (1.96 at 0.95, 1.645 at 0.90): scipy.stats'
    ``norm.isf`` bit for bit (it is -ndtri, scaled by 1 and shifted by 0), from scipy.special, which a run loads
    anyway, where scipy.stats takes half a second more."""
    from scipy.special import ndtri

    return float(-ndtri((1.0 - level) / 2.0))


def wilson(k: int, n: int, *, level: float = CI_LEVEL, fpc: float = 1.0) -> tuple[float, float]:
    """Wilson's (1927) score interval of the proportion ``k / n``: the proportions p whose score test
    |k/n - p| / sqrt(p (1 - p) / n) stays under z. ``fpc``: the finite-population factor
    (N - n) / (N - 1) that scales the variance when the n items are drawn from a set of N and the
    question is that set's own proportion (1: items like these; 0: every item of the set, the point
    itself). (NaN, NaN) with no item."""
    if n <= 0:
        return (math.nan, math.nan)
    p = k / n
    z2 = z_of(level) ** 2 * max(0.0, min(1.0, fpc))
    den = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / den
    half = math.sqrt(z2) / den * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def interval(stat: str, a, b, *, seed: int, level: float = CI_LEVEL) -> list[float]:
    """The CI of ``stat(a, b)`` a run records: an accuracy's Wilson score interval, a correlation's
    percentile bootstrap (``seed``, :data:`N_BOOT` resamples)."""
    if stat == "accuracy":
        a, b = np.asarray(a), np.asarray(b)
        return list(wilson(int(np.sum(a == b)), len(a), level=level))
    return bootstrap_ci(stat, a, b, seed=seed, level=level)


def off_mode(v) -> int:
    """How many of ``v``'s items are away from its most common value (0 with none)."""
    v = np.asarray(v)
    return len(v) - int(np.unique(v, return_counts=True)[1].max()) if len(v) else 0


def interval_read(stat: str, *vectors) -> bool:
    """Whether ``stat``'s interval over ``vectors`` is read: an accuracy's always, a correlation's (or a difference
    of two) once each vector has :data:`MIN_CORRELATION_ITEMS` items off its most common value."""
    return stat not in CORRELATIONS or min(off_mode(v) for v in vectors) >= MIN_CORRELATION_ITEMS


def with_ci(stat: str, a, b, *, seed: int) -> tuple[float, list[float]]:
    """The statistic and its 95% CI (:func:`interval`) as a run records them: [NaN, NaN] for a correlation whose
    interval is not read (:func:`interval_read`), its value kept."""
    point = {"accuracy": accuracy, "pearson": pearson, "spearman": spearman}[stat](a, b)
    if not interval_read(stat, a, b):
        return point, [float("nan"), float("nan")]
    return point, interval(stat, a, b, seed=seed)


def with_ci_of(inp, *, seed: int) -> dict:
    """``{name: value, name_ci95: CI}`` of a task's ``MetricInput`` (tasks/base.py)."""
    value, ci = with_ci(inp.stat, inp.x, inp.y, seed=seed)
    return {inp.name: value, f"{inp.name}_ci95": ci}


def constant_words(inp, samples: Sequence = ()) -> str:
    """Why a correlation of a task's ``MetricInput`` (``x`` the prediction side, ``y`` the gold side) over
    ``samples`` (``record.Sample``s, in its order) is undefined, in words: which side is the same for every item
    (the model's answer named where every sample has one answer; the gold labels' where every sample has one
    gold), or too few items; "" when neither side is constant."""
    x, y = np.asarray(inp.x), np.asarray(inp.y)
    if len(x) < 2:
        return f"{len(x)} item(s): a correlation needs 2 or more"
    out = []
    if np.all(x == x[0]):
        answers = {(s.pred, s.pred_label) for s in samples}
        if len(answers) == 1:
            s = samples[0]
            said = s.pred_label if s.pred_label is not None else s.choices[s.pred] if s.choices else s.pred
            out.append(f"the model gave the same answer, {said!r}, to every item")
        else:
            out.append(f"the model's side of {inp.name} is the same ({float(x[0]):g}) for every item")
    if np.all(y == y[0]):
        golds = {(s.gold, s.gold_label) for s in samples}
        if len(golds) == 1:
            s = samples[0]
            out.append(f"the gold labels are constant ({s.gold_label if s.gold_label is not None else s.gold!r})")
        else:
            out.append(f"the gold side of {inp.name} is the same ({float(y[0]):g}) for every item")
    return " and ".join(out)


def _side(values: np.ndarray, labels: list, name: str, model: bool) -> tuple[str, str]:
    """One side's words for :func:`few_words`: what its items off the most common value are, and what the rule counts
    (its unit, "such ..."). The side is named as the samples' answers (gold labels) where it is those one to one
    (``labels``: theirs). A side whose values all differ (a continuous score) is said so, never as near-constant: no
    value is more common, and 10 items off one value need 11 items."""
    n, off = len(values), off_mode(values)
    s, side = "" if off == 1 else "s", f"{name}'s {'model' if model else 'gold'} side"
    named = labels and len(set(labels)) == len(set(values.tolist())) == len(set(zip(labels, values.tolist())))
    unit = ("answers" if model else "gold labels") if named else "items"
    if n > 1 and off == n - 1:  # every value different
        what = f"{n} {unit}, all different" if named else f"{n} items whose values of {side} all differ"
        return (f"{what} ({off} off any one; {MIN_CORRELATION_ITEMS} off one need {MIN_CORRELATION_ITEMS + 1} "
                "items)"), f"{unit} off any one value"
    same = f"({n - off} of {n} the same)"
    if named and model:
        return f"{off} answer{s} off the model's most common one {same}", "such answers"
    if named:
        return f"{off} gold label{s} off their most common one {same}", "such gold labels"
    return f"{off} item{s} off the most common value of {side} {same}", "such items"


def few_words(inp, samples: Sequence = ()) -> str:
    """Why a correlation of a task's ``MetricInput`` (``x`` the prediction side, ``y`` the gold side) over ``samples``
    (``record.Sample``s, in its order) is recorded without an interval (:func:`interval_read`), in words naming what
    it rests on; "" when its interval is read, or when it is undefined (a constant side: :func:`constant_words`)."""
    x, y = np.asarray(inp.x, dtype=float), np.asarray(inp.y, dtype=float)
    if inp.stat not in CORRELATIONS or len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]) \
            or interval_read(inp.stat, x, y):
        return ""
    whole = len(samples) == len(x)
    sides = [_side(v, [getattr(s, field) for s in samples] if whole else [], inp.name, model)
             for v, model, field in ((x, True, "pred"), (y, False, "gold")) if off_mode(v) < MIN_CORRELATION_ITEMS]
    such = sides[0][1] if len(sides) == 1 else "items off each side's most common value"
    return (f"{inp.name} rests on {' and '.join(w for w, _ in sides)}: its value is shown, its interval is not read "
            f"below {MIN_CORRELATION_ITEMS} {such}")


def require_finite(samples: Sequence, task: str) -> None:
    """A metric over log-probs that are NaN, infinite or missing is refused, naming the items
    (NaN would otherwise win or lose every argmax silently); ``samples``: ``record.Sample``s."""
    bad = []
    for s in samples:
        lps = s.logprobs
        if not isinstance(lps, (list, tuple)) or not lps or not all(
                isinstance(x, (int, float)) and math.isfinite(x) for x in lps):
            bad.append(str(s.id))
    if bad:
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise ResultsError(f"task {task}: {len(bad)} sample(s) hold non-finite or missing log-probs "
                           f"({shown}); no metric is computed over them. Re-score with a sound model/build.")


def undefined(inputs, samples: Sequence) -> dict[str, str]:
    """Each correlation among a task's metric ``inputs`` that is undefined (NaN) over ``samples``: which side is
    constant (:func:`constant_words`), and the task's correlations still defined over them, with their values (a
    score read from the model's probabilities varies where its answer does not)."""
    values = {inp.name: float(ROW_STATS[inp.stat](np.asarray(inp.x, float), np.asarray(inp.y, float)))
              if len(inp.x) > 1 else float("nan") for inp in inputs if inp.stat != "accuracy"}
    defined = [f"{name} ({v:+.3f})" for name, v in values.items() if v == v]
    also = (f"; the task's {', '.join(defined)} {'is' if len(defined) == 1 else 'are'} defined over the same items "
            "(neither side constant)") if defined else ""
    return {inp.name: (constant_words(inp, samples) or "a constant vector") + also
            for inp in inputs if inp.name in values and values[inp.name] != values[inp.name]}


def covered(published: float, margin: float, bounds: tuple[float, float] | None) -> str:
    """Why a verdict at ``margin`` on ``published`` cannot fail, or "": a margin beyond how far both ``bounds`` (the
    values the metric takes, :data:`BOUNDS`; None: not known) lie from it holds every value a run could give (one
    rule, :func:`covered_difference`'s too). A verdict reads the open (-M, M), so a margin of exactly that reach can
    still fail (a run at the farther bound); one above it cannot."""
    lo, hi = bounds or (math.nan, math.nan)
    reach = max(published - lo, hi - published)
    if not margin > reach:  # (no bounds: NaN, never covered)
        return ""
    return (f"the margin +-{margin:g} covers every value the metric takes ([{lo:g}, {hi:g}]) from the published "
            f"{published:g}: run - published lies in [{lo - published:+.3g}, {hi - published:+.3g}] whatever the run "
            f"gives: no run could differ by more, so the verdict could not fail (none is said reproduced); a margin of "
            f"{reach:.3g} or under can fail ({opt('margin', 'M')})")


def covered_difference(margin: float, bounds: tuple[float, float] | None) -> str:
    """Why a verdict at ``margin`` on a difference of two values of a metric (a run's minus its reference's: compare's
    equivalence verdicts, a ladder's rungs) cannot fail, or "": :func:`covered` of 0 over the difference's bounds
    [lo - hi, hi - lo] (``bounds``: the values the metric takes, :data:`BOUNDS`; None: not known): a margin of exactly
    hi - lo can still fail (two runs at either bound); one above it cannot."""
    lo, hi = bounds or (math.nan, math.nan)
    width = hi - lo
    if not covered(0.0, margin, (-width, width)):  # (no bounds: NaN, never covered)
        return ""
    return (f"the margin +-{margin:g} covers every value the difference takes ([{-width:g}, {width:g}]: each run's "
            f"value lies in [{lo:g}, {hi:g}]): no run could differ from its reference by more, so the verdict could "
            f"not fail (none is said equivalent or not worse); a margin of {width:g} or under can fail "
            f"({opt('margin', 'M')})")
