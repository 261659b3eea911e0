"""A correlation's interval for the task's own value, from the n of its N items scored (published.method 3): Fisher's
z with the bootstrap's spread (never below normal theory's), narrowed by the finite-population correction, its centre
moved down by Fisher's bias and by a Cornish-Fisher term for z's skewness drawn without replacement, Student's t
quantile on n - 1 degrees of freedom; read only once each vector has metrics.MIN_CORRELATION_ITEMS items off its most
common value (metrics.interval_read, the rule the run's own CI follows: a near-constant model's r is made by a
handful of items, which neither the bootstrap nor normal theory describes); a paired difference of two: +- z x the
paired bootstrap's spread, narrowed alike. The --until-settled rule's (sequential.py) and the fixed-n published
verdict's (baselines.evidence: the narrowed percentile bootstrap it read fell short of 90%, about 85% at 20 items).
bench/correlation_coverage.py measures it (method 2, the plain z interval, missed above the truth up to 6.2% at 90%,
where 5% a side is allowed)."""

from __future__ import annotations

import math

import numpy as np

from abricot_local import metrics
from abricot_local.analysis import stats

_EDGE = 1.0 - 1e-12  # a correlation of +-1 has no Fisher z: clipped inside


def correlation_ci(stat: str, v: list[np.ndarray], n: int, total: int, lvl: float, seed: int, *, paired: bool = False):
    """A correlation (a row's) or the difference of two (a pair's) over the n items, and its interval at ``lvl`` for
    the task's own value, or why there is none. A pair's: +- z x the bootstrap's standard deviation (metrics.N_BOOT
    resamples, ``seed``), narrowed by the finite-population correction. One correlation's, on Fisher's z:
    :func:`_shift`'s centre +- Student's t x that (the bootstrap's standard deviation of z, floored by 1/sqrt(n-3)),
    narrowed alike."""
    f, w = metrics.ROW_STATS[stat], [x.astype(float) for x in v]
    value = float(f(w[0], w[1]) - (f(w[2], w[3]) if paired else 0.0))
    if math.isnan(value):
        return None, None, "the correlation is undefined (a constant vector)"
    off = too_few_off(stat, w)
    if off is not None:
        return value, None, (f"fewer than {metrics.MIN_CORRELATION_ITEMS} items away from a vector's most common "
                             f"value ({off}): a correlation's interval is not read yet")
    idx = np.random.default_rng(seed).integers(0, n, size=(metrics.N_BOOT, n))
    boot = f(w[0][idx], w[1][idx]) - (f(w[2][idx], w[3][idx]) if paired else 0.0)
    boot = boot[~np.isnan(boot)]
    boot = boot if paired else np.arctanh(np.clip(boot, -_EDGE, _EDGE))
    se = float(np.std(boot, ddof=1)) if len(boot) > 1 else 0.0
    se = se if paired or not se > 0 else max(se, 1.0 / math.sqrt(n - 3))  # one r: never below normal theory's
    if not se > 0:
        return value, None, "the same in every resample: the bootstrap has no spread"
    if paired:
        half = metrics.z_of(lvl) * se * math.sqrt(stats.fpc(n, total))
        return value, (value - half, value + half), ""
    centre, half = _shift(stat, w[0], w[1], value, boot, se, n, total, lvl)
    return value, (math.tanh(centre - half), math.tanh(centre + half)), ""


def too_few_off(stat: str, vectors) -> int | None:
    """Under the 10-answer rule (metrics.interval_read, the rule the run's own CI follows, metrics.with_ci: one
    rule): the items off the most common value of the vector that has fewest (k, under
    metrics.MIN_CORRELATION_ITEMS); None when the interval is read."""
    if metrics.interval_read(stat, *vectors):
        return None
    return min(metrics.off_mode(x) for x in vectors)


def _shift(stat: str, x: np.ndarray, y: np.ndarray, r: float, zboot: np.ndarray, se: float, n: int, total: int,
           lvl: float) -> tuple[float, float]:
    """One correlation's centre on Fisher's z and half-width (method 3). With s = se x sqrt(fpc) and q Student's t
    quantile on n - 1 degrees of freedom: the half-width q x s; the centre atanh r less Fisher's bias r/(2(n-1)) x fpc
    (its second-order terms shrink with the variance) and less s x g x (q^2 - 1)/6, Cornish and Fisher's shift of
    both quantiles for z's skewness g drawn without replacement: the linear part's (the items' empirical influence on
    Pearson's r, skewness k/sqrt(n), its third moment scaled by (N-2n)/(N-2)) and the rest's (the bootstrap's
    skewness of z, that linear part removed, scaled like the spread by sqrt(fpc)). Every sum is math.fsum's (exact,
    order-free); Spearman's on the sample's ranks."""
    fp = stats.fpc(n, total)
    if not fp > 0:  # n = N: the set's own value
        return fisher(r), 0.0
    from scipy.special import stdtrit

    q, rf = float(stdtrit(n - 1, 1.0 - (1.0 - lvl) / 2.0)), math.sqrt(fp)
    if stat == "spearman":
        from scipy.stats import rankdata

        x, y = rankdata(x), rankdata(y)
    k = _influence_skew(x, y, r, n)
    g3 = 1.0 if total is None or total <= 2 else (total - 2 * n) / (total - 2) / rf
    m = math.fsum(zboot) / len(zboot)
    d = zboot - m
    m2 = math.fsum(d * d) / len(zboot)
    zskew = math.fsum(d * d * d) / len(zboot) / m2 ** 1.5 if m2 > 0 else 0.0
    g = k * (g3 - rf) + zskew * rf
    s = se * rf
    return fisher(r) - r / (2.0 * (n - 1)) * fp - s * g * (q * q - 1.0) / 6.0, q * s


def _influence_skew(x: np.ndarray, y: np.ndarray, r: float, n: int) -> float:
    """The skewness of the mean of the n items' empirical influence on Pearson's r, x'y' - r (x'^2 + y'^2)/2 over
    standardised x' and y': skewness(influence) / sqrt(n) (0 when the influence is constant)."""
    mx, my = math.fsum(x) / n, math.fsum(y) / n
    dx, dy = x - mx, y - my
    sx, sy = math.sqrt(math.fsum(dx * dx) / n), math.sqrt(math.fsum(dy * dy) / n)
    xs, ys = dx / sx, dy / sy
    psi = xs * ys - r * (xs * xs + ys * ys) / 2.0
    m2 = math.fsum(psi * psi) / n
    return math.fsum(psi * psi * psi) / n / m2 ** 1.5 / math.sqrt(n) if m2 > 0 else 0.0


def fisher(r: float) -> float:
    return math.atanh(max(-_EDGE, min(_EDGE, r)))
