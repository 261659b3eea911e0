"""Issue 50: stop when it is settled. The sequential rule (analysis/sequential.py) spends its error across the looks
(look k at 1 - 0.1 x 2^-k); a rule that reads 90% at every look and stops when settled is wrong far more often than
10% of the time. Its looks and levels, its exact verdict at n = N, that a settled verdict stays settled, and that
its intervals are the fixed-n verdict's (issue 47) at the look's level. bench/sequential.py has the figures."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from abricot_local import metrics
from abricot_local.analysis import equivalence, reproduction, stats
from abricot_local.analysis import sequential as sq
from abricot_local.errors import UsageError
from invented_data import write_discotex


def replay(state: sq.Sequential, vectors: dict[str, list[np.ndarray]]) -> sq.Sequential:
    """The item loop's calls: a look at each planned n, over the first n items, until the rule stops."""
    while not state.stopped:
        n = state.next_look
        state = sq.look(state, n, {name: [v[:n] for v in vs] for name, vs in vectors.items()})
    return state


# -- looks and levels ------------------------------------------------------------------------------------------
def test_looks_double_from_twenty_and_end_at_the_last_item_or_max_items():
    assert sq.planned_looks(1600) == (20, 40, 80, 160, 320, 640, 1280, 1600)
    assert sq.planned_looks(127) == (20, 40, 80, 127)
    assert sq.planned_looks(127, max_items=80) == (20, 40, 80)
    assert sq.planned_looks(127, max_items=500) == (20, 40, 80, 127)
    assert sq.planned_looks(127, looks=[60, 10, 10, 300]) == (10, 60, 127)  # sorted, once, past the last dropped
    assert sq.planned_looks(15) == (15,)
    for bad in (dict(looks=[0, 20]), dict(max_items=0)):
        with pytest.raises(UsageError):
            sq.planned_looks(127, **bad)


def test_look_k_is_at_one_minus_alpha_over_two_to_the_k_and_the_misses_sum_under_alpha():
    assert [sq.level(k) for k in (1, 2, 3)] == [0.95, 0.975, 0.9875]
    assert sum(1 - sq.level(k) for k in range(1, 60)) < sq.ALPHA
    q = sq.Question("row", "accuracy", 0.02, published=0.3)
    s = sq.start(1600, [q])
    assert [s.level(k) for k in range(1, 9)] == [sq.level(k) for k in range(1, 9)]
    assert sq.start(1600, [q], spend=False).level(5) == pytest.approx(0.90)
    six_of_twenty = [np.r_[np.ones(6), np.zeros(14)], np.ones(20)]
    s = sq.look(s, 20, {"row": six_of_twenty})
    assert (s.looks[0].k, s.looks[0].level, s.looks[0].verdict, s.next_look) == (1, 0.95, reproduction.UNSETTLED, 40)
    with pytest.raises(UsageError):  # a look must be one still to come
        sq.look(s, 20, {"row": six_of_twenty})
    with pytest.raises(UsageError):
        sq.start(1600, [])  # nothing to settle


# -- the intervals: the set's accuracy exact, the paired difference issue 47's Tango at the look's level ----------
def _hypergeometric_interval(right: int, n: int, total: int, level: float) -> tuple[float, float]:
    """Every K whose two hypergeometric tails at ``right`` exceed (1 - level) / 2, by integer counting."""
    tail, keep = (1 - level) / 2, []
    for k in range(total + 1):
        pmf = [math.comb(k, j) * math.comb(total - k, n - j) / math.comb(total, n) for j in range(n + 1)]
        if sum(pmf[right:]) > tail and sum(pmf[: right + 1]) > tail:
            keep.append(k)
    return keep[0] / total, keep[-1] / total


def test_a_look_reads_the_exact_interval_of_the_sets_accuracy_and_tangos_for_a_pair():
    rng = np.random.default_rng(3)
    n, total = 60, 150
    x, gold = rng.integers(0, 5, n), rng.integers(0, 5, n)
    xr = np.where(rng.random(n) < 0.8, x, gold)
    row = sq.Question("row", "accuracy", 0.05, published=0.25, rounding=0.005)
    pair = sq.Question("pair", "accuracy", 0.05)
    s = sq.start(total, [row, pair], looks=[n], spend=False)  # one look at 90%: the fixed-n verdict's level
    s = sq.look(s, n, {"row": [x, gold], "pair": [x, gold, xr, gold]})
    got = {lk.question: lk for lk in s.latest}
    right = int(np.sum(x == gold))
    lo, hi = _hypergeometric_interval(right, n, total, 0.90)
    assert got["row"].interval == pytest.approx((lo - 0.255, hi - 0.245), abs=1e-12)
    wilson = metrics.wilson(right, n, level=0.90, fpc=stats.fpc(n, total))  # the fixed-n verdict's: no wider
    assert lo <= wilson[0] + 1 / total and wilson[1] - 1 / total <= hi
    for r, m_, t_ in ((0, 20, 127), (20, 20, 127), (7, 40, 40)):
        assert stats.exact_set_ci(r, m_, t_, level=0.95) == pytest.approx(_hypergeometric_interval(r, m_, t_, 0.95))
    a, b = x == gold, xr == gold
    detail = {"a_only": int(np.sum(a & ~b)), "b_only": int(np.sum(~a & b))}
    m = SimpleNamespace(a="o", b="r", diff=float(a.mean() - b.mean()), ci90=(0, 0), stat="accuracy", n=n, task="t",
                        metric="accuracy", note="", detail=detail)
    e = equivalence.verdict_of(m, "o", "r", 0.05, total)  # compare's equivalence verdict
    assert got["pair"].interval == pytest.approx(e.ci90, abs=1e-12)
    assert got["pair"].verdict == e.kind


def test_every_item_scored_gives_the_sets_exact_verdict_and_cannot_settle_on_the_margin():
    total = 40  # every figure below a binary fraction: no rounding puts the margin's on either side
    gold = np.zeros(total, int)
    x = np.r_[np.zeros(15, int), np.ones(25, int)]  # accuracy 0.375 exactly
    xr = np.r_[np.zeros(20, int), np.ones(20, int)]  # 0.5: other - reference = -0.125
    questions = [sq.Question("far", "accuracy", 0.0625, published=0.25), sq.Question("on", "accuracy", 0.125,
                 published=0.25), sq.Question("pair", "accuracy", 0.0625), sq.Question("pair-on", "accuracy", 0.125)]
    s = sq.start(total, questions, looks=[total])
    s = sq.look(s, total, {"far": [x, gold], "on": [x, gold], "pair": [x, gold, xr, gold],
                           "pair-on": [x, gold, xr, gold]})
    got = {lk.question: lk for lk in s.latest}
    assert s.stopped and all(lk.exact for lk in s.latest)
    assert got["far"].verdict == reproduction.DIFFERS and got["far"].words == "differs by +0.125"
    assert got["far"].running == (0.125, 0.125)
    assert got["on"].verdict == reproduction.UNSETTLEABLE  # exactly on the margin, every item scored: nothing settles it
    assert got["pair"].verdict == equivalence.WORSE and got["pair"].value == -0.125
    assert got["pair-on"].verdict == equivalence.UNDEFINED
    # a published value's rounding can leave the exact value on either side of the margin: this task cannot settle it
    s = sq.start(total, [sq.Question("r", "accuracy", 0.128, published=0.25, rounding=0.005)], looks=[total])
    assert sq.look(s, total, {"r": [x, gold]}).latest[0].verdict == reproduction.UNSETTLEABLE
    assert "every item scored" in s.line(sq.look(s, total, {"r": [x, gold]}).latest[0])


def test_correlations_are_open_until_they_have_an_interval_and_exact_at_n():
    rng = np.random.default_rng(5)
    total = 127
    y = rng.integers(1, 6, total).astype(float)
    x = np.clip(np.round(y + rng.normal(0, 1.2, total)), 1, 5)
    q = sq.Question("r", "pearson", 0.05, published=0.99)
    s = sq.start(total, [q], looks=[5, 30])
    s = sq.look(s, 5, {"r": [x[:5], y[:5]]})
    assert s.latest[0].verdict == reproduction.UNDEFINED and not s.stopped  # fewer than 10 items: not read
    s = sq.look(s, 30, {"r": [x[:30], y[:30]]})
    assert s.latest[0].verdict == reproduction.DIFFERS and s.stopped  # far below 0.99
    rare = np.r_[np.full(6, 2.0), np.ones(54)]  # 6 items off the commonest answer: its r is not yet read (the bench's
    lk = sq.look(sq.start(total, [q], looks=[60]), 60, {"r": [rare, y[:60]]}).latest[0]  # near-constant models)
    assert lk.verdict == reproduction.UNDEFINED and "most common value (6)" in lk.note
    flat = sq.start(total, [q], looks=[30])
    assert sq.look(flat, 30, {"r": [np.ones(30), y[:30]]}).latest[0].verdict == reproduction.UNDEFINED
    exact = replay(sq.start(total, [sq.Question("r", "pearson", 0.05, published=metrics.pearson(x, y))],
                            looks=[]), {"r": [x, y]})
    assert exact.latest[0].verdict == reproduction.REPRODUCED and exact.latest[0].value == pytest.approx(0.0)


# -- a settled verdict stays settled --------------------------------------------------------------------------
def never_reversed() -> None:
    """Several verdicts at once: one held open keeps the rule looking, so every other is read again after it
    settles. Below N its interval only narrows (the looks intersected) and its verdict stays (not worse may become
    equivalent or better); at N the exact verdict differs from an earlier one only where that one was wrong."""
    total, reversed_at_n, wrong_before, reread = 400, 0, 0, 0
    rng = np.random.default_rng(11)
    for rep in range(20):  # 74 settled verdicts read again at later looks (30 reps: 111)
        gold = np.zeros(total, int)
        x = (rng.random(total) < 0.45).astype(int)
        xr = np.where(rng.random(total) < 0.15, 1 - x, x)
        questions = [sq.Question(f"row{k}", "accuracy", 0.03, published=0.55 + 0.03 * k) for k in range(3)]
        questions += [sq.Question("pair", "accuracy", 0.03), sq.Question("open", "accuracy", 0.001,
                                                                           published=float(x.mean()))]
        vectors = {q.name: ([x, gold, xr, gold] if q.paired else [x, gold]) for q in questions}
        s = replay(sq.start(total, questions), vectors)
        for q in questions:
            mine = [lk for lk in s.looks if lk.question == q.name]
            first = next((lk for lk in mine if lk.settled), None)
            if first is None:
                continue
            for before, after in zip(mine, mine[1:]):
                if not after.exact and before.running is not None:
                    assert before.running[0] <= after.running[0] <= after.running[1] <= before.running[1]
            for later in mine[mine.index(first) + 1:]:
                reread += 1
                kept = later.verdict == first.verdict or (first.verdict, later.verdict) in (
                    (equivalence.NOT_WORSE, equivalence.EQUIVALENT), (equivalence.NOT_WORSE, equivalence.BETTER)
                )  # equivalent or better says more, nothing against
                if later.exact and not kept:
                    reversed_at_n += 1
                    wrong_before += not _holds(first.verdict, later.value, q.margin)
                else:
                    assert kept, (q, first, later)
    assert reread > 60  # settled verdicts were read again at later looks
    assert reversed_at_n == wrong_before  # every change at N corrects a wrong earlier verdict


def test_a_settled_verdict_is_never_reversed_at_a_later_look_below_n(never_reversed_child):
    """never_reversed's checks, in a child started once the tests are collected (NEVER_REVERSED): each assert as
    it was, the child to exit 0 and say 'checked'."""
    r = never_reversed_child.result()
    assert r.returncode == 0 and r.stdout.split() == ["checked"], r.stdout + r.stderr[-3000:]


def _holds(kind: str, d: float, m: float) -> bool:
    return {reproduction.REPRODUCED: abs(d) < m, equivalence.EQUIVALENT: abs(d) < m, reproduction.DIFFERS: abs(d) > m,
            equivalence.BETTER: d > m, equivalence.NOT_WORSE: d > -m, equivalence.WORSE: d < -m}.get(kind, True)


# -- the guarantee, in a seeded simulation on the fake backend's answers ---------------------------------------
def fake_answers(folder: Path) -> list[np.ndarray]:
    """Two fake "models" (the fake backend under two seeds) on 240 invented DISCOTEX items written into ``folder``:
    whether each is right."""
    from abricot_local.backends.fake import N_VOCAB, FakeBackend
    from abricot_local.backends.options import ScoringOptions
    from abricot_local.tasks.selection import prepare
    from abricot_local.run.execute import score_items
    from abricot_local.tasks import make_task
    from abricot_local.tasks.base import TaskOptions

    write_discotex(folder, per_source=120)
    task = make_task("discotex", TaskOptions(data_dir=str(folder), allow_download=False))
    items = list(prepare([task], None)[0].items)
    right = []
    for seed in (1, 2):
        fake = FakeBackend("fake", ScoringOptions(seed=seed))
        fake.n_vocab = N_VOCAB
        by_id = {it.id: task.sample(it, scored) for it, scored in score_items(items, fake)}
        right.append(np.array([by_id[it.id].pred == by_id[it.id].gold for it in items], dtype=int))
    return right


def wrong_rate(right: list[np.ndarray], spend: bool, reps: int, seed: int) -> tuple[float, float]:
    """How often the rule settles a verdict before N when the truth is on the margin (every such verdict is
    wrong): a published row at the set's accuracy - M, and the weaker model as the rung, M = its deficit -d (not
    worse, worse and equivalent all false)."""
    other, ref = sorted(right, key=np.mean)
    total = len(other)
    d = float(other.mean() - ref.mean())
    assert d < 0  # the two fake models differ: -d is a margin
    ones = np.ones(total, int)
    rng, wrong = np.random.default_rng(seed), 0
    for _ in range(reps):
        order = rng.permutation(total)
        row = sq.Question("row", "accuracy", 0.05, published=float(other.mean()) - 0.05)
        pair = sq.Question("pair", "accuracy", -d)
        for q, v in ((row, [other[order], ones]), (pair, [other[order], ones, ref[order], ones])):
            s = replay(sq.start(total, [q], spend=spend), {q.name: v})
            wrong += s.settled and not s.latest[0].exact
    p = wrong / (2 * reps)
    return p, math.sqrt(p * (1 - p) / (2 * reps))


# the simulation below, in a process of its own started once the tests are collected (conftest.start_early): its
# 5 s of arithmetic run beside the suite's other tests, on the machine's other core; the same functions and numbers
PEEKING = """
import json, sys
sys.path[:0] = sys.argv[1:3]  # the package the suite imports, and tests/
from pathlib import Path
import test_sequential as t
right = t.fake_answers(Path(sys.argv[3]))
print(json.dumps([*t.wrong_rate(right, spend=False, reps=100, seed=7), *t.wrong_rate(right, spend=True, reps=100, seed=7)]))
"""
NEVER_REVERSED = """
import sys
sys.path[:0] = sys.argv[1:3]  # the package the suite imports, and tests/
import test_sequential as t
t.never_reversed()
print("checked")
"""


def early_children(tmp_path_factory) -> dict:
    """PEEKING's process (conftest.Early), started by conftest once the tests are collected (conftest.start_early)."""
    import abricot_local
    from conftest import Early  # here: the child imports this module, and not the suite's conftest

    folder = tmp_path_factory.mktemp("seq") / "discotex"
    paths = [str(Path(abricot_local.__file__).parents[1]), str(Path(__file__).parent)]
    return {"peeking": Early([sys.executable, "-c", PEEKING, *paths, str(folder)], timeout=300),
            "never_reversed": Early([sys.executable, "-c", NEVER_REVERSED, *paths], timeout=300)}


@pytest.fixture(scope="module")
def peeking(tmp_path_factory):
    from conftest import early_child

    yield from early_child(__name__, early_children, tmp_path_factory, "peeking")


@pytest.fixture(scope="module")
def never_reversed_child(tmp_path_factory):
    from conftest import early_child

    yield from early_child(__name__, early_children, tmp_path_factory, "never_reversed")


def test_peeking_at_ninety_percent_exceeds_the_nominal_rate_and_the_shipped_rule_stays_within(peeking):
    r = peeking.result()
    assert r.returncode == 0, r.stderr[-3000:]
    peek, peek_se, ship, ship_se = json.loads(r.stdout)  # wrong_rate(fake_answers, spend=..., reps=100, seed=7)
    assert peek > sq.ALPHA + 4 * peek_se, (peek, peek_se)  # repeated looks at 90%: far above 10%
    assert ship <= sq.ALPHA, (ship, ship_se)
    assert peek - ship > 6 * math.hypot(peek_se, ship_se), (peek, ship)


# -- what results.json will hold ------------------------------------------------------------------------------
def test_the_record_is_plain_numbers_and_strings_and_says_how_it_was_reached():
    rng = np.random.default_rng(2)
    total = 300
    x, gold = (rng.random(total) < 0.2).astype(int), np.ones(total, int)
    q = sq.Question("CALAMITA: M discotex.accuracy", "accuracy", 0.02, published=0.60, rounding=0.005)
    s = replay(sq.start(total, [q]), {q.name: [x, gold]})
    assert s.stopped and s.settled and s.n == 20 and s.latest[0].verdict == reproduction.DIFFERS
    text = json.dumps(dataclasses.asdict(s), allow_nan=False)  # no NaN, no object: a JSON record holds it
    assert json.loads(text)["looks"][0]["level"] == 0.95
    line = s.line(s.latest[0])
    assert "reached sequentially at look 1 of 5" in line and "at most 0.1" in line and "differs by more" in line
    assert sq.expected_stop(s, q) == (total, reproduction.REPRODUCED)  # within 0.02: every item
    assert sq.expected_stop(s, sq.Question("w", "accuracy", 0.3, published=0.6)) == (20, reproduction.REPRODUCED)
    capped = sq.start(total, [q], max_items=80)
    assert sq.expected_stop(capped, q) == (80, reproduction.UNSETTLED)
    assert sq.expected_stop(s, sq.Question("p", "accuracy", 0.02)) is None  # a pair: its discordance unknown


def test_the_bench_s_fixed_n_run_is_judged_by_the_tool_s_own_verdict():
    """bench/sequential.py's fixed-n comparator is the verdict a `--sample n` run gets (baselines.evidence and
    check_run; compare's equivalence.verdict_of), not Wilson's or Tango's interval narrowed by the finite-population
    correction, nor a percentile bootstrap: each case below is one those settled and the tool's verdict does not."""
    import sys
    from pathlib import Path

    from abricot_local.analysis.paired_exact import paired_set_ci

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import sequential as bench  # bench/sequential.py

    none_right = [np.zeros(20, int), np.ones(20, int)]  # 0 of 20 right, published 0.15: run - published -0.15
    row = sq.Question("row", "accuracy", 0.02, published=0.15)
    assert metrics.wilson(0, 20, level=0.90, fpc=stats.fpc(20, 1600))[1] < 0.15 - 0.02  # narrowed Wilson: differs
    assert stats.exact_set_ci(0, 20, 1600, level=0.90)[1] > 0.15 - 0.02  # the exact interval reaches the margin
    assert bench.fixed(row, none_right, 1600, 20, seed=1) == reproduction.UNSETTLED
    gold = np.ones(40, int)  # a rung right alone on 1 item, its reference on 2, 40 of 127 items, margin 0.1
    other, ref = np.r_[1, 0, 0, np.ones(37, int)], np.r_[0, 1, 1, np.ones(37, int)]
    pair = sq.Question("pair", "accuracy", 0.1)
    assert -0.1 < stats.paired_score_ci(1, 2, 40, level=0.90, factor=stats.fpc(40, 127))[0]  # narrowed Tango: settled
    assert paired_set_ci(1, 2, 40, 127)[0] <= -0.1
    assert bench.fixed(pair, [other, gold, ref, gold], 127, 40, seed=1) == equivalence.UNSETTLED
    y = np.random.default_rng(3).integers(1, 6, 60).astype(float)
    rare = np.ones(60)
    rare[np.argsort(-y)[:6]] = 2.0  # 6 items off the commonest answer: correlation_ci reads no interval yet
    far = sq.Question("r", "pearson", 0.05, published=metrics.pearson(rare, y) + 0.4)
    assert metrics.bootstrap_ci("pearson", rare, y, seed=1, level=0.90)[1] < far.published - 0.05  # it settled
    assert bench.fixed(far, [rare, y], 127, 60, seed=1) == reproduction.UNDEFINED


def test_the_bench_counts_a_settled_false_claim_as_wrong_and_the_last_item_as_right():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import sequential as bench  # bench/sequential.py

    assert bench.outcome(reproduction.REPRODUCED, 40, 127, d=0.05, m=0.05) == "wrong"  # on the margin
    assert bench.outcome(reproduction.DIFFERS, 40, 127, d=-0.3, m=0.05) == "right"
    assert bench.outcome(equivalence.NOT_WORSE, 40, 1600, d=0.02, m=0.02) == "right"  # above -M: true
    assert bench.outcome(reproduction.UNSETTLED, 40, 127, d=0.0, m=0.05) == "open"
    assert bench.outcome(reproduction.DIFFERS, 127, 127, d=0.0, m=0.05) == "right"  # at N: the set's value
    scenarios = bench.discotex_scenarios()
    pair = next(sc for sc in scenarios if sc.on_margin and "rung" in sc.verdict)
    q, v, d = pair.draw(np.random.default_rng(0))
    assert q.paired and d == pytest.approx(-q.margin) and len(v[0]) == pair.total == 1600
    # replayed on a population of 400 (the same scenario's code; 1,600 items' paired looks take seconds)
    pair = next(sc for sc in bench.discotex_scenarios(total=400) if sc.on_margin and "rung" in sc.verdict)
    res = bench.replay(pair, 3, 1, [100, 400])
    assert [len(res[r]) for r in ("shipped", "peeking")] == [3, 3] and res["fixed"][400] == ["right"] * 3


def test_a_verdict_settled_early_is_overruled_once_every_item_is_scored():
    """A rule that settled at a look, while the run went on for another task's verdict, takes one more look when
    its task holds every item: the exact value (no error spent) is the verdict, and its line says which settled
    verdict it overrules; check's replay takes the same looks."""
    from abricot_local.run.settle import TaskRule, replay, section

    q = sq.Question("row", "accuracy", 0.2, published=0.5, rounding=0.005)
    state = sq.start(40, [q], looks=(20, 40))
    gold = np.zeros(40, dtype=int)
    pred = np.array([0, 1] * 10 + [1] * 20)  # half right in the first 20, none right after
    state = sq.look(state, 20, {"row": (pred[:20], gold[:20])})
    assert state.stopped and state.latest[0].verdict == reproduction.REPRODUCED
    assert state.exact_due(40) and not state.exact_due(30)
    state = sq.look(state, 40, {"row": (pred, gold)})
    (last,) = state.latest
    assert (last.k, last.exact, last.verdict) == (2, True, reproduction.DIFFERS) and last.value == pytest.approx(-0.25)
    line = state.line(last)
    assert "every item scored, look 2 of 2" in line and "it had settled at look 1 as reproduced within 0.2" in line
    with pytest.raises(UsageError, match="has stopped"):
        sq.look(state, 40, {"row": (pred, gold)})
    # check: the recorded looks (both) taken again from the samples
    task = SimpleNamespace(metric_inputs=lambda samples: [SimpleNamespace(
        name="accuracy", stat="accuracy", x=np.array([s.pred for s in samples]), y=np.array([s.gold for s in samples]))])
    samples = [SimpleNamespace(pred=int(p), gold=int(g)) for p, g in zip(pred, gold)]
    recorded = section(TaskRule("t", state, (), {"row": "accuracy"}))
    assert replay(recorded, task, samples, metrics={"row": "accuracy"}) == []
