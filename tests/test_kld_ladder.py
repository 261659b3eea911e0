"""The quant ladder in lockstep (backends/kld.py): one reference pass for N rungs, each rung's rows the
same bits as when it is scored alone; the bulk row reduction against the one-row `kl_row`; the rungs
grouped to fit in memory. The fake backend's rows are exact on every CPU; one short real case."""

from __future__ import annotations

import numpy as np
import pytest

from abricot_local.backends.base import Schedule
from abricot_local.backends.engines import ENGINES, engine_class
from abricot_local.backends.fake import FakeSession
from abricot_local.backends.kld import Footprint, KlRows, LadderSession, PairedSession, Reducer, kl_row, ladder_groups
from abricot_local.backends.options import ScoringOptions
from abricot_local.errors import ModelError, NonFiniteError

# |bulk - kl_row| on one row: measured at most 2.2e-13 nats on 3,060 of Gemma 3 270M's rows (F16
# against Q8_0, Q4_0, Q2_K; bench/README.md); both are float64 over the same terms, summed in another order
KL_ROW_BOUND = 1e-12

SCHEDULES = [Schedule.from_tokens([1, 5, 9, 2, 7, 11, 4], [[3, 4], [8], [6, 6, 6]], 64),
             Schedule.from_tokens([1, 5, 9, 6], [[3]], 64), Schedule.from_tokens([1, 2], [[9, 9, 9, 9, 9, 9]], 64)]


def _fake(seed: int, n_batch: int = 4) -> FakeSession:
    return FakeSession(ScoringOptions(seed=seed, n_batch=n_batch))


def _score(session, engine: str):
    e = engine_class(engine)(session, ScoringOptions(engine=engine, n_batch=session.n_batch))
    return e.score_many(SCHEDULES, ["a", "b", "c"]), e.counters.decode_calls


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_ladder_is_its_pairs_bit_for_bit_with_one_reference_pass(engine):
    seeds = (4, 5, 3)  # the last rung is the reference's own model: every row exactly 0
    ladder_rows = [KlRows() for _ in seeds]
    ref = _fake(3)
    decoded = []
    ref.decode = (lambda f: lambda entries: decoded.append(len(entries)) or f(entries))(ref.decode)
    scored, calls = _score(LadderSession(ref, [_fake(s) for s in seeds], ladder_rows, threads=3), engine)
    plain, plain_calls = _score(_fake(3), engine)
    assert scored == plain and calls == plain_calls == len(decoded)  # one reference pass, the engine's own rows
    for s, got in zip(seeds, ladder_rows):
        alone = KlRows()
        _score(PairedSession(_fake(3), _fake(s), alone), engine)
        assert len(got) == sum(decoded) and got.kl == alone.kl and got.same_top == alone.same_top
    assert min(ladder_rows[0].kl) > 0 and set(ladder_rows[2].kl) == {0.0} and all(ladder_rows[2].same_top)


def test_only_the_rows_asked_for_when_not_every_token():
    rows = KlRows()
    ladder = LadderSession(_fake(3), [_fake(4)], [rows], every_token=False)
    out = ladder.decode([(0, 0, 1, False), (0, 1, 5, True), (0, 2, 9, False), (0, 3, 2, True)])
    assert [x is None for x in out] == [True, False, True, False] and len(rows) == 2
    with pytest.raises(ModelError, match="n_batch"):
        LadderSession(_fake(3), [_fake(4, n_batch=8)], [KlRows()])


def _logits(rng, n_rows: int, vocab: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows of float32 log-probabilities (log-sum-exp near 0: a sum's last bits show in the KL)."""
    x = rng.normal(size=(n_rows, vocab)) * 3
    y = x + rng.normal(size=(n_rows, vocab)) * scale
    return tuple((v - np.log(np.exp(v).sum(axis=1, keepdims=True))).astype(np.float32) for v in (x, y))


def test_the_bulk_reduction_is_kl_row_within_its_bound():
    rng = np.random.default_rng(7)
    x, y = _logits(rng, 24, 50_021, 0.05)
    _, z = _logits(rng, 24, 50_021, 1.0)
    where = [("t", p) for p in range(24)]
    got = Reducer(threads=2).compare(list(x), [list(y), list(z), list(x)], where)
    for k, rung in enumerate((y, z)):
        want = [kl_row(a, b) for a, b in zip(x, rung)]
        assert np.max(np.abs(np.array(got[k][0]) - [w[0] for w in want])) <= KL_ROW_BOUND
        assert got[k][1] == [w[1] for w in want] and min(got[k][0]) > 0
    assert set(got[2][0]) == {0.0} and all(got[2][1])  # one row twice: exactly 0
    bad = y.copy()
    bad[5, 17] = np.nan
    with pytest.raises(NonFiniteError, match="position 5"):  # in the calling thread's block
        Reducer(threads=2).compare(list(x), [list(bad)], where)
    bad[5, 17], bad[20, 3] = 0, np.inf
    with pytest.raises(NonFiniteError, match="position 20"):  # in another thread's
        Reducer(threads=2).compare(list(x), [list(bad)], where)
    with pytest.raises(ModelError, match="vocabularies differ"):
        Reducer().compare(list(x), [list(y[:, :-1])], where)


def test_a_rows_numbers_depend_on_its_own_vectors_alone():
    """The same rung alone, in company, at another thread count, and read from memory at another
    alignment: the same bits (what makes a ladder's statistics a lone rung's, by construction)."""
    rng = np.random.default_rng(8)
    x, y = _logits(rng, 13, 30_011, 0.3)
    _, z = _logits(rng, 13, 30_011, 2.0)
    where = [("t", p) for p in range(13)]
    alone = Reducer(1).compare(list(x), [list(y)], where)[0]
    shifted = np.empty(y.size + 3, np.float32)[3:].reshape(y.shape)  # 12 bytes off the allocation's alignment
    shifted[...] = y
    for threads in (2, 5):
        assert Reducer(threads).compare(list(x), [list(z), list(shifted), list(x)], where)[1] == alone


def test_rungs_are_grouped_to_fit_beside_the_reference():
    ref = Footprint(weights=4, kv=0)
    rungs = [Footprint(5, 0, label="A"), Footprint(3, 0), Footprint(3, 0), Footprint(2, 0)]
    # the budget 10 (10% over tolerated: 11) leaves 7 for rungs: first-fit by decreasing size
    assert ladder_groups(ref, rungs, available=10) == [(0, 3), (1, 2)]
    # the largest first: 3+7 and 3+7 in two passes, where taking them in order would need three
    small_first = [Footprint(3, 0), Footprint(3, 0), Footprint(7, 0), Footprint(7, 0)]
    assert ladder_groups(Footprint(1, 0), small_first, available=10) == [(0, 2), (1, 3)]
    assert ladder_groups(ref, rungs, available=100) == [(0, 1, 2, 3)]
    assert ladder_groups(ref, rungs, available=None) == [(0, 1, 2, 3)]  # RAM unknown: not refused
    assert ladder_groups(ref, rungs, available=5, vram=3, remote=2) == [(0, 3), (1, 2)]  # the budget's parts add
    # KV caches and output rows count for every model loaded, the reference's too
    heavy = [Footprint(1, 2, rows=1), Footprint(1, 2, rows=1)]
    assert ladder_groups(Footprint(1, 2, rows=1), heavy, available=10) == [(0,), (1,)]
    assert ladder_groups(Footprint(1, 0), heavy, available=10) == [(0, 1)]
    with pytest.raises(ModelError, match="the reference and A need about"):
        ladder_groups(ref, rungs, available=6)
    assert ladder_groups(ref, [], available=10) == []
    # rungs that decode other items never share a reference pass
    assert ladder_groups(ref, rungs, available=100, keys="abab") == [(0, 2), (1, 3)]
    assert ladder_groups(ref, rungs, available=None, keys="abba") == [(0, 3), (1, 2)]


def test_random_ladders_are_grouped_into_groups_that_fit_and_could_not_merge():
    rng = np.random.default_rng(9)
    for _ in range(200):
        n = int(rng.integers(1, 9))
        rungs = [Footprint(int(w), int(k)) for w, k in rng.integers(1, 40, size=(n, 2))]
        ref = Footprint(int(rng.integers(1, 40)), 3)
        cap = ref.bytes + max(r.bytes for r in rungs) + int(rng.integers(0, 120))
        keys = [int(k) for k in rng.integers(0, 2, size=n)]
        groups = ladder_groups(ref, rungs, available=cap, keys=keys)
        assert sorted(k for g in groups for k in g) == list(range(n)) and [g[0] for g in groups] == sorted(
            g[0] for g in groups)

        def need(g):
            return ref.bytes + sum(rungs[k].bytes for k in g)

        assert all(need(g) <= cap * 1.10 for g in groups)
        assert all(len({keys[k] for k in g}) == 1 for g in groups)
        assert all(need(a + b) > cap * 1.10 for i, a in enumerate(groups) for b in groups[i + 1:]
                   if keys[a[0]] == keys[b[0]])
