"""With every item of a task scored, the items-like-these line that cannot settle M gives the margins its own final
interval settles, read by the verdict's rule (margin_rule.settled_margins: kind and metrics.covered), not the 80%
power guess of a larger run; each figure it prints agrees with what the verdict then says at that margin and one
thousandth beside it. A sample's line keeps the guess."""

from __future__ import annotations

import re

from abricot_local.analysis import reproduction as rp

R = 0.005  # the published value's rounding at two decimals
FIGURES = re.compile(r"this interval settles margins of (\d\.\d{3}) (?:or more|to (\d\.\d{3}))"
                     r"(?: \(or, differing, (\d\.\d{3}) or under\))?")


def whole(value, ci90, published, margin, bounds=(-1.0, 1.0)):
    return rp.judge(value, ci90, published, margin, n=127, total=127, rounding=R, correlation=True, bounds=bounds)


def like_at(value, ci90, published, margin, bounds=(-1.0, 1.0)) -> str:
    """What the items-like-these line says at ``margin``: its verdict, or cannot tell (a margin covering every value)."""
    v = whole(value, ci90, published, margin, bounds)
    return v.like_kind if v.kind != rp.UNDEFINED else rp.UNDEFINED


def test_the_reviewers_row_gives_the_margins_its_interval_settles():
    # abricot_abs@calamita against the leaderboard's 0.29: items like these [-0.367, -0.063] over all 127 items
    v = whole(0.077, (-0.072, 0.222), 0.29, 0.31)
    assert v.exact and v.like_kind == rp.UNSETTLEABLE
    assert v.like_ci90 == (-0.072 - 0.29 - R, 0.222 - 0.29 + R)
    like = v.reasons[1]
    assert "90% CI [-0.367, -0.063] over 127 items: this task cannot settle +-0.31: all 127 items give a 90% CI of " \
        "about +-0.15, and this interval settles margins of 0.368 to 1.290 (or, differing, 0.062 or under), and " \
        "above 1.290 a margin covers every value the metric takes" in like
    assert "power" not in like and "about 0.44" not in like  # the guess of a larger run is gone: this run is final
    assert like_at(0.077, (-0.072, 0.222), 0.29, 0.4) == rp.REPRODUCED  # the reviewer's --margin 0.4


def test_every_printed_figure_agrees_with_the_verdict_beside_it():
    cases = (  # value, ci90, published: whole-task correlations whose items-like-these line cannot settle 0.31
        (0.077, (-0.072, 0.222), 0.29), (-0.009, (-0.157, 0.139), 0.30), (0.3, (-0.02, 0.62), 0.18),
        (0.5, (0.41, 0.62), 0.30), (0.2, (-0.05, 0.65), 0.30), (0.21, (0.08, 0.33), 0.60))
    for value, ci90, published in cases:
        line = whole(value, ci90, published, 0.31).reasons[1]
        assert "; " not in line  # the report joins a row's notes with "; " (report_whole)
        least, top, most = FIGURES.search(line).groups()
        least, top = float(least), float(top)
        at = lambda m: like_at(value, ci90, published, m)  # noqa: E731
        assert at(least) == rp.REPRODUCED and at(least - 0.001) != rp.REPRODUCED, line
        assert at(top) == rp.REPRODUCED and at(top + 0.001) == rp.UNDEFINED, line
        assert "cannot tell: the margin" in whole(value, ci90, published, top + 0.001).line
        if most is not None:
            assert at(float(most)) == rp.DIFFERS and at(float(most) + 0.001) != rp.DIFFERS, line
        else:  # the interval holds 0: no margin differs
            lo, hi = whole(value, ci90, published, 0.31).like_ci90
            assert lo <= 0 <= hi and at(0.001) != rp.DIFFERS


def test_a_margin_exactly_at_a_bound_is_not_settled_there():
    # kind reads the open (-M, M): an interval reaching -0.4 is reproduced only above 0.4, differs only under 0.2
    assert rp.settled_margins(-0.4, -0.2, 0.30, None) == (0.401, None, 0.199)
    assert rp.kind(-0.4, -0.2, 0.4) is None and rp.kind(-0.4, -0.2, 0.401) == rp.REPRODUCED
    assert rp.kind(-0.4, -0.2, 0.2) is None and rp.kind(-0.4, -0.2, 0.199) == rp.DIFFERS
    # no bounds known: no margin covers every value, and reproduced holds on ("or more")
    line = whole(0.0, (-0.1, 0.1), 0.30, 0.25, bounds=None).reasons[1]
    assert "this interval settles margins of 0.406 or more (or, differing, 0.194 or under)" in line
    assert "covers" not in line


def test_a_sample_keeps_the_guess_of_a_larger_run():
    v = rp.judge(0.0, (-0.1, 0.1), 0.30, 0.25, n=100, total=127, rounding=R)
    assert not v.exact and v.like_kind == rp.UNSETTLEABLE and v.like_margins == ()
    assert "even all 127 items give a 90% CI of about +-0.09, and tell a difference about 0.13 or more from a margin " \
        "(80% power): at this difference it settles margins of about 0.43 or more (or, differing, under 0.17)" \
        in v.reasons[1]
