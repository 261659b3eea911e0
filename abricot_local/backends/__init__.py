"""Backends are registered by name and imported lazily, so llama.cpp loads only when used."""

from __future__ import annotations

from importlib import import_module

from abricot_local.backends.base import Backend, BackendOptions
from abricot_local.errors import UsageError

BACKENDS = {
    "llama.cpp": ("abricot_local.backends.llama_cpp", "LlamaCppBackend"),
    "fake": ("abricot_local.backends.fake", "FakeBackend"),
}


def open_backend(kind: str, model: str, options: BackendOptions) -> Backend:
    """Create the backend ``kind`` for ``model`` (a GGUF path, or a label for the fake)."""
    if kind not in BACKENDS:
        raise UsageError(f"unknown backend {kind!r}; choose from {', '.join(BACKENDS)}")
    module, cls = BACKENDS[kind]
    return getattr(import_module(module), cls)(model, options)
