"""The changed-answers rule, one rule for compare's verdict and the --until-settled looks (equivalence.few_changed):
a rung's correlation difference made by fewer than 10 changed answers is not read against a margin below every item.
Without it the looks' bootstrap said "equivalent" 18-23% of the time for a rung truly worse (the reviewer's
ABRICOT ladder, 7-13 of 127 answers changed), against the 10% the rule states."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from abricot_local import metrics
from abricot_local.analysis import equivalence, stats
from abricot_local.analysis import sequential as sq

TOTAL = 127


def ladder(changed: int, n: int = 40, seed: int = 3):
    """A reference's 1-5 ratings against gold and a rung with ``changed`` of its first ``n`` answers moved by one."""
    g = np.random.default_rng(seed)
    gold = g.integers(1, 6, TOTAL)
    ref = np.clip(gold + g.integers(-2, 3, TOTAL), 1, 5)
    rung = ref.copy()
    at = g.choice(n, changed, replace=False)
    rung[at] = np.where(ref[at] < 5, ref[at] + 1, ref[at] - 1)
    return rung, gold, ref


def look(changed: int, n: int = 40) -> sq.Look:
    rung, gold, ref = ladder(changed, n)
    state = sq.start(TOTAL, [sq.Question("pair", "pearson", 0.3)], looks=[n])
    return sq.look(state, n, {"pair": (rung[:n], gold[:n], ref[:n], gold[:n])}).looks[-1]


def test_a_look_with_few_changed_answers_waits_with_compares_reason():
    few = look(5)
    assert few.verdict == equivalence.UNDEFINED and not few.settled and few.interval is None
    assert few.note == equivalence.few_changed("pearson", 5, 40) and "5 of the 40 items" in few.note
    many = look(stats.MIN_CORRELATION_ITEMS)
    assert many.interval is not None and many.note == ""
    assert equivalence.few_changed("accuracy", 0, 40) == ""  # an accuracy's interval: no such rule


def test_compare_reads_the_same_rule():
    m = SimpleNamespace(a="rung", b="ref", task="t", metric="pearson", stat="pearson", n=40, diff=-0.01,
                        ci90=(-0.05, 0.03), note="", detail=(("changed", 5),))
    e = equivalence.verdict_of(m, "rung", "ref", 0.3, TOTAL)
    assert e.kind == equivalence.UNDEFINED and e.note == equivalence.few_changed("pearson", 5, 40)


def test_a_rung_truly_worse_made_by_a_handful_of_answers_is_never_settled_equivalent_below_every_item():
    """The reviewer's case, shrunk: the set's difference beyond the margin, 6 answers changed of 127; over
    orders of the items, no look below N reads an interval, so none says equivalent."""
    rung, gold, ref = ladder(6, n=TOTAL, seed=5)
    d = metrics.pearson(rung, gold) - metrics.pearson(ref, gold)
    margin = abs(d) * 0.9  # the set's difference just beyond it
    rng = np.random.default_rng(2)
    for rep in range(6):
        o = rng.permutation(TOTAL)
        state = sq.start(TOTAL, [sq.Question("pair", "pearson", margin)], seed=rep)
        while not state.stopped:
            n = state.next_look
            state = sq.look(state, n, {"pair": (rung[o[:n]], gold[o[:n]], ref[o[:n]], gold[o[:n]])})
        assert all(lk.interval is None for lk in state.looks if lk.n < TOTAL)
        assert state.latest[0].exact and state.latest[0].verdict not in (equivalence.EQUIVALENT,
                                                                         equivalence.NOT_WORSE)
