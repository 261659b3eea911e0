"""The exact interval of a small set's paired difference: what compare's equivalence verdict reads for an accuracy on a
task of at most :data:`MAX_TOTAL` items (ABRICOT's 127), where Tango's score interval narrowed by the
finite-population factor holds the set's difference as little as 84.5% of the time at 90% (bench/coverage.py).

Two runs over n items drawn without replacement from a task's N: b right for the first only, c for the second only.
The set's own difference is D = (B - C) / N, B and C the task's counts. :func:`exact_paired_set_ci` keeps every D (a
multiple of 1 / N) at which neither tail of the observed outcome is below 5%: the outcomes (b', c') ordered by Tango's
score statistic at D (stats._tango_z), their probabilities the multivariate hypergeometric's, each tail maximised
over every B and C with B - C = D N (the changed answers B + C are not known). Whatever B and C are, the interval
holds D with probability 90% or more, by construction; on 127 items it is 1.03-1.21x as wide as Tango's with the
correction (bench/README.md, "Coverage"). Its cost grows as N^2 n^2 (0.05 s at 40 of 127 items, 0.7 s at 126,
1.3 s at 149 of 150 on 2 cores), hence the bound; :func:`paired_set_ci` picks the interval by the task's size."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from abricot_local.analysis import stats

MAX_TOTAL = 150  # the largest task whose paired interval is exact (above it: Tango's with the correction)


def paired_set_ci(b: int, c: int, n: int, total: int, level: float = 0.90) -> tuple[float, float]:
    """The ``level`` interval of a task's own paired difference (b and c of n items of its ``total``): exact up to
    :data:`MAX_TOTAL` items (:func:`exact_paired_set_ci`), else Tango's score interval narrowed by the
    finite-population factor (stats.paired_score_ci with stats.fpc)."""
    if total <= MAX_TOTAL:
        return exact_paired_set_ci(b, c, n, total, level)
    return stats.paired_score_ci(b, c, n, level=level, factor=stats.fpc(n, total))


def exact_paired_set_ci(b: int, c: int, n: int, total: int, level: float = 0.90) -> tuple[float, float]:
    """The exact ``level`` interval of the set's D = (B - C) / N (``total`` = N) from ``b`` and ``c`` of ``n`` items
    drawn from it (see the module's text); (NaN, NaN) with no item, the point at n = N."""
    if n <= 0 or total < n:
        return (float("nan"), float("nan"))
    if min(b, c) < 0 or b + c > n:
        raise ValueError(f"{b} and {c} changed answers of {n} items")
    if n == total:
        return ((b - c) / total, (b - c) / total)
    tail = (1.0 - level) / 2.0
    grid_b, grid_c = np.meshgrid(np.arange(n + 1.0), np.arange(n + 1.0), indexing="ij")
    inside = grid_b + grid_c <= n
    ob, oc = grid_b[inside], grid_c[inside]  # every outcome
    seen = int(np.flatnonzero((ob == b) & (oc == c))[0])
    counts = np.arange(total + 1)
    log_b, log_c = _log_comb(counts, ob), _log_comb(counts, oc)  # log C(B, b') and C(C, c'), every count and outcome
    log_r = _log_comb(counts, n - ob - oc) - _log_comb(np.array([total]), np.array([n]))[0, 0]
    held = []
    for d in range(-total, total + 1):
        big_b = np.arange(max(0, d), (total + d) // 2 + 1)
        if not len(big_b):
            continue
        z = _tango_z(ob, oc, n, d / total)
        upper, lower = z >= z[seen], z <= z[seen]
        p = np.exp(log_b[big_b] + log_c[big_b - d] + log_r[total - 2 * big_b + d])
        if (p @ upper).max() > tail and (p @ lower).max() > tail:
            held.append(d)
    return (min(held) / total, max(held) / total)


def _log_comb(a: np.ndarray, k: np.ndarray) -> np.ndarray:
    """log C(a, k) for each count ``a`` (rows) and outcome count ``k`` (columns); -inf where k > a."""
    a, k = np.broadcast_arrays(np.asarray(a, dtype=float)[:, None], np.asarray(k, dtype=float)[None, :])
    ok = k <= a
    rest = np.where(ok, a - k, 0.0)
    return np.where(ok, gammaln(a + 1.0) - gammaln(np.where(ok, k, 0.0) + 1.0) - gammaln(rest + 1.0), -np.inf)


def _tango_z(ob: np.ndarray, oc: np.ndarray, n: int, delta: float) -> np.ndarray:
    """stats._tango_z of every outcome (b, c) at once."""
    big_b = -ob - oc + (2 * n - ob + oc) * delta
    big_c = -oc * delta * (1.0 - delta)
    q = (np.sqrt(np.maximum(0.0, big_b * big_b - 8.0 * n * big_c)) - big_b) / (4.0 * n)
    var, num = n * (2.0 * q + delta * (1.0 - delta)), ob - oc - n * delta
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, num / np.sqrt(np.where(var > 0, var, 1.0)), np.sign(num) * np.inf)
    return np.where((var <= 0) & (num == 0), 0.0, z)
