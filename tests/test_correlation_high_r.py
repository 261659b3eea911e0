"""A correlation near 1 (published.method 5): the reviewer's case, 30 items of a 127-item task, the model's rating
the gold's on 25 and one off on 5 (r 0.958). Method 3 took the spread and skewness of z from the bootstrap's
moments, where a few resamples with r = 1 (z clipped at 14.2) made them: its 90% interval lay wholly below r
([-0.916, +0.166] with seed 0) and the verdict on a published 0.96 was `differs`. The jackknife's holds r, the same
for every seed; r = +-1 with an item left out reads no interval."""

from __future__ import annotations

import math

import numpy as np

from abricot_local import metrics
from abricot_local.analysis import reproduction
from abricot_local.analysis.correlation_ci import ON_A_LINE, correlation_ci, like_interval

GOLD = np.array([1, 2, 2, 2, 3, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 2, 2, 2, 4, 4, 4, 5, 5, 5, 3, 1, 4], float)


def _model(off=(0, 3, 6, 12, 18)) -> np.ndarray:
    pred = GOLD.copy()
    pred[list(off)] += 1
    return pred


def test_the_interval_near_r_1_holds_r_whatever_the_seed():
    pred = _model()
    r = metrics.pearson(pred, GOLD)
    assert 0.95 < r < 0.96
    cis = {correlation_ci("pearson", [pred, GOLD], 30, 127, 0.90, seed)[1] for seed in (0, 1, 1234)}
    assert len(cis) == 1
    lo, hi = cis.pop()
    assert lo < r < hi and hi - lo < 0.1 and hi < 1  # method 3 (seed 0): [-0.916, +0.166]
    like = like_interval("pearson", pred, GOLD, seed=0, level=0.90)
    assert like[0] < lo < hi < like[1] and like[1] < 1


def test_the_published_verdict_on_its_own_value_is_not_differs():
    pred = _model()
    r = metrics.pearson(pred, GOLD)
    _, within, why = correlation_ci("pearson", [pred, GOLD], 30, 127, 0.90, 0)
    like = tuple(like_interval("pearson", pred, GOLD, seed=0, level=0.90))
    v = reproduction.judge(r, like, round(r, 2), 0.05, n=30, total=127, within=within, rounding=0.005,
                           correlation=True, why=why)
    assert v.kind == reproduction.REPRODUCED, v.line  # method 3: "differs by more than 0.05"
    assert v.ci90[0] < r - round(r, 2) < v.ci90[1]


def test_on_a_line_no_interval_is_read():
    """r = 1 (every answer the gold's plus one) or r with one item left out = 1 (one answer off): no spread describes
    it, the interval is not read (a verdict's `cannot tell`), items like these have none either."""
    for pred in (GOLD + 1.0, _model(off=(3,))):
        value, ci, why = correlation_ci("pearson", [pred, GOLD], 30, 127, 0.90, 0)
        assert math.isfinite(value) and ci is None and why == ON_A_LINE
        assert all(math.isnan(c) for c in like_interval("pearson", pred, GOLD, seed=0, level=0.90))
    # two answers off: the jackknife has a spread, the interval is read
    _, ci, why = correlation_ci("pearson", [_model(off=(3, 12)), GOLD], 30, 127, 0.90, 0)
    assert ci is not None and why == ""


def test_spearman_near_1_too():
    pred = _model()
    _, (lo, hi), why = correlation_ci("spearman", [pred, GOLD], 30, 127, 0.90, 0)
    rho = metrics.spearman(pred, GOLD)
    assert why == "" and lo < rho < hi < 1
