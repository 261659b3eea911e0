"""Backends by name, imported lazily (llama.cpp loads only when used).

A backend class follows ``base.BackendClass`` (``name``, ``Options``: a frozen dataclass
extending ``options.ScoringOptions``, ``capabilities``, ``reads_model_file``, ``synthetic``,
and the classmethods ``config``, ``preflight``, ``speed_settings``, ``watch_remote``;
``base.Declared`` gives their defaults); instances follow ``base.Backend``. Each is registered
with its options class, which lives in a module that does not import the backend's runtime:
flags, model_args keys and option checks need only that; and, when its runtime's C calls need
it, the module of its interrupt handling (``on_stuck``, ``left_inside``, ``exit_process``; no
runtime import), which :func:`on_stuck` and :func:`exit_process` go through. Shared code uses
these and never compares a backend's name.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from typing import Callable

from abricot_local.backends.base import Backend, BackendClass
from abricot_local.backends.options import ScoringOptions
from abricot_local.errors import UsageError
from abricot_local.option_fields import Spec, specs


@dataclass(frozen=True)
class Registered:
    backend: str  # "module:Class" of the backend
    options: str  # "module:Class" of its Options (a module that does not import the runtime)
    reads_model_file: bool = True  # its class's, known without importing the runtime (tests/test_options.py)
    interrupts: str = ""  # the module of its interrupt handling (no runtime import), or none
    doctor: str = ""  # "module:function": gpus -> what `doctor` shows of it (no runtime import to call it)
    quantizer: str = ""  # "module:function" writing a quant of a model file (`abricot-local quantize`), or none


GROUP = "abricot_local.backends"  # other packages' backends: NAME = "module:REGISTERED" (a Registered)
SHIPPED = {
    "llama.cpp": Registered("abricot_local.backends.llama_cpp.backend:LlamaCppBackend",
                            "abricot_local.backends.llama_cpp.options:LlamaCppOptions",
                            interrupts="abricot_local.backends.llama_cpp.interrupts",
                            doctor="abricot_local.backends.llama_cpp.system:doctor_facts",
                            quantizer="abricot_local.backends.llama_cpp.quantize:quantize"),
    "fake": Registered("abricot_local.backends.fake:FakeBackend", "abricot_local.backends.options:ScoringOptions",
                       reads_model_file=False),
}
DEFAULT_BACKEND = "llama.cpp"


def plugins(group: str = GROUP) -> dict[str, Registered]:
    """The backends other packages register through the entry-point group ``group``: each names a
    ``Registered`` in a module of its own, so only that small module loads here (the backend and
    its runtime load when used). A broken one is named, and refused."""
    out = {}
    for ep in entry_points(group=group):
        try:
            found = ep.load()
        except Exception as exc:  # a broken plugin names itself
            raise UsageError(f"backend plugin {ep.name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}")
        if not isinstance(found, Registered):
            raise UsageError(f"backend plugin {ep.name!r} ({ep.value}) is not a backends.Registered")
        out.setdefault(ep.name, found)
    return out


BACKENDS = {**SHIPPED, **{k: v for k, v in plugins().items() if k not in SHIPPED}}


def _load(ref: str):
    module, _, name = ref.partition(":")
    return getattr(import_module(module), name)


def _registered(kind: str) -> Registered:
    if kind not in BACKENDS:
        raise UsageError(f"unknown backend {kind!r}; choose from {', '.join(BACKENDS)}")
    return BACKENDS[kind]


def backend_class(kind: str) -> BackendClass:
    """The class of backend ``kind`` (imports its module, and its runtime)."""
    return _load(_registered(kind).backend)


def reads_model_file(kind: str) -> bool:
    """Whether backend ``kind`` reads a model file (its registration says so: no runtime is imported)."""
    return _registered(kind).reads_model_file


def options_class(kind: str) -> type[ScoringOptions]:
    """The options class of backend ``kind`` (imports no runtime)."""
    return _load(_registered(kind).options)


def backend_options(kind: str, values: dict, *, strict: bool = True) -> ScoringOptions:
    """Backend ``kind``'s own options from a mapping, each value parsed and checked: CLI values
    or lm-eval's model_args (``strict``: an option it lacks is an error) or a recorded run's
    config (other keys ignored)."""
    return options_class(kind).from_values(values, backend=kind, strict=strict)


def recorded_options(kind: str, config: dict, over: dict | None = None) -> ScoringOptions:
    """The options a recorded run was made with: its config, with ``over`` (options that change no
    number) on top."""
    return backend_options(kind, {**config, **(over or {})}, strict=False)


def option_specs() -> list[tuple[Spec, tuple[str, ...]]]:
    """Every registered backend's options, each once, in declaration order: (spec, the backends
    that have it). The command line's backend flags and lm-eval's model_args keys."""
    out: dict[str, tuple[Spec, list[str]]] = {}
    for kind in BACKENDS:
        for spec in specs(options_class(kind)):
            if not spec.internal:
                out.setdefault(spec.name, (spec, []))[1].append(kind)
    return [(spec, tuple(kinds)) for spec, kinds in out.values()]


def open_backend(kind: str, model: str, options: ScoringOptions) -> Backend:
    """Create the backend ``kind`` for ``model`` (a GGUF path, or a label for a synthetic one)."""
    return backend_class(kind)(model, options)


def _interrupt_hooks() -> list:
    """The registered backends' interrupt-handling modules (none imports a runtime)."""
    return [import_module(r.interrupts) for r in BACKENDS.values() if r.interrupts]


def on_stuck(handler: Callable[[int], None]) -> Callable[[], None]:
    """Call ``handler(signum)`` when a signal came while a backend's C call did not return (each
    backend's own hook decides when; the process ends after it). Returns what unregisters it."""
    forgets = [hooks.on_stuck(handler) for hooks in _interrupt_hooks()]

    def forget() -> None:
        for f in forgets:
            f()

    return forget


def exit_process(code: int) -> None:
    """End the process with ``code``: through the backend that left a thread inside a C call (it
    ends the process without the runtime's exit-time destructors), else sys.exit."""
    for hooks in _interrupt_hooks():
        if hooks.left_inside():
            hooks.exit_process(code)
    sys.exit(code)


def doctor_facts(gpus: dict) -> dict:
    """What `doctor` shows of the registered backends (each one's ``doctor`` hook, given the GPUs
    found), merged; ``advice``: every backend's tips."""
    out: dict = {"advice": []}
    for r in BACKENDS.values():
        if r.doctor:
            facts = dict(_load(r.doctor)(gpus))
            out["advice"] += facts.pop("advice", [])
            out.update(facts)
    return out


def quantizer(kind: str = DEFAULT_BACKEND) -> Callable:
    """The function backend ``kind`` writes a quant of a model file with (its ``quantizer``)."""
    r = _registered(kind)
    if not r.quantizer:
        raise UsageError(f"backend {kind!r} cannot quantize a model file")
    return _load(r.quantizer)
