"""The 10-answer rule of a correlation's interval (metrics.interval_read) holds for every verdict line: items like
these are not judged from a near-constant run's bootstrap even when every item was scored (the exact verdict
stands), and a --limit run that fails it is still told its items are no draw."""

from __future__ import annotations

import math

from abricot_local.analysis import reproduction as rp
from abricot_local.errors import render

WHY = ("fewer than 10 items away from a vector's most common value (1): a correlation's interval is not read yet")


def test_every_item_scored_keeps_its_exact_verdict_but_judges_no_items_like_these():
    v = rp.judge(-0.116, (-0.212, -0.088), 0.29, 0.05, n=127, total=127, correlation=True, why=WHY)
    assert v.kind == rp.DIFFERS and v.exact and math.isclose(v.difference, -0.406)
    assert v.like_kind == rp.UNDEFINED and all(math.isnan(x) for x in v.like_ci90)
    (like,) = [r for r in v.reasons if r.startswith("items like these")]
    assert "no interval" in like and WHY in like and "90% CI [" not in like
    readable = rp.judge(-0.116, (-0.212, -0.088), 0.29, 0.05, n=127, total=127, correlation=True)
    assert readable.like_kind == rp.DIFFERS  # the same run, its interval readable: judged


def test_a_limit_run_failing_the_rule_is_told_its_items_are_no_draw():
    v = rp.judge(0.05, (-0.3, 0.4), 0.30, 0.05, n=15, total=127, correlation=True, drawn=False, why=WHY)
    assert v.kind == rp.UNDEFINED and v.items == 15
    text = render(v.line)
    assert "no draw of its 127" in text and "sample=N" in text and WHY in text
