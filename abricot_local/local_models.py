"""`models --local`: every GGUF the model stores on this machine hold (Ollama, LM Studio, the
Hugging Face cache, llama.cpp's cache, --model-dir folders), with its header's facts and, when
its SHA-256 equals a registry entry's, that alias and the published rows it can reproduce.

Hashes are memoised (:mod:`abricot_local.hashing`), so only the first listing reads the bytes;
``progress`` hears what is hashed before it is. A store entry that cannot be used (a damaged
Ollama manifest, a file that is not a sound GGUF, a blob whose content is not the SHA-256 its
name says) is a row saying why, never an error that hides the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import hashing, stores
from .errors import AbricotError
from .model_file import facts, human_params
from .registry import ModelSpec


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


def by_sha256(registry: dict[str, ModelSpec]) -> dict[str, ModelSpec]:
    """Registry entries by the SHA-256 of their (first) file."""
    return {spec.sha256[0]: spec for _, spec in sorted(registry.items()) if spec.sha256}


def local_models(registry: dict[str, ModelSpec], model_dirs: tuple[str, ...] = (),
                 progress: Callable[[str], None] | None = None) -> list[LocalModel]:
    """One row per GGUF found, in the stores' order; headers first, then the hashes not
    remembered yet (each file once, hard links included)."""
    found = stores.listing(model_dirs)
    checked = []
    for x in found:
        if x.problem:
            checked.append((x, None, x.problem))
            continue
        try:
            checked.append((x, facts(x.path), None))
        except AbricotError as err:
            checked.append((x, None, str(err)))
    todo: dict[tuple, Path] = {}
    for x, f, _ in checked:
        ident = hashing.identity(x.path)
        if f is not None and ident not in todo and hashing.remembered(x.path) is None:
            todo[ident] = x.path
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
    rows = []
    for x, f, problem in checked:
        if f is None:
            rows.append(LocalModel(x.source, x.name, x.path, problem=problem))
            continue
        try:
            sha = hashing.sha256_file(x.path)
        except AbricotError as err:
            rows.append(LocalModel(x.source, x.name, x.path, problem=str(err)))
            continue
        if x.sha256 and sha != x.sha256:
            rows.append(LocalModel(x.source, x.name, x.path, problem=f"{x.path} has sha256 {sha}, not the {x.sha256} "
                                   "its name says: it is damaged or was replaced"))
            continue
        spec = known.get(sha)
        rows.append(LocalModel(x.source, x.name, x.path, f.architecture, human_params(f.parameters), f.quant or "?",
                               f.context_length, f.size, sha, spec.name if spec else None,
                               spec.reproduces if spec else ""))
    return rows
