"""The paired accuracy interval near N (analysis/paired_exact.py): with more than MAX_CHANGED changed answers and a
run that scored most of a large task, the set's difference rests on the few changed answers among the items not
seen; Tango's with the finite-population correction missed it on one side up to 10% of the time there, the verdict's
(the restricted exact construction) holds it. Elsewhere above MAX_CHANGED: Tango's on the set's grid. Also the two
words said where two intervals disagree: compare's CI against its test, the task's own verdict against items like
these (equivalence.Equivalence.like_line)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import gammaln

from abricot_local.analysis import stats
from abricot_local.analysis.compare import ci_against_test
from abricot_local.analysis.equivalence import NOT_WORSE, UNSETTLED, WORSE, Equivalence
from abricot_local.analysis.paired_exact import (MAX_CHANGED, MAX_TOTAL, MAX_UNSEEN, paired_set_ci,
                                                 restricted_paired_set_ci, tango_set_ci)


def _outcomes(total: int, big_b: int, big_c: int, n: int, cut: float):
    """Every (b, c) of n items from a set with big_b and big_c changed answers more probable than ``cut``, with its
    probability (multivariate hypergeometric)."""
    def log_choose(a, k):
        return gammaln(a + 1.0) - gammaln(k + 1.0) - gammaln(a - k + 1.0)

    out = []
    for b in range(min(big_b, n) + 1):
        for c in range(min(big_c, n - b) + 1):
            rest = n - b - c
            if rest > total - big_b - big_c:
                continue
            p = math.exp(log_choose(big_b, b) + log_choose(big_c, c) + log_choose(total - big_b - big_c, rest)
                         - log_choose(total, n))
            if p > cut:
                out.append((b, c, p))
    return out


def _misses(interval, total: int, big_b: int, big_c: int, n: int, cut: float) -> tuple[float, float]:
    """The mass of the outcomes kept whose interval lies wholly below, wholly above the set's D."""
    d = (big_b - big_c) / total
    below = above = 0.0
    for b, c, p in _outcomes(total, big_b, big_c, n, cut):
        lo, hi = interval(b, c, n, total)
        below += p if hi < d - 1e-12 else 0.0
        above += p if lo > d + 1e-12 else 0.0
    return below, above


def test_near_n_the_verdict_holds_the_set_difference_where_tango_fell_short():
    total, big_b, big_c, n, cut = 400, 30, 30, 390, 1e-4  # 60 changed (> MAX_CHANGED), 10 items not seen
    assert total > MAX_TOTAL and big_b + big_c > MAX_CHANGED
    left = 1.0 - sum(p for *_, p in _outcomes(total, big_b, big_c, n, cut))
    below, above = _misses(lambda *a: stats.paired_score_ci(*a[:3], level=0.9, factor=stats.fpc(n, total)),
                           total, big_b, big_c, n, cut)
    assert below > 0.09 and above > 0.09  # Tango + FPC, the verdict's before: ~9.8% missed on each side
    below, above = _misses(paired_set_ci, total, big_b, big_c, n, cut)
    assert below + left <= 0.05 and above + left <= 0.05  # the outcomes left out counted as misses


def test_the_picker_near_n_and_elsewhere():
    near = (30, 30, 390, 400)  # (b + c)(N - n) / n = 1.5
    assert (near[0] + near[1]) * (near[3] - near[2]) <= MAX_UNSEEN * near[2]
    assert paired_set_ci(*near) == restricted_paired_set_ci(*near)
    assert restricted_paired_set_ci(*near) == restricted_paired_set_ci(*near, scan=True)  # the search misses none
    far = (21, 20, 400, 1600)  # 41 changed, (b + c)(N - n) / n = 123: Tango's on the set's grid
    assert paired_set_ci(*far) == tango_set_ci(*far) != stats.paired_score_ci(*far[:3], level=0.9,
                                                                             factor=stats.fpc(far[2], far[3]))


@pytest.mark.parametrize("b, c, n, total", [(21, 20, 400, 1600), (300, 100, 800, 1600), (90, 10, 160, 300)])
def test_tango_on_the_grid_holds_tango_and_one_step_more_at_most(b, c, n, total):
    lo, hi = tango_set_ci(b, c, n, total)
    t_lo, t_hi = stats.paired_score_ci(b, c, n, level=0.9, factor=stats.fpc(n, total))
    assert lo * total == pytest.approx(round(lo * total), abs=1e-9)  # multiples of 1 / N
    assert hi * total == pytest.approx(round(hi * total), abs=1e-9)
    assert lo <= t_lo < lo + 1 / total and hi - 1 / total < t_hi <= hi
    assert tango_set_ci(b, c, total, total) == ((b - c) / total,) * 2  # every item: the set's own
    assert all(np.isnan(tango_set_ci(0, 0, 0, total)))


def test_a_ci_and_its_test_disagreeing_are_said():
    said = ci_against_test((-0.4578, -0.0664), 0.057, "Williams t", "the paired bootstrap's percentiles")
    assert "excludes 0 but Williams t does not reject at 5% (p = 0.057, not adjusted)" in said
    assert "rejects at 5% (p = 0.03" in ci_against_test((-0.1, 0.2), 0.03, "McNemar exact", "Tango's score interval")
    assert ci_against_test((-0.1, 0.2), 0.3, "Williams t", "x") == ""
    assert ci_against_test((0.1, 0.2), 0.01, "Williams t", "x") == ""
    assert ci_against_test((math.nan, math.nan), 0.01, "Williams t", "x") == ""


def _rung(ci90, kind, like_ci90, like_kind, stat="accuracy"):
    return Equivalence("q4_0", "f16", "discotex", "accuracy", 0.02, 30, -0.167, ci90, kind, items=63, stat=stat,
                       total=1600, like_ci90=like_ci90, like_kind=like_kind)


def test_items_like_these_settling_more_than_the_task_own_is_said():
    word = "only because Tango's interval is approximate"
    # the reviewer's rung: 1 fixed, 6 broken of 30 of DISCOTEX's 1,600 items
    assert word in _rung((-0.324, -0.015), UNSETTLED, (-0.318, -0.026), WORSE).like_line
    assert word not in _rung((-0.324, -0.025), WORSE, (-0.318, -0.026), WORSE).like_line  # the same verdict
    assert word not in _rung((-0.30, -0.03), WORSE, (-0.318, 0.0), NOT_WORSE).like_line  # the task's the narrower
    assert word not in _rung((-0.324, -0.015), UNSETTLED, (-0.318, -0.026), WORSE, stat="pearson").like_line
