"""Backends by name, imported lazily (llama.cpp loads only when used).

A backend is registered (:class:`Registered`: shipped in :data:`SHIPPED`, another package's through the
entry-point group :data:`GROUP`) with its options class, which lives in a module that does not import the
backend's runtime (flags, model_args keys and option checks need only that), whether it reads a model file (its
one declaration: the registry and the model lookup read it without loading the runtime), the keys of its own
provenance that must agree between the parts of one run (``build_keys``: merge reads them from recorded runs, no
runtime loaded), and, when its runtime's
C calls need it, the module of its interrupt handling (``on_stuck``, ``left_inside``, ``exit_process``, optionally
``waiting``; no runtime import), which :func:`on_stuck`, :func:`waiting` and :func:`exit_process` go through. Its
class follows ``base.BackendClass``
(``name``, ``Options``, ``capabilities``, the classmethods ``config``, ``preflight``, ``speed_settings``,
``watch_remote``, ``kernel_threads``; ``base.Declared`` gives their defaults); instances follow ``base.Backend``;
both are checked when the backend is asked for (:mod:`backends.contract`). Shared code uses these, and asks
whether a backend has an option by its Options' fields (:func:`has_option`), never comparing a backend's name.

A plugin that fails to load, takes a shipped backend's name, shares its name with another plugin, or declares an
option as another backend does not is refused by name when it is asked for (:class:`contract.BackendError`),
and `doctor` says why (:func:`refused`): it blocks no other backend, and no command that does not use it.
"""

from __future__ import annotations

import functools
import sys
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Callable, Iterator

from abricot_local.backends.base import Backend, BackendClass
from abricot_local.backends.contract import BackendError, check_session, checked_class, clash
from abricot_local.backends.options import ScoringOptions
from abricot_local.errors import AbricotError, UsageError
from abricot_local.gguf.file import model_bytes
from abricot_local.option_fields import Spec, specs
from abricot_local.names import Clashes, plugin_entries, where


@dataclass(frozen=True)
class Registered:
    backend: str  # "module:Class" of the backend
    options: str  # "module:Class" of its Options (a module that does not import the runtime)
    # MODEL is a file (else a label: a synthetic backend, or a model behind an API). Declared here only: the
    # registry, the model lookup, `check` and the plan read it without importing the runtime
    reads_model_file: bool = True
    interrupts: str = ""  # the module of its interrupt handling (no runtime import), or none
    doctor: str = ""  # "module:function": gpus -> what `doctor` shows of it (no runtime import to call it)
    # "module:function" writing a quant of a model file, or none: ``f(src, dst, quant, *, allow_requantize,
    # threads)`` (`abricot-local quantize`, models/quantize.py; llama.cpp's: backends/llama_cpp/quantize.py)
    quantizer: str = ""
    # its own provenance keys (``Provenance.extra``: its runtime's version, build...) that must agree between the
    # parts of one run (`merge`'s shards), beside the ones every backend records (run.merge.SHARED_BUILD); read
    # from recorded runs without loading the runtime
    build_keys: tuple[str, ...] = ()


GROUP = "abricot_local.backends"  # other packages' backends: NAME = "module:REGISTERED" (a Registered)
SHIPPED = {
    "llama.cpp": Registered("abricot_local.backends.llama_cpp.backend:LlamaCppBackend",
                            "abricot_local.backends.llama_cpp.options:LlamaCppOptions",
                            interrupts="abricot_local.backends.llama_cpp.interrupts",
                            doctor="abricot_local.backends.llama_cpp.doctor:doctor_facts",
                            quantizer="abricot_local.backends.llama_cpp.quantize:quantize",
                            build_keys=("llama_cpp_python", "system_info")),
    "fake": Registered("abricot_local.backends.fake:FakeBackend", "abricot_local.backends.options:ScoringOptions",
                       reads_model_file=False),
}
DEFAULT_BACKEND = "llama.cpp"
CLASHES = Clashes(
    ignored="backend plugin entry {entries} is ignored: {name!r} is a backend shipped with abricot-local (it runs "
            "that one); the plugin must register its backend under another name",
    several="backend {name!r} is registered by several plugins ({entries}): uninstall one of them, or have one "
            "register its backend under another name")


def __getattr__(name: str):
    if name == "BACKENDS":  # name -> Registered of every usable backend, read when first asked for (PEP 562)
        return _entries()[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _entries() -> tuple[dict[str, Registered], dict[str, str], tuple[str, ...]]:
    """(name -> Registered of each usable backend: the shipped ones, then the plugins' by name; name -> why a
    plugin's backend is refused; why a plugin's entry that takes a shipped backend's name is ignored). Only each
    plugin's small registration module and its options class load here. A package found twice (the same
    ``module:REGISTERED``) is no clash."""
    usable, refused = dict(SHIPPED), {}
    declared: dict[str, tuple[Spec, str]] = {}  # option -> (its first declaration, by which backend)
    for name in SHIPPED:
        declared.update({s.name: (s, name) for s in specs(_load(SHIPPED[name].options)) if s.name not in declared})
    plugins = plugin_entries(entry_points(group=GROUP), SHIPPED, CLASHES)
    for name, eps in plugins.entries.items():  # a name several plugins register: not usable, none of them loaded
        if name in plugins.several:
            refused[name] = plugins.several[name]
            continue
        try:
            usable[name] = _registration(name, eps[0], declared)
        except BackendError as err:
            refused[name] = str(err)
    return usable, refused, tuple(plugins.ignored.values())


def _registration(name: str, ep: EntryPoint, declared: dict[str, tuple[Spec, str]]) -> Registered:
    """Plugin ``name``'s registration, loaded, its options class loaded and its options checked against those
    declared before it (``declared``, which gets its own); else a :class:`BackendError` naming it."""
    said = f"backend plugin {name!r} ({where(ep)})"
    try:
        found = ep.load()
        if not isinstance(found, Registered):
            raise BackendError(f"{said} is not a backends.Registered")
        options = _load(found.options)
    except BackendError:
        raise
    except Exception as exc:  # a broken plugin names itself
        raise BackendError(f"{said} failed to load: {type(exc).__name__}: {exc}; fix or reinstall its package "
                           "(or uninstall it)") from None
    keys = found.build_keys
    if not (isinstance(keys, tuple) and all(isinstance(k, str) and k for k in keys)):
        raise BackendError(f"{said}: its build_keys must be a tuple of provenance keys (non-empty strings), got "
                           f"{keys!r}")
    if not (isinstance(options, type) and issubclass(options, ScoringOptions)):
        raise BackendError(f"{said}: its options {found.options} is not a subclass of backends.options.ScoringOptions")
    try:
        own = specs(options)
    except Exception as exc:  # its fields cannot be read (an annotation that does not resolve)
        raise BackendError(f"{said}: its options {found.options} cannot be read: {type(exc).__name__}: {exc}") from None
    for spec in own:
        theirs, other = declared.get(spec.name, (spec, name))
        why = clash(name, spec, other, theirs)
        if why:
            raise BackendError(why)
    declared.update({s.name: (s, name) for s in own if s.name not in declared})
    return found


def found() -> object:
    """The backends as found now: the same object until they are looked for again (a memo of what a registration
    decided, e.g. models.toml's checks, keyed by it, is never stale)."""
    return _entries()


def refused() -> tuple[str, ...]:
    """Why each plugin's backend is not usable (refused when it is asked for), and why an entry that takes a
    shipped backend's name is ignored: what `doctor` says."""
    _, no, ignored = _entries()
    return (*no.values(), *ignored)


def _load(ref: str):
    module, _, name = ref.partition(":")
    return getattr(import_module(module), name)


def _registered(kind: str) -> Registered:
    usable, no, _ = _entries()
    if kind in usable:
        return usable[kind]
    if kind in no:
        raise BackendError(no[kind])
    raise UsageError(f"unknown backend {kind!r}; choose from {', '.join(usable)}"
                     + "".join(f"; {why}" for why in no.values()))


def known(kind: str) -> bool:
    """Whether ``kind`` is a backend: a usable one, or a plugin's that is refused (named when it is asked for)."""
    return kind in _entries()[0] or kind in _entries()[1]


def backend_class(kind: str) -> BackendClass:
    """The class of backend ``kind`` (imports its module, and its runtime), checked (:mod:`backends.contract`)."""
    r = _registered(kind)
    try:
        cls = _load(r.backend)
    except Exception as exc:  # a broken plugin (or a runtime not installed) names itself
        raise BackendError(f"backend {kind!r} ({r.backend}) failed to load: {type(exc).__name__}: {exc}; fix or "
                           "reinstall its package") from None
    options = options_class(kind)
    return checked_class(kind, r.backend, cls, options, r.reads_model_file, r.build_keys)


def reads_model_file(kind: str) -> bool:
    """Whether backend ``kind`` reads a model file (its registration declares it: no runtime is imported)."""
    return _registered(kind).reads_model_file


def build_keys(kind: str) -> tuple[str, ...]:
    """Backend ``kind``'s own provenance keys that must agree between the parts of one run (its registration
    declares them: no runtime is imported)."""
    return _registered(kind).build_keys


def has_option(kind: str, name: str) -> bool:
    """Whether backend ``kind`` has the option ``name`` (a field of its Options a user can set: advice that names
    the option, e.g. ``threads``, gives it only to a backend that takes it). Imports no runtime."""
    return any(s.name == name and not s.internal for s in specs(options_class(kind)))


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
    for kind in _entries()[0]:  # each option declared alike by every backend that has it (_registration)
        for spec in specs(options_class(kind)):
            if not spec.internal:
                out.setdefault(spec.name, (spec, []))[1].append(kind)
    return [(spec, tuple(kinds)) for spec, kinds in out.values()]


def open_backend(kind: str, model: str, options: ScoringOptions, *, weights: Path | None = None,
                 lost: Callable[[AbricotError], None] | None = None) -> Backend:
    """Open the backend ``kind`` for ``model`` (a GGUF path, or a label for a synthetic one), in one step: its
    remote devices watched (``lost``, which ends the process, told when one goes away: the class's
    ``watch_remote``, begun before its preflight reaches them), then ``weights`` (the model file; None: not
    checked, --force) refused when it and its KV cache clearly do not fit (the class's ``preflight``: RAM, free
    VRAM, the RPC servers' free memory), then its session made and checked before any item is scored
    (:func:`contract.check_session`)."""
    cls = backend_class(kind)
    if lost is not None:
        cls.watch_remote(options, lost)
    if weights is not None:
        facts = cls.preflight(weights, options)
        if facts is not None:
            facts.check(model_bytes(weights))
    backend = cls(model, options)
    try:
        check_session(kind, _registered(kind).backend, backend)
    except BackendError:
        backend.close()
        raise
    return backend


def _interrupt_hooks() -> list:
    """The registered backends' interrupt-handling modules (none imports a runtime)."""
    return [import_module(r.interrupts) for r in _entries()[0].values() if r.interrupts]


def on_stuck(handler: Callable[[int], None]) -> Callable[[], None]:
    """Call ``handler(signum)`` when a signal came while a backend's C call did not return (each
    backend's own hook decides when; the process ends after it, within :func:`waiting` only at a second signal).
    Returns what unregisters it."""
    forgets = [hooks.on_stuck(handler) for hooks in _interrupt_hooks()]

    def forget() -> None:
        for f in forgets:
            f()

    return forget


@contextmanager
def waiting() -> Iterator[None]:
    """The door's choice, declared by a library's door around each call (the Python API's, api.arguments.entry;
    lm-eval's model called from Python, lm_eval.model.door): within the block,
    a signal whose backend C call has not returned a few seconds later is waited for, and raised once the call
    returns (a user's interpreter, a notebook's kernel, is never ended for a first signal; a second one ends
    it); outside it (the command line) the process ends then, :func:`on_stuck`'s handlers first. Each
    backend's hook decides when a call is stuck."""
    with ExitStack() as stack:
        for hooks in _interrupt_hooks():
            if hasattr(hooks, "waiting"):
                stack.enter_context(hooks.waiting())
        yield


def exit_process(code: int) -> None:
    """End the process with ``code``: through the backend that left a thread inside a C call (it
    ends the process without the runtime's exit-time destructors), else sys.exit."""
    for hooks in _interrupt_hooks():
        if hooks.left_inside():
            hooks.exit_process(code)
    sys.exit(code)


def class_refusal(kind: str) -> BackendError | None:
    """Why plugin backend ``kind``'s class cannot be used (it does not load, or lacks what the contract needs:
    its class is loaded to know), else None; None for a shipped backend (its class is the tests', and loading
    llama.cpp's would import its runtime)."""
    if kind in SHIPPED:
        return None
    try:
        backend_class(kind)
    except BackendError as err:
        return err
    return None


def not_usable() -> list[str]:
    """Why each backend that cannot be used is not, for `doctor`: a plugin refused (:func:`refused`: it does not
    load, clashes, declares an option unlike another backend; an entry taking a shipped name, ignored), or whose
    class is (:func:`class_refusal`)."""
    return [*refused(), *(str(err) for err in map(class_refusal, _entries()[0]) if err is not None)]


def quantizer(kind: str = DEFAULT_BACKEND) -> Callable:
    """The function backend ``kind`` writes a quant of a model file with (its ``quantizer``)."""
    r = _registered(kind)
    if not r.quantizer:
        raise UsageError(f"backend {kind!r} cannot quantize a model file")
    return _load(r.quantizer)
