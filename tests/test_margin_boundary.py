"""One rule for a margin that cannot fail (metrics.covered; metrics.covered_difference is covered of 0 over a
difference's bounds): a verdict reads the open (-M, M), so a margin of exactly the reach can still fail and is judged;
only one beyond it is cannot tell. Pure functions, no run."""

from __future__ import annotations

import pytest

from abricot_local import metrics
from abricot_local.analysis import reproduction as rp


@pytest.mark.parametrize("published, bounds", [(0.30, (-1.0, 1.0)), (-0.6, (-1.0, 1.0)), (0.25, (0.0, 1.0))])
def test_a_margin_of_exactly_the_reach_is_judged_since_the_farther_bound_still_fails_it(published, bounds):
    lo, hi = bounds
    reach = max(published - lo, hi - published)
    assert metrics.covered(published, reach, bounds) == "" and metrics.covered(published, reach * 1.001, bounds)
    far = lo if published - lo >= hi - published else hi  # a run there differs by exactly the margin: not within it
    assert not -reach < far - published < reach
    v = rp.judge(published + 0.01, (published - 0.02, published + 0.04), published, reach, n=40, total=127,
                 correlation=lo < 0, bounds=bounds)
    assert "covers every value" not in v.line and v.kind == rp.REPRODUCED


@pytest.mark.parametrize("stat", ["accuracy", "pearson"])
def test_a_differences_rule_is_the_published_rule_at_0_over_the_differences_bounds(stat):
    lo, hi = metrics.BOUNDS[stat]
    width = hi - lo
    for margin in (0.02, width / 2, width, width + 1e-9, width + 0.5, 1e9):
        assert bool(metrics.covered_difference(margin, (lo, hi))) == bool(metrics.covered(0.0, margin, (-width, width)))
    assert not metrics.covered_difference(width, (lo, hi)) and metrics.covered_difference(width + 1e-9, (lo, hi))


def test_a_rung_at_a_margin_no_difference_can_exceed_holds_no_rules_verdict_its_table_too():
    from types import SimpleNamespace

    from abricot_local.analysis import equivalence as eq
    from abricot_local.analysis.ladder import Rung
    from abricot_local.report.ladder import verdict_text

    def rung(margin: float) -> Rung:
        m = SimpleNamespace(a="q2", b="q8", diff=0.0, ci90=(0.0, 0.0), stat="accuracy", n=40, task="t",
                            metric="accuracy", note="", detail={"a_only": 3, "b_only": 3, "changed": 20})
        (e,) = eq.judge([m], [("q2", "q8")], {}, margin)
        rule = SimpleNamespace(line="equivalent within (the rule's line)", look=None)  # recorded before refusal
        return Rung("b", "t", "q2", "Q2_K", "q8", None, None, n=40, verdict=e, settled=rule)

    vacuous, kept = rung(1.5), rung(1.0)  # a margin of exactly the width can still fail: the rule's verdict stands
    assert vacuous.settled is None and verdict_text(vacuous) == "cannot tell" and vacuous.verdict.covered
    assert kept.settled is not None and verdict_text(kept) == "equivalent within (the rule's line)"
