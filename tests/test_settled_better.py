"""A rung better than its reference by more than the margin: the --until-settled rule's looks say ``better`` (better by
more than M) where compare says it, the record keeps it, ``check`` replays it (and flags a look recorded otherwise),
the rule's line and Run.published/ladder view word it as compare does, and the bench counts it."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from abricot_local import metrics
from abricot_local.analysis import compare, equivalence
from abricot_local.analysis import sequential as sq
from abricot_local.analysis.settled import SettledVerdict, restored
from abricot_local.record.schema import Settle
from abricot_local.run.settle import TaskRule, replay, section
from abricot_local.tasks.base import MetricInput

TOTAL, MARGIN = 1600, 0.02


def _better_pair(seed: int, psi: float = 0.14, d: float = 0.10) -> list[np.ndarray]:
    """A rung and its reference over TOTAL items in a random (nested) order: the reference right on 60%, their
    correctness differing on a share ``psi``, other - reference exactly ``d`` over the set."""
    rng = np.random.default_rng(seed)
    b, c = round(TOTAL * (psi + d) / 2), round(TOTAL * (psi - d) / 2)
    ref = rng.permutation(np.r_[np.ones(960, int), np.zeros(TOTAL - 960, int)])
    other = ref.copy()
    other[rng.choice(np.flatnonzero(ref == 0), b, replace=False)] = 1  # the rung alone right
    other[rng.choice(np.flatnonzero(ref == 1), c, replace=False)] = 0  # the reference alone right
    gold = np.ones(TOTAL, int)
    return [other, gold, ref, gold]


def _rule(v: list[np.ndarray], **kw) -> sq.Sequential:
    s = sq.start(TOTAL, [sq.Question("pair", "accuracy", MARGIN)], **kw)
    while not s.stopped:
        n = s.next_look
        s = sq.look(s, n, {"pair": [x[:n] for x in v]})
    return s


def _compare(v: list[np.ndarray], n: int) -> equivalence.Equivalence:
    """compare's verdict on the rung against its reference over the first ``n`` items (its own door: compare_metric,
    then equivalence.judge with the task's N)."""
    ia, ib = (MetricInput("accuracy", "accuracy", v[i][:n], v[i + 1][:n]) for i in (0, 2))
    m = compare.compare_metric("task", "other", "reference", ia, ib, seed=1, n_boot=metrics.N_BOOT)
    (e,) = equivalence.judge([m], [("other", "reference")], {}, MARGIN, totals={"task": TOTAL})
    return e


@pytest.mark.parametrize("seed", [3, 17])
def test_a_clearly_better_rung_settles_better_where_compare_says_better(seed):
    v = _better_pair(seed)
    s = _rule(v)
    (lk,) = s.latest
    assert s.settled and not lk.exact and lk.verdict == equivalence.BETTER
    assert lk.running[0] > MARGIN  # the rule's own (alpha-spent, intersected) interval lies above +M
    assert lk.words == equivalence.words(equivalence.BETTER, MARGIN) == "better by more than 0.02"
    # the kind is compare's classify on the same numbers (one rule for compare and the looks)
    assert equivalence.classify(lk.value, lk.running, MARGIN) == lk.verdict
    e = _compare(v, lk.n)  # compare on the same n items: its 90% interval inside the look's wider one, above +M too
    assert e.kind == equivalence.BETTER and e.diff == pytest.approx(lk.value)
    assert lk.interval[0] <= e.ci90[0] and e.ci90[1] <= lk.interval[1] and lk.level > 0.9
    assert "better by more than 0.02 (reached sequentially at look" in s.line(lk)
    # the looks before it were open: the rule stopped at the first look that settled it
    assert all(not e.settled for e in s.looks[:-1])


def test_a_look_still_straddling_plus_m_is_not_worse_and_every_item_scored_is_better_exactly():
    v = _better_pair(5, psi=0.20, d=0.035)  # close to +M: a look holds -M < lo <= M, not worse, as compare's
    s = _rule(v)
    first = next(lk for lk in s.looks if lk.settled)
    lo, hi = first.running
    assert first.verdict == equivalence.NOT_WORSE and -MARGIN < lo <= MARGIN <= hi
    exact = sq.look(sq.start(TOTAL, [sq.Question("pair", "accuracy", MARGIN)], looks=[TOTAL]), TOTAL, {"pair": v})
    (lk,) = exact.latest
    assert lk.exact and lk.value == pytest.approx(0.035) and lk.verdict == equivalence.BETTER
    assert lk.verdict == _compare(v, TOTAL).kind  # compare's exact verdict on every item


def test_the_plan_expects_better_where_the_first_settled_look_lies_above_plus_m():
    """expected_stop: the first look that settles it; a rung better by 0.15 settles better there, one better by 0.10
    (more discordant) settles not worse first (its interval still holds +M), and the rule stops on it, as before."""
    s = sq.start(TOTAL, [sq.Question("pair", "accuracy", MARGIN)])
    n, kind = sq.expected_stop(s, s.questions[0], truth=0.15, discordance=0.15)
    assert kind == equivalence.BETTER and n < TOTAL
    n, kind = sq.expected_stop(s, s.questions[0], truth=0.10, discordance=0.14)
    assert kind == equivalence.NOT_WORSE and n < TOTAL


def test_a_recorded_better_look_replays_under_check_and_a_mismatch_is_flagged():
    v = _better_pair(3)
    state = _rule(v)
    assert state.latest[0].verdict == equivalence.BETTER
    recorded = section(TaskRule("t", state, (), {"pair": "accuracy"}), Path("ref"))
    assert recorded.looks[-1].verdict == "better"  # results.json's word: equivalence.BETTER
    back = restored(recorded)  # the record's typed rule, back as the Sequential it was
    assert back.settled and back.latest[0].words == "better by more than 0.02"
    task = SimpleNamespace(metric_inputs=lambda samples: [SimpleNamespace(
        name="accuracy", stat="accuracy", x=np.array([s.pred for s in samples]),
        y=np.array([s.gold for s in samples]))])
    mine = [SimpleNamespace(pred=int(p), gold=int(g)) for p, g in zip(v[0], v[1])]
    ref = [SimpleNamespace(pred=int(p), gold=int(g)) for p, g in zip(v[2], v[3])]
    n = state.n
    assert replay(recorded, task, mine[:n], ref[:n], metrics={"pair": "accuracy"}) == []
    d = recorded.to_dict()
    d["looks"][-1]["verdict"] = equivalence.NOT_WORSE  # what the rule recorded before it knew `better`
    out = replay(Settle.from_dict(d, "sequential"), task, mine[:n], ref[:n], metrics={"pair": "accuracy"})
    assert out == [f"sequential look {state.taken} ({n} items) pair: recorded not worse at {n}, taken again better "
                   f"at {n}"]


def test_report_and_published_show_the_rules_better_as_a_settled_verdict():
    state = _rule(_better_pair(17))
    lk = state.latest[0]
    shown = SettledVerdict(lk, len(state.planned), state.line(lk).removeprefix("pair: ")).to_json()
    assert (shown["verdict"], shown["words"], shown["settled"]) == ("better", "better by more than 0.02", True)
    assert shown["line"].startswith("better by more than 0.02 (reached sequentially at look ")


def test_the_bench_counts_better_as_settled_and_right_only_above_plus_m():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import sequential as bench  # bench/sequential.py

    assert equivalence.BETTER in sq.SETTLED
    assert bench.outcome(equivalence.BETTER, 320, TOTAL, d=0.10, m=MARGIN) == "right"
    assert bench.outcome(equivalence.BETTER, 320, TOTAL, d=0.01, m=MARGIN) == "wrong"  # not above +M
    assert bench.outcome(equivalence.BETTER, 320, TOTAL, d=MARGIN, m=MARGIN) == "wrong"  # on it
    v = _better_pair(3)
    assert bench.fixed(sq.Question("pair", "accuracy", MARGIN), v, TOTAL, 400, seed=1) == equivalence.BETTER
    kind, n = bench.shipped(sq.Question("pair", "accuracy", MARGIN), v, TOTAL, True, 1)
    assert (kind, n) == (equivalence.BETTER, _rule(v).n)
