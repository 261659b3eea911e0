"""analysis/correlation_ci.py's interval for a task's own correlation (published.method 5): the documented formula
recomputed here from its parts (scipy's correlations of the items with one left out), the pair's path (method 2's,
unchanged), its edges; bench/correlation_coverage.py measures its coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from abricot_local import metrics
from abricot_local.analysis import reproduction, stats
from abricot_local.analysis.correlation_ci import correlation_ci, like_interval


def _ratings(n: int, seed: int, r: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(n)
    m = r * g + math.sqrt(1 - r * r) * rng.standard_normal(n)
    cut = [-1.0, -0.3, 0.4, 1.1]
    return (np.digitize(m, cut) + 1).astype(float), (np.digitize(g, cut) + 1).astype(float)


def _by_hand(x, y, n, total, lvl, stat="pearson"):
    """The interval as docs/protocols.md states it, from scipy's and numpy's parts."""
    f = {"pearson": lambda a, b: sps.pearsonr(a, b)[0], "spearman": lambda a, b: sps.spearmanr(a, b)[0]}[stat]
    r = f(x, y)
    zj = np.arctanh([f(np.delete(x, i), np.delete(y, i)) for i in range(n)])
    d = zj.mean() - zj
    fp = (total - n) / (total - 1) if total else 1.0
    s = max(math.sqrt((n - 1) / n * np.sum(d * d)), 1 / math.sqrt(n - 3)) * math.sqrt(fp)
    g = sps.skew(-zj) / math.sqrt(n) * ((total - 2 * n) / (total - 2) / math.sqrt(fp) if total else 1.0)
    t = sps.t.ppf((1 + lvl) / 2, n - 1)
    c = math.atanh(r) - (n - 1) * (zj.mean() - math.atanh(r)) * fp - s * g * (t * t - 1) / 6
    return math.tanh(c - t * s), math.tanh(c + t * s)


@pytest.mark.parametrize("n,seed", [(20, 1), (40, 2), (80, 3), (120, 4)])
def test_one_correlation_is_the_documented_formula(n, seed):
    x, y = _ratings(n, seed)
    value, ci, why = correlation_ci("pearson", [x, y], n, 127, 0.90, seed)
    assert why == "" and value == pytest.approx(sps.pearsonr(x, y)[0], abs=1e-12)
    assert ci == pytest.approx(_by_hand(x, y, n, 127, 0.90), abs=1e-9)
    assert tuple(like_interval("pearson", x, y, seed=seed, level=0.90)) == pytest.approx(
        _by_hand(x, y, n, None, 0.90), abs=1e-9)


def test_no_resampling_the_seed_changes_nothing_and_the_correction_narrows():
    """The jackknife draws nothing: every seed gives the same interval (the verdict cannot flip with it); the
    finite-population correction narrows it against items like these', and more so with more of the N scored; the
    recorded method is 5 or later."""
    x, y = _ratings(40, 5, r=0.7)
    runs = {correlation_ci("pearson", [x, y], 40, 127, 0.90, seed)[1] for seed in (0, 1, 2, 1234)}
    assert len(runs) == 1 and reproduction.METHOD >= 5
    (lo, hi), (llo, lhi) = runs.pop(), like_interval("pearson", x, y, seed=0, level=0.90)
    assert llo < lo < hi < lhi
    _, (lo2, hi2), _ = correlation_ci("pearson", [x, y], 40, 60, 0.90, 0)
    assert hi2 - lo2 < hi - lo


def test_every_item_is_the_value_and_the_pair_keeps_method_2():
    x, y = _ratings(127, 6)
    value, ci, _ = correlation_ci("pearson", [x, y], 127, 127, 0.90, 1)
    assert ci == (value, value)
    a, b = _ratings(40, 7)
    c, d = _ratings(40, 8)
    diff, (lo, hi), _ = correlation_ci("pearson", [a, b, c, b], 40, 127, 0.90, 3, paired=True)
    idx = np.random.default_rng(3).integers(0, 40, size=(metrics.N_BOOT, 40))
    boot = metrics.ROW_STATS["pearson"](a[idx], b[idx]) - metrics.ROW_STATS["pearson"](c[idx], b[idx])
    half = metrics.z_of(0.90) * float(np.std(boot[~np.isnan(boot)], ddof=1)) * math.sqrt(stats.fpc(40, 127))
    assert (lo, hi) == pytest.approx((diff - half, diff + half), abs=1e-12)


def test_spearman_reads_its_ranks_again_with_each_item_left_out():
    x, y = _ratings(40, 10)
    value, ci, _ = correlation_ci("spearman", [x, y], 40, 127, 0.90, 2)
    assert value == pytest.approx(sps.spearmanr(x, y)[0], abs=1e-12) and ci[0] < value < ci[1]
    assert ci == pytest.approx(_by_hand(x, y, 40, 127, 0.90, "spearman"), abs=1e-9)


def test_an_accuracy_s_like_interval_is_wilson_s():
    x, y = _ratings(30, 11)
    assert like_interval("accuracy", x, y, seed=4, level=0.90) == metrics.interval("accuracy", x, y, seed=4,
                                                                                      level=0.90)
