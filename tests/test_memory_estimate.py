"""The KV cache a plan estimates before a model's file is here (memory.kv_estimate): from the registry entry's
parameter count, within a factor of 2 of real models' shapes; the file's size alone (the old rule) is 4x low for a
7B Q4_K_M and 20x for SmolLM2. The two real GGUFs of the test extra hold the shapes the table gives them."""

from __future__ import annotations

import pytest

from abricot_local import memory
from abricot_local.models.spec import ModelSpec

# public configs: parameters, layers, KV heads, head size (f16 K and V: 2 x 2 bytes x layers x KV heads x head size)
SHAPES = {
    "SmolLM2-135M": (0.135e9, 30, 3, 64), "Gemma-3-270M": (0.268e9, 18, 1, 256), "Qwen2.5-0.5B": (0.49e9, 24, 2, 64),
    "Gemma-3-1B": (1.0e9, 26, 1, 256), "Llama-3.2-1B": (1.24e9, 16, 8, 64), "Qwen2.5-1.5B": (1.54e9, 28, 2, 128),
    "Llama-3.2-3B": (3.21e9, 28, 8, 128), "Mistral-7B": (7.24e9, 32, 8, 128), "Qwen2.5-7B": (7.62e9, 28, 4, 128),
    "Llama-3.1-8B": (8.03e9, 32, 8, 128), "Qwen2.5-14B": (14.7e9, 48, 8, 128), "Llama-3.1-70B": (70.6e9, 80, 8, 128),
}


def per_token(layers: int, kv_heads: int, head: int) -> int:
    return 2 * 2 * layers * kv_heads * head


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_estimate_from_parameters_is_within_a_factor_of_2(name):
    params, layers, heads, head = SHAPES[name]
    real = per_token(layers, heads, head) * 4096
    est = memory.kv_estimate(params, 10**9, 4096)  # the file's size is not read when the count is known
    assert 0.5 <= est / real <= 2.0, (name, est / real)


def test_it_is_nearer_than_the_file_size_rule_for_the_registry_quants():
    """A 7B Q4_K_M (4.37 GB, Mistral's shape) and SmolLM2's Q8_0 (145 MB): the size rule 4x and 20x low."""
    for name, size in (("Mistral-7B", 4_370_000_000), ("SmolLM2-135M", 145_000_000)):
        params, *shape = SHAPES[name]
        real = per_token(*shape) * 2048
        assert memory.kv_estimate_from_size(size, 2048) / real < 0.3
        assert 0.5 <= memory.kv_estimate(params, size, 2048) / real <= 2.0


def test_an_entry_without_parameters_falls_back_to_the_size():
    spec = ModelSpec("x", "hf", ("x.gguf",), size_approx="40 GB")
    assert spec.param_count is None
    assert memory.kv_estimate(spec.param_count, int(40e9), 4096) == memory.kv_estimate_from_size(int(40e9), 4096)
    assert ModelSpec("y", "hf", ("y.gguf",), params="0.5B").param_count == 5e8


@pytest.mark.real
@pytest.mark.parametrize("model", ["gemma", "smollm2"])
def test_the_real_ggufs_have_the_tables_shapes(model, request):
    from abricot_local.backends.llama_cpp.backend import kv_cache_bytes

    path = request.getfixturevalue("gemma_path" if model == "gemma" else "smollm2_path")
    _, *shape = SHAPES["Gemma-3-270M" if model == "gemma" else "SmolLM2-135M"]
    assert kv_cache_bytes(path, 1024) == per_token(*shape) * 1024
