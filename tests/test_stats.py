"""stats.py against scipy, published worked examples and independent computations: McNemar's
exact test, Williams' t and Steiger's z, the paired bootstrap, Holm, the best group, and the
minimum detectable difference (checked against the exact power of McNemar's test)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from abricot_local.analysis import stats
from abricot_local.errors import UsageError
from abricot_local.metrics import ROW_STATS, accuracy, bootstrap_ci, pearson


# -- McNemar ---------------------------------------------------------------------------------
def test_mcnemar_exact_known_answers():
    # 1 item only A gets right, 9 only B: p = 2 * (C(10,0) + C(10,1)) / 2^10 = 22/1024
    a = [1] + [0] * 9 + [1] * 5 + [0] * 3
    b = [0] + [1] * 9 + [1] * 5 + [0] * 3
    m = stats.mcnemar_exact(a, b)
    assert (m.a_only, m.b_only, m.discordant) == (1, 9, 10)
    assert m.p == pytest.approx(22 / 1024, abs=1e-15)
    assert m.mid_p == pytest.approx(12 / 1024, abs=1e-15)  # 2 * 11/1024 - 10/1024
    assert stats.mcnemar_exact(b, a).p == m.p  # two-sided: symmetric
    assert stats.mcnemar_exact([1, 0, 1], [1, 0, 1]) == stats.McNemar(0, 0, 1.0, 1.0)  # no discordant pair
    assert stats.mcnemar_exact([1, 0, 1, 0], [0, 1, 1, 0]).p == 1.0  # 1 vs 1
    with pytest.raises(UsageError):
        stats.mcnemar_exact([1, 0], [1])


def test_mcnemar_matches_scipy_binomtest_on_random_pairs():
    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(5, 200))
        a, b = rng.random(n) < rng.random(), rng.random(n) < rng.random()
        m = stats.mcnemar_exact(a, b)
        k, d = int(np.sum(a & ~b)), int(np.sum(a != b))
        assert (m.a_only, m.discordant) == (k, d)
        if d:
            assert m.p == st.binomtest(k, d, 0.5, alternative="two-sided").pvalue
            assert m.mid_p <= m.p


# -- dependent correlations ------------------------------------------------------------------
def test_williams_t_reproduces_howells_worked_example():
    # Howell, Statistical Methods for Psychology (6th ed., p. 262), as computed by B. Weaver's
    # Williams1959.sps: r12 = .80, r13 = .72, r23 = .89, n = 26 -> t = 1.361, df = 23, p = .187
    w = stats.williams_t(0.80, 0.72, 0.89, 26)
    assert (round(w.statistic, 3), w.df, round(w.p, 3)) == (1.361, 23, 0.187)
    assert w.test == "Williams t"
    assert stats.williams_t(0.72, 0.80, 0.89, 26).statistic == pytest.approx(-w.statistic)
    assert stats.williams_t(0.5, 0.5, 0.3, 40).p == 1.0
    assert math.isnan(stats.williams_t(0.5, 0.4, 0.3, 3).p)
    assert math.isnan(stats.williams_t(float("nan"), 0.4, 0.3, 30).p)


def _pearson_filon_cov(R: np.ndarray, a: int, b: int, c: int, d: int) -> float:
    """n * cov(r_ab, r_cd): the general four-index large-sample formula (Pearson & Filon 1898,
    as in Steiger 1980 eq. 2), written independently of stats.py's overlapping special case."""
    r = lambda i, j: R[i, j]  # noqa: E731
    return (0.5 * r(a, b) * r(c, d) * (r(a, c) ** 2 + r(a, d) ** 2 + r(b, c) ** 2 + r(b, d) ** 2)
            + r(a, c) * r(b, d) + r(a, d) * r(b, c)
            - (r(a, b) * r(a, c) * r(a, d) + r(b, a) * r(b, c) * r(b, d)
               + r(c, a) * r(c, b) * r(c, d) + r(d, a) * r(d, b) * r(d, c)))


def test_steiger_z_matches_the_general_pearson_filon_covariance():
    rng = np.random.default_rng(11)
    for _ in range(25):
        x = rng.normal(size=(3, 50)) + rng.normal(size=50) * rng.uniform(0, 2)  # correlated rows
        R = np.corrcoef(x)  # variables: 0 = gold, 1 = run a, 2 = run b
        r_a, r_b, r_ab, n = R[0, 1], R[0, 2], R[1, 2], 50
        rbar = (r_a + r_b) / 2
        pooled = R.copy()
        pooled[0, 1] = pooled[1, 0] = pooled[0, 2] = pooled[2, 0] = rbar  # Steiger's pooled estimate
        cov_z = _pearson_filon_cov(pooled, 0, 1, 0, 2) / (1 - rbar ** 2) ** 2  # of Fisher's z's
        z = (np.arctanh(r_a) - np.arctanh(r_b)) / math.sqrt((2 - 2 * cov_z) / (n - 3))
        got = stats.steiger_z(r_a, r_b, r_ab, n)
        assert got.statistic == pytest.approx(z, rel=1e-12)
        assert got.p == pytest.approx(2 * st.norm.sf(abs(z)), rel=1e-12)
        # both tests answer the same question: close p-values at this n
        assert abs(stats.williams_t(r_a, r_b, r_ab, n).p - got.p) < 0.05
    # variance check of the independent formula itself: n var(r) = (1 - rho^2)^2
    R = np.array([[1, 0.3, 0.6], [0.3, 1, 0.2], [0.6, 0.2, 1]])
    assert _pearson_filon_cov(R, 0, 1, 0, 1) == pytest.approx((1 - 0.09) ** 2)
    howell = stats.steiger_z(0.80, 0.72, 0.89, 26)
    assert howell.test == "Steiger z" and abs(howell.p - 0.187) < 0.01


# -- bootstrap -------------------------------------------------------------------------------
def test_paired_bootstrap_draws_the_same_items_for_both_runs():
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 5, 60)
    pa = np.where(rng.random(60) < 0.6, gold, rng.integers(0, 5, 60))
    pb = np.where(rng.random(60) < 0.4, gold, rng.integers(0, 5, 60))
    acc = ROW_STATS["accuracy"]
    d = stats.paired_bootstrap(acc, pa, gold, pb, gold, seed=9, n_boot=500)
    assert (d.a, d.b) == (accuracy(pa, gold), accuracy(pb, gold)) and d.diff == d.a - d.b
    # the same resamples computed by hand, one at a time
    idx = np.random.default_rng(9).integers(0, 60, size=(500, 60))
    diffs = [(pa[i] == gold[i]).mean() - (pb[i] == gold[i]).mean() for i in idx]
    assert d.ci == tuple(np.percentile(diffs, [2.5, 97.5]))
    assert d.seed == 9 and d.n_boot == d.n_valid == 500
    # a run against itself: every resample's difference is exactly 0 (independent draws would not be)
    same = stats.paired_bootstrap(acc, pa, gold, pa.copy(), gold, seed=9)
    assert same.ci == (0.0, 0.0) and same.diff == 0.0
    # one run's own CI equals metrics.bootstrap_ci when the other side is constant 0
    r = stats.paired_bootstrap(ROW_STATS["pearson"], pa, gold, pa, gold, seed=1)
    assert r.a == pearson(pa, gold) and r.ci == (0.0, 0.0)
    lo, hi = bootstrap_ci("accuracy", pa, gold, seed=4)
    only = stats.paired_bootstrap(acc, pa, gold, np.zeros(60), np.ones(60), seed=4)
    assert only.ci == pytest.approx((lo, hi))
    with pytest.raises(UsageError):
        stats.paired_bootstrap(acc, pa, gold, pb[:5], gold[:5], seed=1)


def test_paired_bootstrap_leaves_out_undefined_resamples():
    x = np.array([1.0, 1.0, 1.0, 2.0])
    d = stats.paired_bootstrap(ROW_STATS["pearson"], x, x, x, x, seed=0, n_boot=200)
    assert 0 < d.n_valid < 200  # resamples of only the 1.0s have no correlation
    e = stats.paired_bootstrap(ROW_STATS["pearson"], np.ones(4), x, x, x, seed=0)
    assert math.isnan(e.diff) and e.n_valid == 0 and all(math.isnan(v) for v in e.ci)


# -- Holm and the best group -----------------------------------------------------------------
def test_holm_step_down():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, 2*0.03, max(0.06, 1*0.04)
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx((0.03, 0.06, 0.06, 0.02))
    assert stats.holm([0.5, 0.9]) == (1.0, 1.0)  # capped at 1, kept monotone (never below an earlier step)
    assert stats.holm([0.01, 0.2, 0.04]) == pytest.approx((0.03, 0.2, 0.08))
    nan = float("nan")
    got = stats.holm([0.02, nan, 0.04])  # the untested one is not a hypothesis: m = 2
    assert got[0] == pytest.approx(0.04) and math.isnan(got[1]) and got[2] == pytest.approx(0.04)
    assert stats.holm([]) == ()
    assert stats.holm([0.03]) == (0.03,)


def test_best_group():
    values = [0.50, 0.70, 0.68, 0.40]
    p = {(0, 1): 0.001, (0, 2): 0.01, (1, 2): 0.6, (1, 3): float("nan")}
    assert stats.best_group(values, p) == (1, (1, 2, 3))  # 3: untested, so not distinguished
    assert stats.best_group(values, {**p, (1, 2): 0.04}) == (1, (1, 3))
    assert stats.best_group(values, {**p, (0, 1): 0.2}, alpha=0.05) == (1, (0, 1, 2, 3))
    # a run whose metric is undefined is never in the group (the page marks none; nor does the text)
    assert stats.best_group([0.50, 0.70, float("nan")], {(0, 1): 0.5, (1, 2): float("nan")}) == (1, (0, 1))
    assert stats.best_group([float("nan")] * 2, {}) == (None, ())


# -- power -----------------------------------------------------------------------------------
def _exact_mcnemar_power(n: int, p10: float, p01: float, alpha: float = 0.05) -> float:
    """The exact power of stats.mcnemar_exact: over the number of discordant pairs D ~ Bin(n,
    p10 + p01) and the A-only count K | D ~ Bin(D, p10 / (p10 + p01))."""
    psi = p10 + p01
    total = 0.0
    for d in range(1, n + 1):
        k = np.arange(d + 1)
        pv = np.minimum(1.0, 2 * np.minimum(st.binom.cdf(k, d, 0.5), st.binom.sf(k - 1, d, 0.5)))
        total += st.binom.pmf(d, n, psi) * st.binom.pmf(k, d, p10 / psi)[pv < alpha].sum()
    return float(total)


@pytest.mark.parametrize("n,psi", [(100, 0.3), (200, 0.2), (40, 0.5)])
def test_min_detectable_difference_has_80_percent_power(n, psi):
    d = stats.min_detectable_difference(n, psi)
    assert d <= psi
    assert stats.power_at(n, psi, d) == pytest.approx(0.80, abs=1e-9)  # the formula read forward
    exact = _exact_mcnemar_power(n, (psi + d) / 2, (psi - d) / 2)
    assert 0.70 <= exact <= 0.85, exact  # the exact test is a little conservative
    assert _exact_mcnemar_power(n, (psi + d / 2) / 2, (psi - d / 2) / 2) < 0.5  # half of it: no power


def test_min_detectable_difference_floor_and_small_samples():
    floor40 = stats.min_detectable_difference(40, 0.0)
    c = stats.detectable_factor(40)
    assert floor40 == pytest.approx(c * c)
    assert stats.power_at(40, floor40, floor40) == pytest.approx(0.80, abs=1e-9)  # psi = d
    assert floor40 > 0.15  # 40 items cannot separate models 5 points apart, nor 15
    assert stats.min_detectable_difference(40, 0.01) == floor40  # too few discordant pairs: the floor
    assert stats.min_detectable_difference(40, 0.5) > floor40
    ns = [20, 40, 100, 400, 1600]
    assert all(stats.min_detectable_difference(a, 0.2) > stats.min_detectable_difference(b, 0.2)
               for a, b in zip(ns, ns[1:]))
    assert stats.min_detectable_difference(1600, 0.0) < 0.01
    assert stats.min_detectable_difference(2, 0.5) == 1.0  # nothing detectable
    assert stats.min_detectable_difference(0, 0.0) == 1.0
