"""Models other tools already keep on this machine, named with one syntax:

- ``ollama:NAME[:TAG]``: Ollama's store (:mod:`.ollama`);
- ``lmstudio:PUBLISHER/REPO[/FILE.gguf]``: LM Studio's models folder (:mod:`.lmstudio`);
- ``hf:OWNER/REPO[:QUANT]``, ``hf:OWNER/REPO/FILE.gguf``: the Hugging Face cache, else a
  download (:mod:`.hf_cache`);
- a file name found in llama.cpp's cache or a ``--model-dir`` folder (:mod:`.folders`).

Each store module gives what :data:`NEEDS` says (checked when it loads); nothing here talks to a running
Ollama or LM Studio. ``modelref`` turns a Found into a ModelRef.

Other packages add stores through the entry-point group ``abricot_local.model_stores`` (``PREFIX = "module"``),
as tasks are added: a plugin cannot take a shipped store's prefix (its entry is ignored, and `doctor` says so),
a prefix two plugins register is refused when used, naming both; a plugin that fails to load, or whose
functions do not take what a store is given, is named when its prefix is used (`doctor` and `models --local`
name it too) and blocks no other store.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from abricot_local.errors import UsageError
from abricot_local.names import Clashes, plugin_entries, where

GROUP = "abricot_local.model_stores"  # other packages' stores: PREFIX = "module" (with resolve() and listing())
MODULES = {"ollama": "abricot_local.models.stores.ollama", "lmstudio": "abricot_local.models.stores.lmstudio",
           "hf": "abricot_local.models.stores.hf_cache"}  # the shipped stores
NEEDS = ("resolve(rest, *, offline=None, notify=None, progress=True, fresh=False) -> Found, "
         "listing() -> list[Listed], and optionally pending(rest) (what a run would download)")
RESOLVE_KEYWORDS = {"offline": None, "notify": None, "progress": True, "fresh": False}  # what resolve() is given
CLASHES = Clashes(
    ignored="model store plugin entry {entries} is ignored: {name!r} is a store shipped with abricot-local "
            "(`{name}:` names that one); the plugin must register its store under another prefix",
    several="model store prefix {name!r} is registered by several plugins ({entries}): uninstall one of them, or "
            "have one register its store under another prefix")


@functools.cache
def _entries() -> tuple[dict[str, str | EntryPoint], dict[str, str], dict[str, str]]:
    """(prefix -> its module: the shipped stores, then the plugins' entry points by prefix; prefix -> why a
    prefix two plugins register is refused; prefix -> why a plugin's entry taking a shipped prefix is
    ignored). A package found twice (the same value) is no clash. Names only: nothing is imported."""
    plugins = plugin_entries(entry_points(group=GROUP), MODULES, CLASHES)
    return plugins.over(MODULES), plugins.several, plugins.ignored


def prefixes() -> tuple[str, ...]:
    """Every store prefix: the shipped ones, then the plugins' (a refused one included: it is named when used)."""
    return tuple(_entries()[0])


def refused() -> tuple[str, ...]:
    """Why a store plugin's entry is not used: one taking a shipped prefix (ignored), a prefix several plugins
    register, a plugin that does not load or whose functions do not take what a store is given (each imported
    here: `doctor` and `models --local` ask)."""
    registry, clashes, ignored = _entries()
    out = [*clashes.values(), *ignored.values()]
    for prefix in registry:
        if prefix not in MODULES and prefix not in clashes:
            try:
                _module(prefix)
            except UsageError as err:
                out.append(str(err))
    return tuple(out)


@dataclass(frozen=True)
class Found:
    """A model file a store holds: the file given to llama.cpp (a split model's first part)."""

    path: Path
    source: str
    label: str  # a short name for folders and tables
    revision: str | None = None
    facts: tuple[tuple[str, str], ...] = ()  # source_facts of the run's record


@dataclass(frozen=True)
class Listed:
    """One GGUF a store holds, as `models --local` lists it: the name to give `run`."""

    source: str
    name: str
    path: Path
    problem: str = ""  # why the store's entry cannot be used (a damaged manifest): listed, not raised
    sha256: str | None = None  # what the store says the file's SHA-256 is (an Ollama blob's name): checked


def label_of(text: str) -> str:
    """A store's short ASCII label of a model (ASCII letters, digits, ``.``, ``_``, ``-``): the name its run
    records and its run's folder (``gemma3:270m`` -> ``gemma3-270m``). Not a path part itself: where it becomes
    one (run.session.Folders.of) it goes through names.path_part, which leaves it as it is (up to 120
    characters). path_part alone would keep ``:`` and spaces (``gemma3:270m``), renaming existing runs'
    folders and recorded names: this narrower label stays."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._") or "model"


def prefix_of(name: str) -> str | None:
    head, sep, _ = name.partition(":")
    return head if sep and head in _entries()[0] else None


def _module(prefix: str):
    """The store module of ``prefix``, checked (:func:`_checked`); a plugin's that cannot be used is a
    UsageError naming it."""
    from importlib import import_module

    registry, clashes, _ = _entries()
    if prefix in clashes:
        raise UsageError(clashes[prefix])
    found = registry[prefix]
    if isinstance(found, str):  # a shipped store
        return import_module(found)
    try:
        module = found.load()
    except Exception as exc:  # a broken plugin names itself
        raise UsageError(f"model store plugin {prefix!r} ({where(found)}) failed to load: "
                         f"{type(exc).__name__}: {exc}; fix or reinstall its package (or uninstall it)") from None
    return _checked(prefix, where(found), module)


def _checked(prefix: str, where: str, module):
    """``module`` if its functions take what a store is given (:data:`NEEDS`), else a UsageError naming the
    plugin, what it has and what it needs."""
    import inspect

    wanted = {"resolve": (("rest",), RESOLVE_KEYWORDS), "listing": ((), {})}
    if hasattr(module, "pending"):
        wanted["pending"] = (("rest",), {})
    problems = []
    for name, (args, keywords) in wanted.items():
        function = getattr(module, name, None)
        if not callable(function):
            problems.append(f"it has no {name}()")
            continue
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):  # no signature to read (a builtin): trusted
            continue
        try:
            signature.bind(*args, **keywords)
        except TypeError as err:
            problems.append(f"its {name}{signature} cannot be called as {name}("
                            + ", ".join([*args, *(f"{k}=..." for k in keywords)]) + f") ({err})")
    if problems:
        raise UsageError(f"model store plugin {prefix!r} ({where}) cannot be used: {'; '.join(problems)}; a store's "
                         f"module must give {NEEDS}")
    return module


def resolve(name: str, *, offline: bool | None = None, notify=None, progress: bool = True,
            fresh: bool = False) -> Found:
    """The file ``PREFIX:REST`` names."""
    prefix = prefix_of(name)
    rest = name[len(prefix) + 1:]
    return _module(prefix).resolve(rest, offline=offline, notify=notify, progress=progress, fresh=fresh)


def locate(name: str, *, offline: bool | None = None, notify=None, progress: bool = True, fresh: bool = False):
    """What ``PREFIX:REST`` names, downloading nothing: the file its store holds (Found), else, from a store
    that downloads what it does not hold (a module with ``pending``: the hub's), what a run would download (a
    models.sources.Pending; ``offline`` True: refused)."""
    from abricot_local.errors import ModelError

    prefix = prefix_of(name)
    module = _module(prefix)
    downloads = hasattr(module, "pending")
    try:
        return resolve(name, offline=True if downloads else offline, notify=notify, progress=progress, fresh=fresh)
    except ModelError:
        if not downloads or offline:
            raise
        return module.pending(name[len(prefix) + 1:])


def listing(model_dirs: tuple[str, ...] = ()) -> list[Listed]:
    """Every GGUF the stores hold (missing stores are skipped, as is a plugin's that cannot be used:
    :func:`refused` says why)."""
    from . import folders

    out: list[Listed] = []
    for prefix in prefixes():
        try:
            module = _module(prefix)
        except UsageError:
            if prefix in MODULES:
                raise
            continue
        out += module.listing()
    return out + folders.listing(model_dirs)


def find_by_file_name(name: str, model_dirs: tuple[str, ...] = ()) -> Found | None:
    """A file named ``name`` (or ``name``.gguf) in llama.cpp's cache or a --model-dir folder."""
    from . import folders

    return folders.find(name, model_dirs)


def find_file(name: str, model_dirs: tuple[str, ...] = ()) -> Found:
    """A model file given by its bare name (``my-model.gguf``, no folder part, not in the current folder) in
    llama.cpp's cache or a --model-dir folder (:func:`find_by_file_name`), else UnknownModelError saying where it
    was looked for (the current folder, each --model-dir, llama.cpp's cache) and the close matches found here."""
    from abricot_local.errors import UnknownModelError, opt

    from . import folders

    hit = folders.find(name, model_dirs)
    if hit is None:
        raise UnknownModelError(f"model file not found: {name} is not in {folders.looked_in(model_dirs)}; give its "
                                f"path, or {opt('model_dirs', 'DIR')} for the folder that holds it."
                                f"{near_matches(name, model_dirs)}")
    return hit


def near_matches(name: str, model_dirs: tuple[str, ...] = ()) -> str:
    """" Found on this machine: ..." with the local names closest to ``name``, else ""."""
    try:
        names = [x.name for x in listing(model_dirs)]
    except Exception:  # a damaged store must not hide the real error
        return ""

    def key(text: str) -> str:  # the name after a store's prefix, without .gguf (which every file name shares)
        return text.split(":", 1)[-1].lower().removesuffix(".gguf")

    bare = {key(n): n for n in names}
    close = difflib.get_close_matches(key(name), list(bare), n=3, cutoff=0.5)
    return f" Found on this machine: {', '.join(bare[c] for c in close)}." if close else ""
