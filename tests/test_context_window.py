"""The plan (plan() / run --dry-run) judges each prompt against the context window the backend will allocate (its
``context_window``: llama.cpp rounds n_ctx up to a multiple of 256), in the words the run's schedule uses."""

from __future__ import annotations

import re

import pytest

import abricot_local as al


def problem(*args, **kw) -> str:
    (model,) = al.plan(*args, **kw).models
    (task,) = model.tasks
    return task.problem


def test_the_fake_backend_allocates_what_is_asked_and_its_plan_says_what_its_run_says(discotex_dir, tmp_path):
    from abricot_local.backends.options import ScoringOptions

    assert ScoringOptions(n_ctx=300).context_window == 300
    args = dict(backend="fake", sample=2, n_ctx=300, data_dir=discotex_dir)
    said = problem("fake", "discotex", **args)
    assert "the context window holds 300 (n_ctx=300)" in said, said
    with pytest.raises(al.AbricotError) as run:
        al.evaluate("fake", "discotex", **args, out=tmp_path / "o", progress=False)
    assert str(run.value) == said


def test_the_plan_of_a_llama_cpp_model_judges_the_window_llama_cpp_allocates(vocab_dir, discotex_dir):
    """A vocabulary-only load (the plan's) has no context: its schedule takes the one a load allocates."""
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend
    from abricot_local.backends.llama_cpp.options import LlamaCppOptions

    assert [LlamaCppOptions(n_ctx=n).context_window for n in (1, 64, 256, 257, 300, 513)] == \
        [256, 256, 256, 512, 512, 768]
    vocab = vocab_dir / "ggml-vocab-llama-spm.gguf"
    be = LlamaCppBackend(vocab, LlamaCppOptions(vocab_only=True, n_ctx=300))
    try:
        assert be.n_ctx() == 512
    finally:
        be.close()
    args = dict(sample=4, data_dir=discotex_dir)
    said = problem(vocab, "discotex", n_ctx=300, **args)  # it said "holds 300 (n_ctx=300)"
    assert "but the context window holds 512 (n_ctx=300 asked, llama.cpp allocated 512)" in said, said
    longest = int(re.search(r"the prompt is (\d+) tokens", said).group(1))
    assert 512 < longest <= 768 - 1  # asked one less than the prompt, allocated 768: it fits, as the run finds
    assert problem(vocab, "discotex", n_ctx=longest - 1, **args) == ""
    estimated = problem("mistral-7b-q4", "discotex", n_ctx=300, **args)  # not here: counted from its text
    assert estimated.startswith("may not fit (estimated): ") and "holds 512 (n_ctx=300 asked, llama.cpp allocated " \
        "512)" in estimated, estimated


@pytest.mark.real
def test_llama_cpp_allocates_its_declared_window_and_the_plan_says_what_the_run_says(gemma_path, discotex_dir,
                                                                                       tmp_path):
    """The rule (LlamaCppOptions.context_window) against the installed llama.cpp's own allocation."""
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend
    from abricot_local.backends.llama_cpp.options import LlamaCppOptions

    for n, engine, parallel in ((64, "prefix", None), (270, "prefix", None), (513, "batched", 4),
                                (40_000, "prefix", None)):  # past gemma-3-270m's n_ctx_train (32768): not capped
        opts = LlamaCppOptions(n_ctx=n, threads=1, engine=engine, parallel=parallel)
        be = LlamaCppBackend(gemma_path, opts)
        try:
            assert be.n_ctx() == opts.context_window, (n, engine)
        finally:
            be.close()
    args = dict(sample=4, n_ctx=64, threads=1, data_dir=discotex_dir)
    said = problem(gemma_path, "discotex", **args)
    with pytest.raises(al.AbricotError) as run:
        al.evaluate(gemma_path, "discotex", **args, out=tmp_path / "o", progress=False)
    assert str(run.value) == said and "holds 256 (n_ctx=64 asked, llama.cpp allocated 256)" in said
