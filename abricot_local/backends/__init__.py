"""Backends by name, imported lazily (llama.cpp loads only when used).

A backend class declares ``name``, ``Options`` (a frozen dataclass extending
``base.ScoringOptions``), ``capabilities``, ``reads_model_file``, ``synthetic``,
and the classmethods ``config(options)`` (what a run records) and
``preflight(path, options)`` (memory facts before loading); instances follow
``base.Backend``. Shared code uses these and never compares a backend's name.
"""

from __future__ import annotations

from importlib import import_module

from abricot_local.backends.base import Backend, ScoringOptions
from abricot_local.errors import UsageError

BACKENDS = {
    "llama.cpp": ("abricot_local.backends.llama_cpp", "LlamaCppBackend"),
    "fake": ("abricot_local.backends.fake", "FakeBackend"),
}
DEFAULT_BACKEND = "llama.cpp"


def backend_class(kind: str):
    """The class of backend ``kind`` (imports its module)."""
    if kind not in BACKENDS:
        raise UsageError(f"unknown backend {kind!r}; choose from {', '.join(BACKENDS)}")
    module, cls = BACKENDS[kind]
    return getattr(import_module(module), cls)


def backend_options(kind: str, values: dict, *, strict: bool = True) -> ScoringOptions:
    """Backend ``kind``'s own options from a mapping: CLI values (``strict``: an option it
    lacks is an error) or a recorded run's config (other keys ignored)."""
    return backend_class(kind).Options.from_values(values, backend=kind, strict=strict)


def open_backend(kind: str, model: str, options: ScoringOptions) -> Backend:
    """Create the backend ``kind`` for ``model`` (a GGUF path, or a label for a synthetic one)."""
    return backend_class(kind)(model, options)
