"""A model named, found and verified: :class:`ModelRef` (results.json's ``model``, :meth:`ModelRef.record`)
and :class:`Located` (what a name names, found once with nothing fetched; ``Located.options()`` gives the options it opens with,
``Located.ready()`` checks a registry model's memory and free disk (at those options) before its download,
``Located.fetch()`` makes the file available and verifies it: the GGUF check, once per file per process, and
the SHA-256, memoised as :mod:`abricot_local.hashing` says; ``fresh`` reads the bytes).

Naming a model, from what the user wrote to an open one, is :mod:`abricot_local.models.locate`
(``locate``, ``resolve_model_ref``, ``open_model``): one way for `run`, `check`, `labels`, `lm-eval` and the
benches.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from abricot_local import hashing
from abricot_local.backends.options import ScoringOptions
from abricot_local.models.given import Given
from abricot_local.models.labelled import require_labelled
from abricot_local.models import sources as registry_sources
from abricot_local.models.sources import check_before_download, source_of
from abricot_local.errors import AbricotError
from abricot_local.gguf.file import check_gguf, header_quant, quant_of
from abricot_local.record.schema import Model
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
        if self.source == "path" or self.synthetic or self.path is None:
            return str(self.path) if self.path else self.label
        return self.as_written

    @property
    def synthetic(self) -> bool:
        """A synthetic model: a label a backend that reads no model file scores, not a model's file."""
        kinds = registry_sources.SOURCES  # a registry entry's sources, by kind: the one that has no file
        return self.source in kinds and not kinds[self.source].has_file

    def record(self) -> Model:
        """The ``model`` section of a run's results (and of lm-eval's provenance); its ``path`` absolute (made so
        without following a symlink), so `check` and `kld` find the file again from any folder."""
        base = self.spec.base if self.spec is not None and self.spec.base else None  # a ladder's reports group by it
        bits = arch = None
        if self.path is not None:  # a ladder's order of precision (gguf.file.by_precision), and what its runs share
            from abricot_local.errors import ModelError
            from abricot_local.gguf.file import bits_per_weight, headers

            try:
                bits = bits_per_weight(self.path)
                arch = headers(self.path)[0].metadata.get("general.architecture")
            except ModelError:  # not a GGUF (a plugin backend's own format): not recorded
                bits = arch = None
        return Model(name=self.label, alias=self.alias, path=os.path.abspath(self.path) if self.path else None,
                     size=self.path.stat().st_size if self.path else None, sha256=self.sha256, source=self.source,
                     as_written=self.as_written, revision=self.revision or None,
                     sha256_origin=self.sha256_origin or None, source_facts=dict(self.source_facts),
                     base=base, bits_per_weight=bits, architecture=arch if isinstance(arch, str) and arch else None)


def lookup_alias(name: str, models_file: Path | str | None = None) -> ModelSpec:
    """The registry entry of ``name``; an unknown alias fails here, before any download."""
    return lookup(name, load_registry(models_file))


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
    registry: dict[str, ModelSpec] | None = field(default=None, compare=False, repr=False)  # the registry ``spec``
    # is an entry of, read to find it (a model to download: another quant of it here costs its plan)

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

    def ready(self, options: ScoringOptions, *, fetch: bool = True, force: bool = False, notify: Notify | None = None,
              fresh: bool = False, progress: bool = True, offline: bool | None = None) -> ModelRef | None:
        """The model, to open with ``options`` (:meth:`options`'s): ``fetch``, a registry model not here checked
        against memory (its KV cache at the context its backend allocates for them: their context_window) and the
        download folder's free disk first (unless ``force``), then fetched and verified (:meth:`fetch`); else the
        model as far as it is here (:meth:`here`, None when it is not)."""
        if not fetch:
            return self.here()
        if not force and self.ref is None and self.spec is not None:
            check_before_download(self.spec, options.context_window)  # the KV cache of the context allocated
        return self.fetch(notify=notify, fresh=fresh, progress=progress, offline=offline)

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
    if spec is not None:  # a registry file just fetched: its `quant` against its header
        require_labelled([spec], Path(path))
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

def require_same(ref: ModelRef, recorded_sha256: str | None, what: str = "model file") -> None:
    """Refuse a model whose SHA-256 differs from a run's record (check, --resume)."""
    if recorded_sha256 and ref.sha256 != recorded_sha256:
        from abricot_local.errors import ResultsError

        raise ResultsError(f"{what} {ref.path} has sha256 {ref.sha256}, but the run recorded {recorded_sha256}: "
                           "not the same file")


__all__ = ["ModelRef", "Located", "lookup_alias", "is_cached",
           "local_file", "require_same", "SOURCES"]
