"""Where llama.cpp's numbers depend on the thread count (docs/numerics.md, "Threads"): only a
one-token decode over 512+ cached cells with CPU flash attention (ggml's split-KV path), which
the session counts as thread dependent; everywhere else any thread count gives the same bits.
If llama.cpp changes that rule, this test says so."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.real


def last_row(path, threads: int, flash_attn: str, last: int):
    from abricot_local.backends.llama_cpp.options import LlamaCppOptions
    from abricot_local.backends.llama_cpp.session import LlamaSession

    s = LlamaSession(path, LlamaCppOptions(threads=threads, n_ctx=1024, n_batch=512, flash_attn=flash_attn))
    try:
        toks = (s.tokenize("Il gatto dorme sul divano mentre la pioggia cade lenta sui tetti di Roma. ") * 40)[: last + 1]
        s.decode([(0, i, t, False) for i, t in enumerate(toks[:-1])])
        entry = [(0, last, toks[-1], True)]
        return s.thread_dependent(entry), s.decode(entry)[0].copy()
    finally:
        s.close()


def test_only_a_lone_token_over_512_cells_with_flash_attention_depends_on_threads(gemma_path):
    for last in (255, 256):
        (dep1, one), (dep2, two) = (last_row(gemma_path, n, "on", last) for n in (1, 2))
        assert dep1 == dep2 == (last >= 256)
        if last < 256:
            assert np.array_equal(one, two)
        else:
            assert float(np.max(np.abs(one - two))) > 0  # measured 0.79 here with 1 and 3 threads
    (dep1, one), (dep2, two) = (last_row(gemma_path, n, "off", 256) for n in (1, 2))
    assert not dep1 and not dep2 and np.array_equal(one, two)
