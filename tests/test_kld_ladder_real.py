"""The lockstep ladder on real llama.cpp rows (SmolLM2-135M: its F16 written by the project's quantizer
the reference, its Q8_0 and the original Q4_1 the rungs): each rung's rows the same bits in the ladder
as in a pair, every row within the stated bound of the one-row `kl_row`."""

from __future__ import annotations

import numpy as np
import pytest

from abricot_local.backends.base import Schedule
from abricot_local.backends.engines import engine_class
from abricot_local.backends.kld import KlRows, LadderSession, PairedSession, kl_row
from test_kld_ladder import KL_ROW_BOUND

pytestmark = pytest.mark.real

TEXT = ("Il gatto dorme sul divano mentre fuori piove. ", ["La pioggia cade da ore.", "Il cane abbaia.",
                                                       "Domani farà bel tempo, dicono."])


class Kept:
    """A session whose rows are copied as they come (the test's, to compare with kl_row)."""

    def __init__(self, session):
        self.s, self.rows = session, []

    def decode(self, entries):
        out = self.s.decode(entries)
        self.rows += [np.array(x) for x in out if x is not None]
        return out

    def __getattr__(self, name):
        return getattr(self.s, name)


def test_a_real_ladder_is_its_pairs_bit_for_bit(smollm2_path, tmp_path):
    from abricot_local.backends.llama_cpp.options import LlamaCppOptions
    from abricot_local.backends.llama_cpp.session import LlamaSession
    from abricot_local.models.quantize import make_ladder

    ladder = make_ladder(str(smollm2_path), "Q8_0", out=str(tmp_path), allow_requantize=True, threads=2)
    opts = LlamaCppOptions(n_ctx=256, n_batch=16, threads=1, engine="prefix")  # 1: quick on a busy machine
    ref = Kept(LlamaSession(ladder.rungs[0].path, opts))
    rungs = [Kept(LlamaSession(p, opts)) for p in (ladder.rungs[1].path, smollm2_path)]
    try:
        ctx = ref.tokenize(TEXT[0])
        sch = [Schedule.from_tokens(ctx, [ref.tokenize(" " + c, bos=False) for c in TEXT[1]], 256)]

        def score(session):
            engine_class("prefix")(session, opts).score_many(sch, ["t"])

        rows = [KlRows(), KlRows()]
        score(LadderSession(ref, rungs, rows, threads=2))
        assert len(rows[0]) == len(ref.rows) > 16  # more than one decode call
        for k, rung in enumerate(rungs):
            d = [abs(kl_row(a, b)[0] - got) for a, b, got in zip(ref.rows, rung.rows, rows[k].kl, strict=True)]
            assert max(d) <= KL_ROW_BOUND
            alone = KlRows()
            ref.s.clear()
            rung.s.clear()
            score(PairedSession(ref.s, rung.s, alone))
            assert alone.kl == rows[k].kl and alone.same_top == rows[k].same_top
        assert max(rows[0].kl) > 0  # the Q8_0 is not the F16
    finally:
        for s in (ref, *rungs):
            s.s.close()
