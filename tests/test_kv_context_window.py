"""The KV cache a memory check counts is the one llama.cpp allocates: the context of
``options.context_window`` (--n-ctx rounded up to the next multiple of 256), not the n_ctx asked, in the
preflight before a load, the plan's estimate from a registry entry and the check before a download alike."""

from __future__ import annotations

from abricot_local import memory
from abricot_local.backends.llama_cpp import backend as llama
from abricot_local.backends.llama_cpp.options import LlamaCppOptions
from abricot_local.models.spec import ModelSpec

ASKED = (64, 270, 512)
SPEC = ModelSpec("x", "hf", ("x.gguf",), size_approx="4 GB", params="8B")


def windows() -> list[int]:
    return [LlamaCppOptions(n_ctx=n).context_window for n in ASKED]


def test_the_rule_rounds_up():
    assert windows() == [256, 512, 512]


def test_the_preflight_counts_the_allocated_context(monkeypatch, tmp_path):
    monkeypatch.setattr(llama, "kv_cache_bytes", lambda path, n_ctx: n_ctx * 1000)
    kv = [llama.LlamaCppBackend.preflight(tmp_path / "m.gguf", LlamaCppOptions(n_ctx=n, n_gpu_layers=0)).kv_bytes
          for n in ASKED]
    assert kv == [w * 1000 for w in windows()]


def test_the_registry_estimate_counts_the_allocated_context():
    from abricot_local.run.machine_cost import _memory

    fits = [_memory(None, SPEC, llama.LlamaCppBackend, LlamaCppOptions(n_ctx=n))[0] for n in ASKED]
    assert [f.kv for f in fits] == [memory.kv_estimate(SPEC.param_count, SPEC.approx_bytes, w) for w in windows()]
    assert fits[1].kv > memory.kv_estimate(SPEC.param_count, SPEC.approx_bytes, 270)


def test_the_check_before_a_download_counts_the_allocated_context(monkeypatch):
    from abricot_local.models import ref

    seen = []
    monkeypatch.setattr(ref, "check_before_download", lambda spec, n_ctx: seen.append(n_ctx))
    monkeypatch.setattr(ref.Located, "fetch", lambda self, **kw: None)
    for n in ASKED:
        ref.Located("x", "llama.cpp", spec=SPEC).ready(LlamaCppOptions(n_ctx=n))
    assert seen == windows()

