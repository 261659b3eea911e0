"""Engine and item-order equivalence, proven on the fake backend (issue 44 item 6).

The fake backend runs the same engines (backends/engines.py) over a session that emulates a KV
cache of sequences (backends/fake.py), and its rows are a pure function of the tokens at positions
0..pos of the sequence decoded: a cell an engine forgot to decode raises, a cell it copied wrong
changes the numbers, and a cell it forgot to remove is caught when decoded over (score() below).
So the same bits from every exact engine, from batched at any parallel, in any item order, and
equal to an independent oracle (a fresh session per row, no engine) prove the engines'
bookkeeping: prefix held and reused, trunks cut into decode calls, tails decoded and rewound,
sequences copied for a group. What llama.cpp does with those calls (its own KV
cache, the arithmetic of a decode call's composition) is the one real test of this,
tests/test_real_model.py::test_engines_and_item_order_are_bit_identical.
"""

from __future__ import annotations

import random

import pytest

from abricot_local.backends.fake import FakeBackend
from abricot_local.backends.options import ScoringOptions
from abricot_local.core import Request
from abricot_local.tasks.abricot import AbricotAbsTask
from abricot_local.tasks.base import TaskOptions
from abricot_local.tasks.discotex import DiscotexTask
from conftest import FIXTURE
from test_lm_eval import oracle_score

N_BATCH = 16  # bytes per decode call: every trunk below spans several calls (asserted)


@pytest.fixture(scope="module")
def requests(discotex_dir) -> list[Request]:
    """Items of both tasks (the fake tokenizer is bytes: each trunk hundreds of tokens) and requests
    with multi-token tails, some longer than a decode call: two DISCOTEX items (one prefix, the
    instructions), three ABRICOT items at 1 shot (a prefix each: its shot), two ABRICOT items with
    no prefix (0 shots, the paper's prompt), and three requests sharing a prefix whose
    continuations need tails."""
    d = sorted(DiscotexTask(TaskOptions(data_dir=str(discotex_dir))).items(), key=lambda it: len(it.context))[:2]
    a = AbricotAbsTask(TaskOptions(data=(("abricot", str(FIXTURE)),), shots=1)).items()[:3]
    z = AbricotAbsTask(TaskOptions(data=(("abricot", str(FIXTURE)),), shots=0)).items()[:2]
    tails = (" Roma", " Milano e dintorni", " una città che si affaccia sul mare Tirreno e sul Tevere")
    m = [Request(f"Completa la frase.\n\nLa capitale {x} è", tails, label=f"m{k}")
         for k, x in enumerate(("d'Italia", "della Francia", "della Spagna, da secoli,"))]
    return [it.request() for it in d + a + z] + m


def score(reqs: list[Request], **options) -> tuple[dict[tuple, tuple], FakeBackend]:
    """Each request's (log-likelihoods, greedy flags) by its label and context, scored as the
    runner scores: chunks of batch_size() through score_many."""
    b = FakeBackend("fake", ScoringOptions(n_ctx=4096, **options))
    decode, b.calls_seqs = b.session.decode, []  # the sequences in each decode call

    def counted(entries):
        # a real KV cache keeps a second cell at a position already held (both attended): the
        # fake would overwrite it, so a cell an engine forgot to remove is caught here
        held = [(seq, pos) for seq, pos, _, _ in entries if pos in b.session.cells.get(seq, {})]
        assert not held, f"decoded over cells still held: {held[:3]}"
        assert len(entries) <= b.session.n_batch  # llama.cpp refuses a bigger call
        b.calls_seqs.append({e[0] for e in entries})
        return decode(entries)

    b.session.decode = counted
    size = b.batch_size()
    got = {}
    for k in range(0, len(reqs), size):
        chunk = reqs[k : k + size]
        got.update(((r.label, r.context), (s.logprobs, s.greedy)) for r, s in zip(chunk, b.score_many(chunk)))
    return got, b


def test_the_requests_straddle_decode_calls_share_prefixes_and_have_tails(requests):
    b = FakeBackend("fake", ScoringOptions(n_ctx=4096, n_batch=N_BATCH))
    schs = [b.schedule(r) for r in requests]
    assert min(s.trunk_len - s.prefix_len for s in schs) > N_BATCH  # every trunk: several calls
    prefixes = [s.seqs[0][: s.prefix_len] for s in schs]
    assert len({p for p in prefixes if p}) >= 2 and () in prefixes  # two prefixes shared, and none
    tails = [len(s.tail(i)) for s in schs for i in range(len(s.seqs))]
    assert max(tails) > N_BATCH and sum(t > 0 for t in tails) >= 6  # tails, one over several calls


def test_every_engine_any_parallel_and_any_order_give_the_same_bits_as_the_oracle(requests):
    ref, b = score(requests, n_batch=N_BATCH, engine="prefix")
    assert b.counters.prefix_hits >= 3  # the prefix really stayed in the cache between items
    # the oracle: each continuation's tokens, every row from a fresh session (no engine, no cache)
    for r in requests:
        sch = b.schedule(r)
        want = [oracle_score(list(seq), c) for seq, c in zip(sch.seqs, sch.ctx_lens)]
        assert ref[r.label, r.context] == (tuple(lp for lp, _ in want), tuple(g for _, g in want)), r.label
    rng = random.Random(44)
    shuffled = rng.sample(requests, len(requests))
    runs = [("naive", {}, requests), ("single", {}, list(reversed(requests))), ("prefix", {}, shuffled),
            ("batched", {"parallel": 1}, list(reversed(requests))), ("batched", {"parallel": 3}, requests),
            ("batched", {"parallel": 8}, shuffled)]
    for engine, extra, order in runs:
        got, b = score(order, n_batch=N_BATCH, engine=engine, **extra)
        assert got == ref, (engine, extra)
        assert b.counters.decode_calls > 2 * len(requests)  # cut into calls of N_BATCH


def test_the_decode_cut_moves_no_fake_number(requests):
    """The fake's rows ignore how entries are grouped into calls, so the cut (n_batch) leaves its
    numbers as they are: the engines' chunking at any size keeps every cell where it belongs."""
    ref, _ = score(requests, n_batch=N_BATCH, engine="prefix")
    for n_batch, engine, extra in ((1, "single", {}), (7, "batched", {"parallel": 2}), (512, "naive", {}),
                                   (512, "batched", {"parallel": 8}), (4096, "prefix", {})):
        got, b = score(requests, n_batch=n_batch, engine=engine, **extra)
        assert got == ref, (n_batch, engine)
        if n_batch == 512 and engine == "batched":  # several items' trunks in one decode call
            assert max(len(seqs) for seqs in b.calls_seqs) >= 2
