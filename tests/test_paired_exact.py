"""The exact interval of a task's paired difference (analysis/paired_exact.py): it holds the task's own difference 90%
of the time or more whatever the task holds, where Tango's narrowed by the finite-population factor falls short;
compare's equivalence verdict and the --until-settled rule read it: the full construction on a task of at most
MAX_TOTAL items, above it the restricted one (Berger and Boos) up to MAX_CHANGED changed answers, Tango's with the
factor beyond."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import multivariate_hypergeom

from abricot_local.analysis import equivalence, stats
from abricot_local.analysis.paired_exact import (MAX_CHANGED, MAX_TOTAL, exact_paired_set_ci, paired_set_ci,
                                                 restricted_paired_set_ci, tango_set_ci)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))


def outcomes(n: int) -> list[tuple[int, int]]:
    return [(b, c) for b in range(n + 1) for c in range(n + 1 - b)]


def test_it_holds_every_sets_difference_at_90_percent_where_tangos_falls_short():
    total, n = 16, 6
    exact = {o: exact_paired_set_ci(*o, n, total) for o in outcomes(n)}
    tango = {o: stats.paired_score_ci(*o, n, level=0.9, factor=stats.fpc(n, total)) for o in outcomes(n)}
    worst = {"exact": 1.0, "tango": 1.0}
    for big_b in range(total + 1):
        for big_c in range(total + 1 - big_b):
            law = multivariate_hypergeom([big_b, big_c, total - big_b - big_c], n)
            truth = (big_b - big_c) / total
            for name, ci in (("exact", exact), ("tango", tango)):
                held = sum(law.pmf([b, c, n - b - c]) for (b, c), (lo, hi) in ci.items()
                           if lo <= truth + 1e-12 and truth - 1e-12 <= hi)
                worst[name] = min(worst[name], held)
    assert worst["exact"] >= 0.9 - 1e-9 > worst["tango"]


def test_it_is_the_bench_constructions_interval_for_every_outcome():
    """bench/coverage.py computes every outcome's interval at once for its tables: the same intervals."""
    import coverage

    ob, oc, lo, hi = coverage.exact_unconditional(40, 12)
    assert [exact_paired_set_ci(int(b), int(c), 12, 40) for b, c in zip(ob, oc)] == list(zip(lo, hi))


def test_a_whole_task_is_its_point_and_bad_counts_are_refused():
    assert exact_paired_set_ci(3, 1, 20, 20) == (0.1, 0.1)
    assert exact_paired_set_ci(0, 0, 0, 20) != exact_paired_set_ci(0, 0, 0, 20)  # NaN: no item
    with pytest.raises(ValueError):
        exact_paired_set_ci(4, 3, 6, 20)


def test_the_task_size_picks_the_interval_and_the_verdict_reads_it():
    assert paired_set_ci(2, 1, 40, 127) == exact_paired_set_ci(2, 1, 40, 127)
    assert MAX_TOTAL >= 127  # ABRICOT's tasks
    assert paired_set_ci(2, 1, 40, 1600) == restricted_paired_set_ci(2, 1, 40, 1600)  # DISCOTEX's: few changed
    many = (MAX_CHANGED // 2 + 1, MAX_CHANGED // 2)
    assert paired_set_ci(*many, 400, 1600) == tango_set_ci(*many, 400, 1600)  # Tango + FPC on the set's grid
    m = SimpleNamespace(a="o", b="r", diff=(3 - 1) / 40, ci90=(0, 0), stat="accuracy", n=40, task="t",
                        metric="accuracy", note="", detail={"a_only": 3, "b_only": 1})
    small = equivalence.verdict_of(m, "o", "r", 0.05, 127)
    assert small.ci90 == pytest.approx(exact_paired_set_ci(3, 1, 40, 127))
    assert small.like_ci90 == pytest.approx(stats.paired_score_ci(3, 1, 40, level=0.9))  # items like these: Tango's
    flipped = equivalence.verdict_of(m, "r", "o", 0.05, 127)  # reference - other: the interval mirrored
    assert flipped.ci90 == pytest.approx((-small.ci90[1], -small.ci90[0]))
    big = equivalence.verdict_of(m, "o", "r", 0.05, 1600)
    assert big.ci90 == pytest.approx(restricted_paired_set_ci(3, 1, 40, 1600))
    assert np.isclose(small.diff, 0.05)


def _log_choose(a, k):
    from scipy.special import gammaln

    a, k = np.broadcast_arrays(np.asarray(a, float), np.asarray(k, float))
    ok = (k >= 0) & (k <= a)
    return np.where(ok, gammaln(a + 1) - gammaln(np.where(ok, k, 0) + 1) - gammaln(np.where(ok, a - k, 0) + 1), -np.inf)


def test_on_a_larger_task_the_restricted_interval_holds_every_sets_difference_at_90_percent():
    """Above MAX_TOTAL items (here 160, 8 of them drawn): every population (B, C) of the task, every outcome's
    probability summed where its interval holds D. Tango's with the factor falls short on the same populations."""
    total, n = MAX_TOTAL + 10, 8
    ob, oc = np.array(outcomes(n)).T
    restricted = np.array([restricted_paired_set_ci(int(b), int(c), n, total) for b, c in zip(ob, oc)])
    assert [tuple(r) for r in restricted] == [paired_set_ci(int(b), int(c), n, total) for b, c in zip(ob, oc)]
    tango = np.array([stats.paired_score_ci(int(b), int(c), n, level=0.9, factor=stats.fpc(n, total))
                      for b, c in zip(ob, oc)])
    big_b, big_c = (x.ravel() for x in np.meshgrid(np.arange(total + 1), np.arange(total + 1), indexing="ij"))
    keep = big_b + big_c <= total
    big_b, big_c = big_b[keep][:, None], big_c[keep][:, None]
    law = np.exp(_log_choose(big_b, ob) + _log_choose(big_c, oc) + _log_choose(total - big_b - big_c, n - ob - oc)
                 - _log_choose(total, n))
    assert np.allclose(law.sum(axis=1), 1.0)
    truth = (big_b - big_c) / total
    held = {name: (law * ((ci[:, 0] <= truth + 1e-12) & (truth - 1e-12 <= ci[:, 1]))).sum(axis=1).min()
            for name, ci in (("restricted", restricted), ("tango", tango))}
    assert held["restricted"] >= 0.9 - 1e-9 > held["tango"]


@pytest.mark.parametrize("b, c, n, total", [(5, 5, 20, 300), (22, 2, 40, 300), (2, 1, 40, 1600)])
def test_the_restricted_search_finds_the_bounds_a_scan_of_every_difference_finds(b, c, n, total):
    """The search starts from Tango's bounds and tests GUARD differences past each bound it finds; a scan tests
    every D the changed answers' confidence set allows: the same interval (the first two cases hold an island of
    held D past a gap of 4: the guard reaches it; 3 would not)."""
    assert restricted_paired_set_ci(b, c, n, total) == restricted_paired_set_ci(b, c, n, total, scan=True)


def test_the_restricted_interval_is_the_point_at_n_equal_n_and_refuses_bad_counts():
    assert restricted_paired_set_ci(3, 1, 200, 200) == (0.01, 0.01)
    assert restricted_paired_set_ci(30, 30, 1599, 1600) == (0.0, 0.0)  # the one unseen item seldom moves it
    with pytest.raises(ValueError):
        restricted_paired_set_ci(4, 3, 6, 200)
