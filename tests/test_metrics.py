import numpy as np
import pytest
from scipy import stats

from abricot_local import metrics


def vectors(seed=0, n=60):
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 6, n).astype(float)
    y = x + rng.normal(0, 1.5, n)
    return x, y


def test_pearson_and_spearman_match_scipy():
    x, y = vectors()
    assert metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert metrics.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)


def test_accuracy():
    assert metrics.accuracy([1, 2, 3, 4], [1, 2, 0, 0]) == 0.5


def test_constant_vector_gives_nan_not_an_error():
    x = np.full(10, 3.0)
    y = np.arange(10.0)
    assert np.isnan(metrics.pearson(x, y))
    assert np.isnan(metrics.spearman(x, y))
    assert metrics.bootstrap_ci("pearson", x, y, seed=1) == pytest.approx([np.nan, np.nan], nan_ok=True)


def test_bootstrap_ci_contains_point_and_is_reproducible():
    x, y = vectors(3)
    point, ci = metrics.with_ci("pearson", x, y, seed=7)
    assert ci[0] <= point <= ci[1]
    assert metrics.bootstrap_ci("pearson", x, y, seed=7) == ci
    assert metrics.bootstrap_ci("pearson", x, y, seed=8) != ci


def test_bootstrap_matches_a_plain_loop():
    x, y = vectors(5, 30)
    rng = np.random.default_rng(11)
    idx = rng.integers(0, 30, size=(metrics.N_BOOT, 30))
    vals = [stats.pearsonr(x[i], y[i])[0] for i in idx if np.ptp(x[i]) > 0 and np.ptp(y[i]) > 0]
    lo, hi = np.percentile(vals, [2.5, 97.5])
    assert metrics.bootstrap_ci("pearson", x, y, seed=11) == pytest.approx([lo, hi], abs=1e-9)


def test_the_normal_quantiles_are_scipy_stats_bit_for_bit():
    """z_of and the power formulas take scipy.special's ndtri and ndtr (a run then never imports scipy.stats):
    the same bits as scipy.stats' norm.isf, norm.ppf, norm.cdf and norm.sf, at every level a run can ask."""
    import math

    from abricot_local.analysis import stats as paired

    levels = [0.5, 0.8, 0.9, 0.95, 0.99, 0.999, *np.random.default_rng(5).random(500).tolist(), 1 - 1e-12]
    assert all(metrics.z_of(lv).hex() == float(stats.norm.isf((1.0 - lv) / 2.0)).hex() for lv in levels)
    n, disc, diff = 120, 0.3, 0.1
    for alpha, power in ((0.05, 0.8), (0.1, 0.9), (0.01, 0.5), (0.2, 0.999)):
        za = float(stats.norm.isf(alpha / 2.0))
        assert paired.z_power(alpha, power) == (za, float(stats.norm.ppf(power)))
        want = stats.norm.cdf((math.sqrt(n) * diff - za * math.sqrt(disc)) / math.sqrt(disc - diff * diff))
        assert paired.power_at(n, disc, diff, alpha=alpha).hex() == float(want).hex()
    steiger = paired.steiger_z(0.6, 0.4, 0.5, 50)
    assert steiger.p.hex() == float(2.0 * stats.norm.sf(abs(steiger.statistic))).hex()
