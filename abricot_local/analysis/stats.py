"""Paired statistics for comparing two runs item by item (pure numpy/scipy).

- :func:`paired_bootstrap`: percentile CI of a difference of statistics; the item
  indices are drawn once per resample and applied to both runs (seeded, recorded): correlations.
- :func:`paired_score_ci`: Tango's (1998) score interval of a difference of paired proportions
  (two runs' accuracies over the same items), from the discordant counts.
- :func:`exact_set_ci`: the exact interval of a set's accuracy K / N from k right of n of its
  items drawn without replacement (Clopper-Pearson's construction over the hypergeometric).
- :func:`fpc`: the finite-population factor (N - n) / (N - 1) of n items drawn from a set of N;
  :func:`narrowed`: an interval narrowed by it around its point; :func:`of_population`: the items
  a sample-size figure needs when the question is the set's own value.
- :func:`mcnemar_exact`: McNemar's exact test, the two-sided binomial test on the
  discordant pairs (p = 1/2); the mid-p is kept too, the exact p is the one reported.
- :func:`williams_t` (reported) and :func:`steiger_z`: two dependent correlations
  sharing one variable (the gold vector), r(a, gold) against r(b, gold), given r(a, b).
- :func:`holm`: Holm's step-down adjusted p-values; :func:`best_group`: the runs not distinguishable from the best.
- :func:`label_kl`: KL(p || q) between two runs' distributions over one item's choices.
- :func:`items_to_settle`: about how many items would tell an observed difference from a margin.
- :func:`min_detectable_difference`: the smallest accuracy difference a paired design
  of n items detects with 80% power at the 5% two-sided level (McNemar's sample-size
  formula solved for the difference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Mapping, Sequence

import numpy as np  # scipy is imported where it is used: half a second that `tasks` and `models` need none of

from abricot_local.core import log_softmax
from abricot_local.errors import UsageError
from abricot_local.metrics import MIN_CORRELATION_ITEMS, z_of  # noqa: F401 - stats.MIN_CORRELATION_ITEMS: the one rule

N_BOOT = 1000
LEVEL = 0.95
ALPHA = 0.05
POWER = 0.80


RowStat = Callable[[np.ndarray, np.ndarray], np.ndarray]  # statistic along the last axis


@dataclass(frozen=True)
class PairedDiff:
    """``stat(a) - stat(b)`` over the same items and its percentile bootstrap CI."""

    a: float
    b: float
    diff: float
    ci: tuple[float, float]
    seed: int
    n_boot: int
    n_valid: int  # resamples where both statistics are defined
    ci90: tuple[float, float] = (float("nan"), float("nan"))  # the same resamples' 90% interval (equivalence)


@dataclass(frozen=True)
class McNemar:
    a_only: int  # items run A has right and run B wrong
    b_only: int  # items run B has right and run A wrong
    p: float  # exact two-sided binomial p on the discordant pairs (the one reported)
    mid_p: float

    @property
    def discordant(self) -> int:
        return self.a_only + self.b_only


@dataclass(frozen=True)
class DependentCorrelation:
    """r(a, y) against r(b, y) over the same n items, given r(a, b)."""

    test: str  # "Williams t" or "Steiger z"
    r_a: float
    r_b: float
    r_ab: float
    n: int
    statistic: float
    df: float | None  # t's degrees of freedom; None for z
    p: float


def paired_bootstrap(stat: RowStat, xa, ya, xb, yb, *, seed: int, n_boot: int = N_BOOT,
                     level: float = LEVEL) -> PairedDiff:
    """``stat(xa, ya) - stat(xb, yb)`` with a percentile CI: each resample draws item indices
    once and applies them to both runs. Resamples where either statistic is undefined (a
    constant vector) are left out; if all are, the CI is [NaN, NaN]."""
    xa, ya, xb, yb = (np.asarray(v, dtype=float) for v in (xa, ya, xb, yb))
    n = len(xa)
    if not len(ya) == len(xb) == len(yb) == n:
        raise UsageError(f"paired vectors differ in length: {len(xa)}, {len(ya)}, {len(xb)}, {len(yb)}")
    nan = float("nan")
    if n == 0:
        return PairedDiff(nan, nan, nan, (nan, nan), seed, n_boot, 0)
    a, b = float(stat(xa, ya)), float(stat(xb, yb))
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    diffs = stat(xa[idx], ya[idx]) - stat(xb[idx], yb[idx])
    diffs = diffs[~np.isnan(diffs)]
    if len(diffs) == 0:
        ci = ci90 = (nan, nan)
    else:
        tail = (1.0 - level) / 2.0 * 100.0
        lo, hi, lo90, hi90 = np.percentile(diffs, [tail, 100.0 - tail, 5.0, 95.0])
        ci, ci90 = (float(lo), float(hi)), (float(lo90), float(hi90))
    return PairedDiff(a, b, a - b, ci, seed, n_boot, int(len(diffs)), ci90)


def fpc(n: int, total: int | None) -> float:
    """(N - n) / (N - 1): the share of a mean's sampling variance left when the n items are drawn
    without replacement from a set of N and the question is the set's own value (0 at n = N: the
    value is the set's; 1: items like these, N unknown or infinite)."""
    if total is None or total <= 1:
        return 1.0
    if n >= total:
        return 0.0
    return (total - n) / (total - 1)


def exact_set_ci(right: int, n: int, total: int, level: float = LEVEL) -> tuple[float, float]:
    """The exact interval of a set's accuracy K / N from ``right`` of ``n`` items drawn without replacement from
    its ``total``: every K whose hypergeometric tails at ``right`` both exceed (1 - ``level``) / 2 (Clopper and
    Pearson's construction over the hypergeometric): it holds K / N with probability ``level`` or more whatever K
    is, where Wilson's narrowed by :func:`fpc` falls short at small n (bench/coverage.py). At n = N, K = ``right``.
    (NaN, NaN) with no item."""
    if n <= 0 or total < n:
        return (math.nan, math.nan)
    tail, lo, hi = (1.0 - level) / 2.0, right, total - (n - right)

    def first(a: int, b: int, ok) -> int:  # the least K in [a, b] with ok(K), ok monotone; b when none before
        while a < b:
            mid = (a + b) // 2
            a, b = (a, mid) if ok(mid) else (mid + 1, b)
        return a

    low = first(lo, hi, lambda k: _tails(right, n, total, k)[0] > tail)
    high = first(lo, hi, lambda k: _tails(right, n, total, k)[1] <= tail)
    high = high if _tails(right, n, total, high)[1] > tail else high - 1
    return low / total, max(low, high) / total


def _tails(right: int, n: int, total: int, k: int) -> tuple[float, float]:
    """P(X >= right) and P(X <= right) for X the items right among n drawn from ``total`` of which ``k`` are."""
    from scipy.special import gammaln

    def lcomb(a, b):
        return gammaln(a + 1.0) - gammaln(b + 1.0) - gammaln(a - b + 1.0)

    j = np.arange(max(0, n - (total - k)), min(n, k) + 1)
    p = np.exp(lcomb(k, j) + lcomb(total - k, n - j) - lcomb(total, n))
    return float(p[j >= right].sum()), float(p[j <= right].sum())


def narrowed(point: float, ci: tuple[float, float], factor: float) -> tuple[float, float]:
    """``ci`` narrowed around ``point`` by sqrt(``factor``) (the finite-population correction of an
    interval's half-widths; :func:`fpc`)."""
    root = math.sqrt(max(0.0, min(1.0, factor)))
    return (point + (ci[0] - point) * root, point + (ci[1] - point) * root)


def of_population(n0: int, total: int | None) -> int:
    """The items a sample-size figure ``n0`` (items like these) comes to for the set of ``total``'s own value:
    n0 N / (n0 + N - 1); N when it leaves out <= 5% (it nears N, never reaching it; N is exact: 121 of 127 is 127)."""
    if total is None or total < 1 or n0 >= MAX_ITEMS:
        return n0
    n = min(total, max(1, math.ceil(n0 * total / (n0 + total - 1))))
    return total if total - n <= total // 20 else n


def _tango_z(b: int, c: int, n: int, delta: float) -> float:
    """Tango's score statistic of H0: p12 - p21 = delta, with p21 at its maximum-likelihood value
    under H0 (the root of 2n q^2 + B q + C = 0, B = -b - c + (2n - b + c) delta,
    C = -c delta (1 - delta))."""
    big_b = -b - c + (2 * n - b + c) * delta
    big_c = -c * delta * (1.0 - delta)
    q = (math.sqrt(max(0.0, big_b * big_b - 8.0 * n * big_c)) - big_b) / (4.0 * n)
    var = n * (2.0 * q + delta * (1.0 - delta))
    num = b - c - n * delta
    if var <= 0.0:
        return 0.0 if num == 0 else math.copysign(math.inf, num)
    return num / math.sqrt(var)


@lru_cache(maxsize=4096, typed=True)  # a pure function of its counts: compare asks each pair's again (0.95, 0.90)
def paired_score_ci(b: int, c: int, n: int, *, level: float = LEVEL, factor: float = 1.0) -> tuple[float, float]:
    """Tango's (1998) score interval of (b - c) / n, the difference of two paired proportions over n
    items of which b are a success for the first only and c for the second only: every delta whose
    score statistic (:func:`_tango_z`) lies within +-z. It accounts for the items not seen: no
    discordant item of n gives about +-z^2 / (n + z^2), not [0, 0]. ``factor``: the finite-population
    factor (:func:`fpc`) scaling the variance (z becomes z sqrt(factor): 0 gives the point)."""
    if n <= 0:
        return (math.nan, math.nan)
    d = (b - c) / n
    z = z_of(level) * math.sqrt(max(0.0, min(1.0, factor)))
    if z == 0.0:
        return (d, d)

    def crossing(inside: float, outside: float, beyond) -> float:
        # bisect between a delta inside the interval and one beyond it (the statistic is monotone)
        for _ in range(200):
            mid = (inside + outside) / 2.0
            if beyond(_tango_z(b, c, n, mid)):
                outside = mid
            else:
                inside = mid
            if abs(outside - inside) < 1e-12:
                break
        return (inside + outside) / 2.0

    lower = -1.0 if d <= -1.0 else crossing(d, -1.0, lambda t: t > z)
    upper = 1.0 if d >= 1.0 else crossing(d, 1.0, lambda t: t < -z)
    return (lower, upper)


def mcnemar_exact(correct_a, correct_b) -> McNemar:
    """McNemar's exact test on two runs' per-item correctness (same items, same order)."""
    from scipy import stats as st
    ca, cb = np.asarray(correct_a, dtype=bool), np.asarray(correct_b, dtype=bool)
    if ca.shape != cb.shape:
        raise UsageError(f"paired vectors differ in length: {len(ca)}, {len(cb)}")
    a_only, b_only = int(np.sum(ca & ~cb)), int(np.sum(~ca & cb))
    n = a_only + b_only
    if n == 0:
        return McNemar(0, 0, 1.0, 1.0)
    p = float(st.binomtest(a_only, n, 0.5).pvalue)
    k = min(a_only, b_only)
    mid = min(1.0, 2.0 * float(st.binom.cdf(k, n, 0.5)) - float(st.binom.pmf(k, n, 0.5)))
    return McNemar(a_only, b_only, p, mid)


def _det(r_a: float, r_b: float, r_ab: float) -> float:
    """Determinant of the 3x3 correlation matrix of (y, a, b)."""
    return 1.0 - r_a * r_a - r_b * r_b - r_ab * r_ab + 2.0 * r_a * r_b * r_ab


def williams_t(r_a: float, r_b: float, r_ab: float, n: int) -> DependentCorrelation:
    """Williams' (1959) t, as given by Steiger (1980, eq. 7), with n - 3 degrees of freedom:

    t = (r_a - r_b) * sqrt((n-1)(1+r_ab) / (2 (n-1)/(n-3) |R| + rbar^2 (1-r_ab)^3)),
    |R| the determinant of the correlation matrix, rbar = (r_a + r_b) / 2.
    NaN when undefined (n <= 3, a NaN correlation); p = 1 when r_a == r_b.
    """
    from scipy import stats as st
    nan = float("nan")
    if n <= 3 or any(math.isnan(v) for v in (r_a, r_b, r_ab)):
        return DependentCorrelation("Williams t", r_a, r_b, r_ab, n, nan, None, nan)
    df = n - 3
    if r_a == r_b:
        return DependentCorrelation("Williams t", r_a, r_b, r_ab, n, 0.0, df, 1.0)
    rbar = (r_a + r_b) / 2.0
    den = 2.0 * (n - 1) / (n - 3) * _det(r_a, r_b, r_ab) + rbar * rbar * (1.0 - r_ab) ** 3
    if den <= 0:
        return DependentCorrelation("Williams t", r_a, r_b, r_ab, n, nan, df, nan)
    t = (r_a - r_b) * math.sqrt((n - 1) * (1.0 + r_ab) / den)
    return DependentCorrelation("Williams t", r_a, r_b, r_ab, n, t, df, float(2.0 * st.t.sf(abs(t), df)))


def steiger_z(r_a: float, r_b: float, r_ab: float, n: int) -> DependentCorrelation:
    """Steiger's (1980, eq. 14) z on Fisher's z-transforms with the pooled rbar:

    z = (atanh r_a - atanh r_b) sqrt(n-3) / sqrt(2 - 2 c), c = psi / (1 - rbar^2)^2,
    psi = r_ab (1 - 2 rbar^2) - rbar^2 (1 - 2 rbar^2 - r_ab^2) / 2.
    """
    from scipy.special import ndtr  # norm.sf, bit for bit (metrics.z_of)
    nan = float("nan")
    if n <= 3 or any(math.isnan(v) for v in (r_a, r_b, r_ab)) or max(abs(r_a), abs(r_b)) >= 1.0:
        return DependentCorrelation("Steiger z", r_a, r_b, r_ab, n, nan, None, nan)
    if r_a == r_b:
        return DependentCorrelation("Steiger z", r_a, r_b, r_ab, n, 0.0, None, 1.0)
    rbar = (r_a + r_b) / 2.0
    psi = r_ab * (1.0 - 2.0 * rbar ** 2) - 0.5 * rbar ** 2 * (1.0 - 2.0 * rbar ** 2 - r_ab ** 2)
    c = psi / (1.0 - rbar ** 2) ** 2
    if 2.0 - 2.0 * c <= 0:
        return DependentCorrelation("Steiger z", r_a, r_b, r_ab, n, nan, None, nan)
    z = (math.atanh(r_a) - math.atanh(r_b)) * math.sqrt(n - 3) / math.sqrt(2.0 - 2.0 * c)
    return DependentCorrelation("Steiger z", r_a, r_b, r_ab, n, z, None, float(2.0 * ndtr(-abs(z))))


def label_kl(lp_ref, lp_other) -> float:
    """KL(p || q) in nats, p and q the softmax of two logprob vectors over the same choices."""
    a, b = log_softmax(lp_ref), log_softmax(lp_other)
    p = np.exp(a)
    with np.errstate(invalid="ignore"):
        terms = np.where(p > 0, p * (a - b), 0.0)
    return float(np.sum(terms))


def holm(pvalues: Sequence[float]) -> tuple[float, ...]:
    """Holm's step-down adjusted p-values, in the input order. NaN p-values (no test)
    stay NaN and do not count among the m hypotheses."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(len(p), np.nan)
    tested = np.flatnonzero(~np.isnan(p))
    m, running = len(tested), 0.0
    for rank, k in enumerate(tested[np.argsort(p[tested], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * p[k]))
        out[k] = running
    return tuple(float(v) for v in out)


def best_group(values: Sequence[float], p_adjusted: Mapping[tuple[int, int], float],
               alpha: float = ALPHA) -> tuple[int | None, tuple[int, ...]]:
    """The best (highest) value's index and every index not distinguishable from it:
    its adjusted p against the best is ``alpha`` or more, or untested (NaN). A run whose value
    is undefined (NaN) is never in the group. ``p_adjusted`` holds each unordered pair once,
    as (i, j) with i < j."""
    defined = [k for k, v in enumerate(values) if not math.isnan(v)]
    if not defined:
        return None, ()
    best = max(defined, key=lambda k: values[k])
    members = []
    for k in defined:
        if k == best:
            members.append(k)
            continue
        p = p_adjusted.get((min(k, best), max(k, best)), float("nan"))
        if math.isnan(p) or p >= alpha:
            members.append(k)
    return best, tuple(members)


def z_power(alpha: float, power: float) -> tuple[float, float]:
    """(z_a, z_b) of two-sided level ``alpha`` and of ``power``: every sample-size formula's (scipy's, bit for bit)."""
    from scipy.special import ndtri
    return float(-ndtri(alpha / 2.0)), float(ndtri(power))


def detectable_factor(n: int, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """c(n) = (z_a sqrt(n) + z_b sqrt(n - z_a^2 + z_b^2)) / (n + z_b^2): the McNemar
    sample-size formula solved for the difference d at discordant rate psi gives
    d = c sqrt(psi). Infinite when n is too small for any difference."""
    za, zb = z_power(alpha, power)
    inner = n - za * za + zb * zb
    if n <= 0 or inner <= 0:
        return math.inf
    return (za * math.sqrt(n) + zb * math.sqrt(inner)) / (n + zb * zb)


def min_detectable_difference(n: int, discordance: float, *, alpha: float = ALPHA,
                              power: float = POWER) -> float:
    """The smallest accuracy difference d = p10 - p01 that McNemar's test on ``n`` paired
    items detects with ``power`` at two-sided level ``alpha``, by the normal-approximation
    sample-size formula (Connor 1987)

        n = (z_a sqrt(psi) + z_b sqrt(psi - d^2))^2 / d^2,   psi = p10 + p01,

    solved for d: d = c(n) sqrt(psi). ``discordance`` is the observed psi; since psi >= d
    always, psi is taken as max(observed, d), so with no (or few) discordant pairs the
    figure is the floor d = c(n)^2: the best any paired design of n items can do.
    1.0 means no difference is detectable."""
    c = detectable_factor(n, alpha=alpha, power=power)
    if math.isinf(c):
        return 1.0
    return min(1.0, c * max(math.sqrt(max(discordance, 0.0)), c))


def power_at(n: int, discordance: float, diff: float, *, alpha: float = ALPHA) -> float:
    """The normal-approximation power of McNemar's test for a difference ``diff`` at
    discordant rate ``discordance`` over ``n`` items (the formula above, read forward)."""
    from scipy.special import ndtr, ndtri  # norm.isf and norm.cdf, bit for bit (metrics.z_of)
    za = float(-ndtri(alpha / 2.0))
    var = discordance - diff * diff
    if var <= 0:
        return 1.0 if diff > 0 else float("nan")
    return float(ndtr((math.sqrt(n) * abs(diff) - za * math.sqrt(discordance)) / math.sqrt(var)))


MAX_ITEMS = 10_000_000  # items_to_settle's answer when nothing settles it


def items_to_settle(n: int, gap: float, *, discordance: float | None = None, ci90: tuple[float, float] | None = None,
                    power: float = POWER) -> int:
    """About how many paired items would tell an observed difference from a margin ``gap`` away
    (|difference - boundary|), with ``power`` at one-sided 5% (the 90% CI's bound), if the
    difference stayed what it is. Accuracy (``discordance``: the observed discordant rate):
    the least n whose :func:`min_detectable_difference` at level 0.10 two-sided is within
    ``gap``; any other statistic (``ci90``: its bootstrap interval over ``n`` items): the
    interval's spread scaled as 1/sqrt(n). :data:`MAX_ITEMS` when no number of items does."""
    if not gap > 0 or n < 1:
        return MAX_ITEMS
    if discordance is not None:
        def fits(m: int) -> bool:
            return min_detectable_difference(m, discordance, alpha=0.10, power=power) <= gap
        if not fits(MAX_ITEMS):
            return MAX_ITEMS
        lo, hi = 1, MAX_ITEMS
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if fits(mid) else (mid + 1, hi)
        return lo
    if ci90 is None or any(math.isnan(v) for v in ci90):
        return MAX_ITEMS
    za, zb = z_power(0.10, power)
    se = (ci90[1] - ci90[0]) / (2.0 * za)  # the per-n standard error the interval shows
    if se <= 0:
        return n
    return min(MAX_ITEMS, max(1, math.ceil(n * ((za + zb) * se / gap) ** 2)))
