"""The batched engine on the real Gemma 3 270M (CPU): agreement with prefix, measured.

Several items' trunks in one multi-sequence decode change the composition of
every decode call, so the numbers are not bit-identical to the per-item schedule
(docs/numerics.md#what-moves-a-log-probability, last table row). The tolerance below is
what was measured here, not assumed; with parallel=1 the schedule is prefix's
and the numbers must be identical (tests/test_real_model.py::test_engines_and_item_order_are_bit_identical).
"""

import numpy as np
import pytest

from abricot_local.backends.llama_cpp.backend import LlamaCppOptions
from abricot_local.core import Request
from abricot_local.run.check_tolerance import BATCHED_DRIFT
from abricot_local.tasks.abricot import AbricotAbsTask
from abricot_local.tasks.base import TaskOptions
from abricot_local.tasks.discotex import DiscotexTask
from conftest import FIXTURE

pytestmark = pytest.mark.real

# Measured (llama-cpp-python 0.3.36, portable build, CPU, 2 threads), batched (default parallel 8)
# vs prefix on these items, max |logprob diff|:
#   default (flash-attn auto, extra buffer types off): 0.21 nats on DISCOTEX (6 items, one group of
#     ~1260 trunk tokens), 0.0 / 1.20 / 0.0 nats on the ABRICOT 3-shot items (one group of 3
#     ~150-token trunks), 0.0 on the two tiny multi-token requests; one DISCOTEX prediction flipped
#     where prefix's top-2 gap was 0.07 nats;
#   flash-attn off: 0.15 / 0.20 nats; extra buffer types on: 0.19 / 0.42 nats, no flip.
# (Before the default became extra buffer types off: 0.19 and 0.66 nats.) A flip is accepted only
# where prefix's top-2 gap is <= 0.5 nats.
TOLERANCE = BATCHED_DRIFT  # nats: what check --sample of a batched run is held to (run/check_tolerance.py)
FLIP_GAP = 0.5  # nats


def requests(discotex_dir):
    d = DiscotexTask(TaskOptions(data_dir=str(discotex_dir))).items()[:6]
    a = AbricotAbsTask(TaskOptions(data=(("abricot", str(FIXTURE)),))).items()[:3]  # 3-shot default
    # multi-token continuations: tails decoded on each item's own sequence, then rewound
    m = [Request(f"Completa.\n\nLa capitale {x} è", (" Roma", " Milano e dintorni", " una città"))
         for x in ("d'Italia", "della Francia")]
    return [it.request() for it in d] + [it.request() for it in a] + m


def score_all(path, reqs, **kw):
    """Score as the runner does: chunks of batch_size() through score_many."""
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend

    b = LlamaCppBackend(path, LlamaCppOptions(threads=2, n_ctx=2048, **kw))
    try:
        size = b.batch_size()
        out = [s.logprobs for k in range(0, len(reqs), size) for s in b.score_many(reqs[k : k + size])]
        return out, b.provenance().schedule, b.counters
    finally:
        b.close()


@pytest.fixture(scope="module")
def scored(gemma_path, discotex_dir):
    reqs = requests(discotex_dir)
    return reqs, score_all(gemma_path, reqs, engine="prefix"), score_all(gemma_path, reqs, engine="batched")


def test_batched_agrees_with_prefix_within_the_measured_tolerance(scored):
    reqs, (ref, _, ref_counters), (got, sched, counters) = scored
    assert len(got) == len(ref) == len(reqs)
    assert sched["engine"] == "batched" and sched["parallel"] == 8 and sched["kv_unified"] is True
    assert counters.decode_calls < ref_counters.decode_calls  # items really shared decode calls
    worst = 0.0
    for r, g in zip(ref, got):
        r, g = np.array(r), np.array(g)
        assert len(r) == len(g)
        worst = max(worst, float(np.abs(r - g).max()))
        if r.argmax() != g.argmax():
            top = np.sort(r)
            assert top[-1] - top[-2] <= FLIP_GAP
    assert worst <= TOLERANCE, worst
    assert worst > 0.0  # if this ever fails, batching became exact here: tighten the tests

