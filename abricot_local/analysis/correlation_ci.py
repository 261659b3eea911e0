"""A correlation's interval for the task's own value, from the n of its N items scored (published.method 5): Fisher's
z with the jackknife's spread (never below normal theory's 1/sqrt(n-3)), narrowed by the finite-population
correction, its centre moved down by the jackknife's bias and by a Cornish-Fisher term for z's skewness drawn without
replacement (the jackknife's, scaled by (N-2n)/(N-2)), Student's t quantile on n - 1 degrees of freedom; read only
once each vector has metrics.MIN_CORRELATION_ITEMS items off its most common value (metrics.interval_read, the rule
the run's own CI follows: a near-constant model's r is made by a handful of items, which neither resampling nor
normal theory describes), and not where r is +-1 with an item left out (:func:`jackknife_ci`: the n items on a line,
or all but one: one item makes r, no spread describes it). No resampling: the interval is the items' own, the same
for every seed. A paired difference of two: +- z x the paired bootstrap's spread, narrowed alike (unchanged). The
--until-settled rule's (sequential.py) and the fixed-n published verdict's (baselines.evidence).
:func:`like_interval` is the same construction for items like these (no correction, iid skewness).

Method 3 (up to reproduction.METHOD 4) took the spread and z's skewness from the bootstrap's moments: near r = 1 a
few resamples with r = 1 (z clipped at atanh(1 - 1e-12) = 14.2) made them, and the interval for r = 0.96 over 30
items could lie wholly below it. bench/correlation_coverage.py measures both (`--method all`). Every sum is
math.fsum's or of integers (exact, order-free), every transcendental math's, one element at a time: the numbers are
the same on every x86 CPU (numpy's vectorised atanh/tanh are not)."""

from __future__ import annotations

import math

import numpy as np

from abricot_local import metrics
from abricot_local.analysis import stats

_EDGE = 1.0 - 1e-12  # |r| at or past this is +-1: no Fisher z
ON_A_LINE = ("r is +-1 over the items scored, or with one of them left out (the items on a line, or all but one): "
             "one item makes r and no spread describes it; a correlation's interval is not read yet")


def correlation_ci(stat: str, v: list[np.ndarray], n: int, total: int, lvl: float, seed: int, *, paired: bool = False):
    """A correlation (a row's) or the difference of two (a pair's) over the n items, and its interval at ``lvl`` for
    the task's own value, or why there is none. One correlation's: :func:`jackknife_ci` (``seed`` unused). A pair's:
    +- z x the bootstrap's standard deviation (metrics.N_BOOT resamples, ``seed``), narrowed by the finite-population
    correction."""
    f, w = metrics.ROW_STATS[stat], [x.astype(float) for x in v]
    value = float(f(w[0], w[1]) - (f(w[2], w[3]) if paired else 0.0))
    if math.isnan(value):
        return None, None, "the correlation is undefined (a constant vector)"
    off = too_few_off(stat, w)
    if off is not None:
        return value, None, (f"fewer than {metrics.MIN_CORRELATION_ITEMS} items away from a vector's most common "
                             f"value ({off}): a correlation's interval is not read yet")
    if not paired:
        ci, why = jackknife_ci(stat, w[0], w[1], value, lvl, total)
        return value, ci, why
    idx = np.random.default_rng(seed).integers(0, n, size=(metrics.N_BOOT, n))
    boot = f(w[0][idx], w[1][idx]) - f(w[2][idx], w[3][idx])
    boot = boot[~np.isnan(boot)]
    se = float(np.std(boot, ddof=1)) if len(boot) > 1 else 0.0
    if not se > 0:
        return value, None, "the same in every resample: the bootstrap has no spread"
    half = metrics.z_of(lvl) * se * math.sqrt(stats.fpc(n, total))
    return value, (value - half, value + half), ""


def too_few_off(stat: str, vectors) -> int | None:
    """Under the 10-answer rule (metrics.interval_read, the rule the run's own CI follows, metrics.with_ci: one
    rule): the items off the most common value of the vector that has fewest (k, under
    metrics.MIN_CORRELATION_ITEMS); None when the interval is read."""
    if metrics.interval_read(stat, *vectors):
        return None
    return min(metrics.off_mode(x) for x in vectors)


def jackknife_ci(stat: str, x: np.ndarray, y: np.ndarray, r: float, lvl: float, total: int | None):
    """One correlation ``r`` (``stat``'s over x and y, n items) and its interval at ``lvl`` on Fisher's z, and why
    there is none: ``total`` N, the task's own value (the finite-population correction f = (N-n)/(N-1); at n = N the
    value itself); None, items like these (f = 1). With z_i = atanh r_i of the n correlations with item i left out
    (the jackknife) and d_i = mean(z_.) - z_i: the spread se = sqrt((n-1)/n sum d_i^2), floored by normal theory's
    1/sqrt(n-3), s = se sqrt(f); the centre atanh r less the jackknife's bias (n-1)(mean(z_.) - atanh r) x f and less
    Cornish and Fisher's s g (t^2 - 1)/6, g the jackknife's skewness of z (mean d^3 / mean(d^2)^1.5 / sqrt(n)) drawn
    without replacement (x (N-2n)/(N-2)/sqrt(f)); the half-width t s, t Student's quantile on n - 1 degrees of
    freedom. None (:data:`ON_A_LINE`) where r or an r_i is +-1: there one item makes r (z infinite), no spread."""
    n = len(x)
    fp = stats.fpc(n, total)
    if not fp > 0:  # n = N: the set's own value
        return (r, r), ""
    left = _left_out(stat, x, y)
    if n <= 3 or not abs(r) < _EDGE or not all(abs(v) < _EDGE for v in left):  # also NaN
        return None, ON_A_LINE
    from scipy.special import stdtrit

    zj = [math.atanh(v) for v in left]
    m = math.fsum(zj) / n
    d = [m - v for v in zj]
    s2 = math.fsum(e * e for e in d)
    se = max(math.sqrt((n - 1) / n * s2), 1.0 / math.sqrt(n - 3))
    g = math.fsum(e * e * e for e in d) / n / (s2 / n) ** 1.5 / math.sqrt(n) if s2 > 0 else 0.0
    rf = math.sqrt(fp)
    if total is not None and total > 2:
        g *= (total - 2 * n) / (total - 2) / rf
    q, s, z = float(stdtrit(n - 1, 1.0 - (1.0 - lvl) / 2.0)), se * rf, math.atanh(r)
    centre = z - (n - 1) * (m - z) * fp - s * g * (q * q - 1.0) / 6.0
    return (math.tanh(centre - q * s), math.tanh(centre + q * s)), ""


def like_interval(stat: str, a, b, *, seed: int, level: float) -> list[float]:
    """The 90% interval of items like these (whether the model generalises) a published verdict reads
    (reproduction.judge's ``ci90``): a correlation's :func:`jackknife_ci` without the correction ([NaN, NaN] where
    it has none: r undefined or on a line); an accuracy's metrics.interval (Wilson's). Read only where
    metrics.interval_read reads one (the verdict's ``why`` says so otherwise): computed regardless. The percentile
    bootstrap it replaces (metrics.bootstrap_ci, the run's recorded CI) held r 86-88.5% of the time at 90%."""
    if stat not in metrics.CORRELATIONS:
        return metrics.interval(stat, a, b, seed=seed, level=level)
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    r = float(metrics.ROW_STATS[stat](x, y)) if len(x) > 1 else math.nan
    ci, _ = jackknife_ci(stat, x, y, r, level, None) if r == r else (None, "")
    return [float(c) for c in ci] if ci else [math.nan, math.nan]


def _left_out(stat: str, x: np.ndarray, y: np.ndarray) -> list[float]:
    """The n correlations with one item left out. Pearson's from the sums: over centred a and b (every sum
    math.fsum's), r_i = (Sab - c a_i b_i) / sqrt((Saa - c a_i^2)(Sbb - c b_i^2)), c = n/(n-1); Spearman's from the
    n - 1 items ranked again (each rank less 1 above the item left out, 1/2 at its ties), doubled to integers, so
    that every sum is exact. Elementwise arithmetic and sqrt only (IEEE: the same on every CPU)."""
    n = len(x)
    if stat == "spearman":
        return [_integer_r(u, v) for u, v in zip(_ranks_left_out(x), _ranks_left_out(y))]
    a, b = x - math.fsum(x) / n, y - math.fsum(y) / n
    saa, sbb, sab, c = math.fsum(a * a), math.fsum(b * b), math.fsum(a * b), n / (n - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (sab - c * a * b) / np.sqrt((saa - c * a * a) * (sbb - c * b * b))
    return [float(v) for v in r]


def _ranks_left_out(x: np.ndarray) -> np.ndarray:
    """(n, n - 1): row i twice the average ranks of the items but i among themselves (integers)."""
    from scipy.stats import rankdata

    n, twice = len(x), 2.0 * rankdata(x)
    drop = twice[None, :] - 2.0 * (x[None, :] > x[:, None]) - 1.0 * (x[None, :] == x[:, None])
    return drop[~np.eye(n, dtype=bool)].reshape(n, n - 1)


def _integer_r(u: np.ndarray, v: np.ndarray) -> float:
    """Pearson's r of two integer-valued vectors: each sum exact, whatever its order."""
    k = len(u)
    su, sv = float(u.sum()), float(v.sum())
    num = k * float((u * v).sum()) - su * sv
    den = (k * float((u * u).sum()) - su * su) * (k * float((v * v).sum()) - sv * sv)
    return num / math.sqrt(den) if den > 0 else math.nan


def fisher(r: float) -> float:
    return math.atanh(max(-_EDGE, min(_EDGE, r)))
