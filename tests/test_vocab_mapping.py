"""Label mapping on the real tokenizers of five families (vocabulary-only GGUFs: the vocab_dir fixture)."""

from functools import lru_cache

import pytest

from abricot_local.backends.llama_cpp.backend import LlamaCppOptions
from abricot_local.tasks.abricot import AbricotAbsTask
from abricot_local.tasks.base import TaskOptions
from abricot_local.tasks.discotex import DiscotexTask
from conftest import FIXTURE

# How " 1" tokenizes in each family's vocab-only GGUF: one token in gpt-2, a space then a digit elsewhere.
DIGIT_TOKENS = {"gpt-2": 1, "llama-bpe": 2, "llama-spm": 2, "phi-3": 2, "qwen2": 2}


def family(path):
    return path.name.removeprefix("ggml-vocab-").removesuffix(".gguf")


@pytest.fixture(scope="module", params=sorted(DIGIT_TOKENS))
def vocab(request, vocab_dir):
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend

    b = LlamaCppBackend(vocab_dir / f"ggml-vocab-{request.param}.gguf", LlamaCppOptions(vocab_only=True, n_ctx=4096))
    yield request.param, b
    b.close()


@lru_cache(maxsize=None)
def first_items(task, data_dir=None):
    if task == "discotex":
        return DiscotexTask(TaskOptions(data_dir=str(data_dir))).items()[:2]
    return AbricotAbsTask(TaskOptions(data=(("abricot", str(FIXTURE)),))).items()[:2]


@pytest.fixture(params=[("discotex", 0), ("discotex", 1), ("abricot", 0), ("abricot", 1)],
                ids=lambda p: f"{p[0]}-{p[1]}")
def item(request):
    """The first two items of each task; only the DISCOTEX ones need the release."""
    task, k = request.param
    data_dir = request.getfixturevalue("discotex_dir") if task == "discotex" else None
    return first_items(task, data_dir)[k]


def test_there_are_five_families(vocab_dir):
    assert {family(v) for v in vocab_dir.glob("ggml-vocab-*.gguf")} >= set(DIGIT_TOKENS)


def test_mapping_equals_tokenizing_the_full_string(vocab, item):
    name, b = vocab
    sch = b.schedule(item.request())
    context_tokens = b.tokenize(item.context)
    for cont, seq, c in zip(item.continuations, sch.seqs, sch.ctx_lens):
        whole = b.tokenize(item.context + cont)
        assert list(seq) == whole
        assert (whole[0] == b.bos) == b.add_bos  # BOS once, as the model says
        assert whole.count(b.bos) == (1 if b.add_bos else 0)
        assert list(seq[:c]) == context_tokens  # no merge across the boundary here
        assert "".join(b.piece(t) for t in seq[c:]) == cont  # the whitespace is in the continuation
    assert sch.fast_path, "every label is one token after a shared trunk"


def test_digit_labels_per_family(vocab):
    name, b = vocab
    item = AbricotAbsTask(TaskOptions(data=(("abricot", str(FIXTURE)),), shots=0)).items()[0]
    sch = b.schedule(item.request())
    assert {len(s) - c for s, c in zip(sch.seqs, sch.ctx_lens)} == {DIGIT_TOKENS[name]}
    if DIGIT_TOKENS[name] == 2:  # the shared space token is evaluated with the context
        assert sch.trunk_len == min(sch.ctx_lens) + 1
