"""The canonical schedule and label mapping, on hand-made tokenizers."""

import numpy as np
import pytest

from abricot_local.backends.base import chunks, schedule
from abricot_local.core import Request, cached_prefix, log_softmax
from abricot_local.errors import ContextOverflowError, UsageError


def char_tok(text):
    """BOS (0) then one token per character: " A" is a space token then "A"."""
    return [0, *[ord(c) for c in text]]


def word_tok(text):
    """BOS then words with their leading space: " A" is one token, like gpt-2's " 1"."""
    import re

    return [0, *[hash(w) % 10_000 + 1 for w in re.findall(r" ?\S+|\s", text)]]


def test_single_token_labels_take_the_fast_path():
    req = Request("Domanda:\n\nx\nRisposta:", (" A", " B", " C"))
    sch = schedule(req, word_tok, 512)
    assert sch.fast_path
    assert all(len(s) == sch.trunk_len + 1 for s in sch.seqs)
    assert all(c == sch.trunk_len for c in sch.ctx_lens)
    assert sch.trunk_logit_positions() == (sch.trunk_len - 1,)


def test_shared_space_token_is_in_the_trunk():
    req = Request("Risposta:", (" 1", " 2", " 3", " 4", " 5"))
    sch = schedule(req, char_tok, 512)
    ctx = len(char_tok("Risposta:"))
    assert sch.fast_path and sch.trunk_len == ctx + 1  # the space is shared
    # both the space and the digit are scored: logits needed at ctx-1 and ctx
    assert sch.trunk_logit_positions() == (ctx - 1, ctx)
    assert sch.targets(0) == [(ctx - 1, ord(" ")), (ctx, ord("1"))]


def test_multi_token_continuations_use_tails():
    req = Request("Q:", (" yes", " no"))
    sch = schedule(req, char_tok, 512)
    assert not sch.fast_path
    assert sch.tail(0) == tuple(ord(c) for c in "yes")[:-1]
    assert sch.n_tokens == sch.trunk_len + len(sch.tail(0)) + len(sch.tail(1))


def test_each_sequence_is_the_tokenization_of_the_whole_string():
    # A tokenizer that merges ":" with a following space changes the boundary.
    def merging(text):
        return [0, *[ord(c) for c in text.replace(": ", "\x01")]]

    req = Request("Risposta:", (" A", " B"))
    sch = schedule(req, merging, 512)
    for seq, cont in zip(sch.seqs, req.continuations):
        assert list(seq) == merging(req.context + cont)
    assert sch.ctx_lens[0] == len(merging("Risposta"))  # split at the common prefix


def test_prefix_never_reaches_the_scored_positions_and_leaves_two_trunk_tokens():
    req = Request("ab\n\n", (" x", " y"))  # the whole context is its cached prefix
    sch = schedule(req, char_tok, 512)
    assert req.prefix == req.context
    assert sch.prefix_len <= min(sch.ctx_lens) - 1
    assert sch.trunk_len - sch.prefix_len >= 2


def test_overflow_names_item_and_both_counts():
    req = Request("x" * 50, (" A",), label="item-7")
    with pytest.raises(ContextOverflowError, match=r"item-7.*53 tokens.*holds 40"):
        schedule(req, char_tok, 40)


def test_the_cached_prefix_is_the_text_up_to_its_last_blank_line():
    assert cached_prefix("Istruzioni.\n\nD: 1\nR: a\n\nD: 2\nR:") == "Istruzioni.\n\nD: 1\nR: a\n\n"
    assert cached_prefix("no blank line\nhere") == "" and cached_prefix("") == ""
    assert cached_prefix("a\n\n\nb") == "a\n\n\n"  # the last "\n\n" of a longer run of newlines
    assert Request("x\n\ny", (" A",)).prefix == "x\n\n"


def test_bad_requests():
    with pytest.raises(UsageError):
        Request("abc", ())
    with pytest.raises(UsageError, match="adds no token"):
        schedule(Request("abc", ("",)), char_tok, 100)


def test_chunks_cut_from_segment_start():
    assert chunks(10, list(range(5)), 2) == [(10, (0, 1)), (12, (2, 3)), (14, (4,))]


def test_log_softmax_is_stable_and_normalised():
    x = np.array([1000.0, 1001.0, 999.0], dtype=np.float32)
    out = log_softmax(x)
    assert np.isfinite(out).all()
    assert abs(np.exp(out).sum() - 1) < 1e-12


def test_batched_groups_share_a_prefix_and_fit_in_the_context():
    from abricot_local.backends.engines import groups

    def sch(prefix, item):
        return schedule(Request(prefix + item, (" A", " B")), word_tok, 512)

    a = [sch("uno due tre\n\n", f"x{k} y z") for k in range(5)]  # P = 6, trunk = 9 tokens
    b = [sch("altro\n\n", f"w{k} v") for k in range(2)]
    assert a[0].prefix_len == 6 and a[0].trunk_len == 9
    assert groups(a + b, 3, 512) == [[0, 1, 2], [3, 4], [5, 6]]  # at most parallel, same prefix
    assert groups(a, 8, 6 + 3 * 3) == [[0, 1, 2], [3, 4]]  # P + sum of trunks <= n_ctx
    assert groups(a, 1, 512) == [[k] for k in range(5)]


def test_common_prefix_len_is_the_token_walks_length():
    """Compared by blocks and halves of a block: the length a walk token by token gives, for lists and tuples,
    differences anywhere in or past a block, and one sequence the other's prefix."""
    import random

    from abricot_local.backends.base import common_prefix_len

    def walk(a, b):
        i = 0
        while i < min(len(a), len(b)) and a[i] == b[i]:
            i += 1
        return i

    rng = random.Random(0)
    for _ in range(300):
        a = [rng.randrange(3) for _ in range(rng.randrange(700))]
        b = a[:rng.randrange(len(a) + 1)] + [rng.randrange(3) for _ in range(rng.randrange(300))]
        for x, y in ((a, b), (tuple(a), tuple(b)), (a, tuple(b)), (b, a)):
            assert common_prefix_len(x, y) == walk(x, y)
