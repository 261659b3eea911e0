"""Models other tools already keep on this machine, named with one syntax:

- ``ollama:NAME[:TAG]``: Ollama's store (:mod:`.ollama`);
- ``lmstudio:PUBLISHER/REPO[/FILE.gguf]``: LM Studio's models folder (:mod:`.lmstudio`);
- ``hf:OWNER/REPO[:QUANT]``, ``hf:OWNER/REPO/FILE.gguf``: the Hugging Face cache, else a
  download (:mod:`.hf_cache`);
- a file name found in llama.cpp's cache or a ``--model-dir`` folder (:mod:`.folders`).

Each store module gives ``resolve(rest, ...) -> Found`` and ``listing() -> [Listed]`` (a store that
downloads what it does not hold, the hub's, also ``pending(rest)``: what a run would download); nothing
here talks to a running Ollama or LM Studio. ``modelref`` turns a Found into a ModelRef.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

GROUP = "abricot_local.model_stores"  # other packages' stores: PREFIX = "module" (with resolve() and listing())
MODULES = {"ollama": "abricot_local.models.stores.ollama", "lmstudio": "abricot_local.models.stores.lmstudio",
           "hf": "abricot_local.models.stores.hf_cache"}


def _plugins() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=GROUP) if ep.name not in MODULES}


MODULES.update(_plugins())  # names only: a store's module loads when a name with its prefix is used
PREFIXES = tuple(MODULES)


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
    """A name usable as a folder: ``gemma3:270m`` -> ``gemma3-270m``."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._") or "model"


def prefix_of(name: str) -> str | None:
    head, sep, _ = name.partition(":")
    return head if sep and head in PREFIXES else None


def _module(prefix: str):
    from importlib import import_module

    return import_module(MODULES[prefix])


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
    """Every GGUF the stores hold (missing stores are skipped)."""
    from . import folders

    out: list[Listed] = []
    for prefix in PREFIXES:
        out += _module(prefix).listing()
    return out + folders.listing(model_dirs)


def find_by_file_name(name: str, model_dirs: tuple[str, ...] = ()) -> Found | None:
    """A file named ``name`` (or ``name``.gguf) in llama.cpp's cache or a --model-dir folder."""
    from . import folders

    return folders.find(name, model_dirs)


def near_matches(name: str, model_dirs: tuple[str, ...] = ()) -> str:
    """" Found on this machine: ..." with the local names closest to ``name``, else ""."""
    try:
        names = [x.name for x in listing(model_dirs)]
    except Exception:  # a damaged store must not hide the real error
        return ""
    bare = {n.split(":", 1)[-1].lower(): n for n in names}
    close = difflib.get_close_matches(name.lower().split(":", 1)[-1], list(bare), n=3, cutoff=0.5)
    return f" Found on this machine: {', '.join(bare[c] for c in close)}." if close else ""
