"""The reproduction verdict's rule is one (reproduction.kind): the fixed-n verdict (reproduction.judge) and the
--until-settled looks (sequential: a look, expected_stop) give an exact value the same verdict. Every item scored, a
difference the published value's rounding puts on either side of the margin is "this task cannot settle M": no more
items exist to tell it (never the open "cannot tell", which is for a run with no interval)."""

from __future__ import annotations

import numpy as np

from abricot_local.analysis import reproduction as rp
from abricot_local.analysis import sequential as sq


def test_an_exact_value_within_the_rounding_of_the_margin_cannot_settle_at_every_door():
    # the reviewer's case: 0.402 against a published 0.30, margin 0.1, rounding 0.005, all 127 items scored
    v = rp.judge(0.402, None, 0.30, 0.1, n=127, total=127, rounding=0.005)
    assert v.kind == rp.UNSETTLEABLE
    assert v.line.startswith("this task cannot settle +-0.1: run - published +0.102 on all 127 items of the task "
                             "(exact; [+0.097, +0.107]")
    assert rp.words(type("C", (), dict(comparable=True, verdict=v.kind, margin=0.1, n=127, items_total=127,
                                       difference=v.difference, inside=None))) == "this task cannot settle 0.1"
    q = sq.Question("r", "accuracy", 0.1, published=0.30, rounding=0.005)
    d = 0.402 - 0.30
    assert sq._row_kind((d - 0.005, d + 0.005), q, exact=True) == v.kind  # the looks' rule, at n = N
    state = sq.start(127, [q], looks=[127])
    assert sq.expected_stop(state, q, truth=0.402) == (127, v.kind)  # 51 / 127 = 0.4016: 0.1016 +- 0.005
    gold = np.zeros(127, int)
    x = np.r_[np.zeros(51, int), np.ones(76, int)]  # accuracy 51/127
    look = sq.look(state, 127, {"r": [x, gold]}).latest[0]
    assert look.exact and look.verdict == v.kind and look.settled and look.words == "this task cannot settle 0.1"


def test_judge_and_the_looks_agree_on_every_exact_value_near_the_margin():
    q = sq.Question("r", "accuracy", 0.1, published=0.30, rounding=0.005)
    seen = set()
    for k in range(-40, 41):  # exact differences 0.06 .. 0.14 (and their negatives) around the margin
        for d in (0.1 + k * 0.001, -0.1 - k * 0.001):
            v = rp.judge(0.30 + d, None, 0.30, 0.1, n=127, total=127, rounding=0.005)
            assert v.kind == sq._row_kind(v.ci90, q, exact=True), d
            seen.add(v.kind)
    assert seen == {rp.REPRODUCED, rp.DIFFERS, rp.UNSETTLEABLE}  # never "cannot tell" with a value and every item
