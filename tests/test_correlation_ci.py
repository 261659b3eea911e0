"""analysis/correlation_ci.py's interval for a task's own correlation (published.method 3): the documented formula
recomputed here from its parts, the pair's path (method 2's, unchanged), its edges; bench/correlation_coverage.py
measures its coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from abricot_local import metrics
from abricot_local.analysis import reproduction, stats
from abricot_local.analysis.correlation_ci import correlation_ci


def _ratings(n: int, seed: int, r: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(n)
    m = r * g + math.sqrt(1 - r * r) * rng.standard_normal(n)
    cut = [-1.0, -0.3, 0.4, 1.1]
    return (np.digitize(m, cut) + 1).astype(float), (np.digitize(g, cut) + 1).astype(float)


def _by_hand(x, y, n, total, lvl, seed):
    """The interval as docs/protocols.md states it, from scipy's and numpy's parts."""
    r = sps.pearsonr(x, y)[0]
    idx = np.random.default_rng(seed).integers(0, n, size=(metrics.N_BOOT, n))
    boot = np.array([np.corrcoef(x[i], y[i])[0, 1] for i in idx])
    z = np.arctanh(boot[~np.isnan(boot)])
    s = max(np.std(z, ddof=1), 1 / math.sqrt(n - 3)) * math.sqrt((total - n) / (total - 1))
    f = (total - n) / (total - 1)
    xs, ys = sps.zscore(x), sps.zscore(y)
    psi = xs * ys - r * (xs ** 2 + ys ** 2) / 2
    lin = sps.skew(psi) / math.sqrt(n)
    g = lin * ((total - 2 * n) / (total - 2) / math.sqrt(f) - math.sqrt(f)) + sps.skew(z) * math.sqrt(f)
    t = sps.t.ppf((1 + lvl) / 2, n - 1)
    c = math.atanh(r) - r / (2 * (n - 1)) * f - s * g * (t * t - 1) / 6
    return math.tanh(c - t * s), math.tanh(c + t * s)


@pytest.mark.parametrize("n,seed", [(20, 1), (40, 2), (80, 3), (120, 4)])
def test_one_correlation_is_the_documented_formula(n, seed):
    x, y = _ratings(n, seed)
    value, ci, why = correlation_ci("pearson", [x, y], n, 127, 0.90, seed)
    assert why == "" and value == pytest.approx(sps.pearsonr(x, y)[0], abs=1e-12)
    assert ci == pytest.approx(_by_hand(x, y, n, 127, 0.90, seed), abs=1e-9)


def test_the_centre_moves_and_the_interval_widens_against_method_2():
    """Against method 2 (atanh r +- z x s): wider by Student's t over z, its centre below atanh r by Fisher's bias
    at least where the skewness term is small, and the recorded method is 3 or later."""
    x, y = _ratings(40, 5, r=0.7)
    value, (lo, hi), _ = correlation_ci("pearson", [x, y], 40, 127, 0.90, 9)
    half, centre = (math.atanh(hi) - math.atanh(lo)) / 2, (math.atanh(hi) + math.atanh(lo)) / 2
    idx = np.random.default_rng(9).integers(0, 40, size=(metrics.N_BOOT, 40))
    z = np.arctanh(metrics.ROW_STATS["pearson"](x[idx], y[idx]))
    s = max(float(np.std(z, ddof=1)), 1 / math.sqrt(37)) * math.sqrt(stats.fpc(40, 127))
    assert half == pytest.approx(sps.t.ppf(0.95, 39) * s, rel=1e-9) and half > metrics.z_of(0.90) * s
    assert centre != pytest.approx(math.atanh(value), abs=1e-3) and reproduction.METHOD >= 3


def test_every_item_is_the_value_and_the_pair_keeps_method_2():
    x, y = _ratings(127, 6)
    value, ci, _ = correlation_ci("pearson", [x, y], 127, 127, 0.90, 1)
    assert ci[0] == pytest.approx(value, abs=1e-12) and ci[1] == pytest.approx(value, abs=1e-12)
    a, b = _ratings(40, 7)
    c, d = _ratings(40, 8)
    diff, (lo, hi), _ = correlation_ci("pearson", [a, b, c, b], 40, 127, 0.90, 3, paired=True)
    idx = np.random.default_rng(3).integers(0, 40, size=(metrics.N_BOOT, 40))
    boot = metrics.ROW_STATS["pearson"](a[idx], b[idx]) - metrics.ROW_STATS["pearson"](c[idx], b[idx])
    half = metrics.z_of(0.90) * float(np.std(boot[~np.isnan(boot)], ddof=1)) * math.sqrt(stats.fpc(40, 127))
    assert (lo, hi) == pytest.approx((diff - half, diff + half), abs=1e-12)


def test_spearman_reads_its_ranks():
    x, y = _ratings(40, 10)
    value, (lo, hi), _ = correlation_ci("spearman", [x, y], 40, 127, 0.90, 2)
    assert value == pytest.approx(sps.spearmanr(x, y)[0], abs=1e-12) and lo < value < hi
