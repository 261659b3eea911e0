"""The model registry: aliases -> where a GGUF file comes from and what it is.

The shipped table is ``models.toml`` at the top of the repository (inside the
package once installed). A user file
(``$ABRICOT_CONFIG_DIR/models.toml``, by default
``$XDG_CONFIG_HOME/abricot-local/models.toml`` or
``~/.config/abricot-local/models.toml``, and/or an explicit ``--models FILE``)
adds aliases or replaces shipped ones, table by table.

Nothing here touches the network; :mod:`abricot_local.models.fetch` does.
"""

from __future__ import annotations

import functools
import os
import pickle
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from abricot_local.errors import UnknownModelError, UsageError, opt
from abricot_local.models.sources import SOURCES, Source, source_of
from abricot_local.models.spec import ModelSpec, parse_size
from abricot_local.names import did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

_STR_KEYS = (
    "source", "repo", "file", "size_approx", "package", "module", "version", "path",
    "quant", "params", "license", "tokenizer", "chat_template", "reproduces", "base",
    "notes", "same_as", "backend", "from_sha256",
)
_KNOWN_KEYS = frozenset(_STR_KEYS + ("revision", "files", "size", "sha256", "gated", "base_gated", "n_ctx"))
_SHA_RE = re.compile(r"^[0-9a-fA-F]{64}$")
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_SHORT_HEX_RE = re.compile(r"^[0-9a-f]{7,39}$")
def packaged_file() -> Path:
    """The shipped ``models.toml``: inside the installed package (a wheel carries it there,
    see setup.py), else at the top of the source tree (an editable install or a checkout)."""
    shipped = Path(str(resources.files("abricot_local").joinpath("models.toml")))
    if shipped.is_file():
        return shipped
    source = Path(__file__).resolve().parents[2] / "models.toml"
    if source.is_file():
        return source
    raise UsageError(f"the shipped models.toml is missing (looked in {shipped.parent} and {source.parent}); "
                     "reinstall abricot-local")


def user_config_dir() -> Path:
    """``$ABRICOT_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/abricot-local``, else ``~/.config/abricot-local``."""
    env = os.environ.get("ABRICOT_CONFIG_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "abricot-local"


def default_user_file() -> Path:
    return user_config_dir() / "models.toml"


def load_registry(user_file: Path | str | None = None) -> dict[str, ModelSpec]:
    """Shipped aliases, then the default user file if it exists, then ``user_file``
    (which must exist). A later table with the same alias replaces the earlier one."""
    raw: dict[str, tuple[dict[str, Any], Path]] = {}
    sources = [packaged_file()]
    default_user = default_user_file()
    if default_user.is_file():
        sources.append(default_user)
    if user_file is not None:
        path = Path(user_file).expanduser()
        if not path.is_file():
            raise UsageError(f"{opt('models_file')}: models file not found: {path}")  # the option that named it
        sources.append(path)
    texts = [(path, _read_bytes(path)) for path in sources]  # an unreadable one: its error, raised in its turn
    key = tuple((str(path), data) for path, data in texts)
    kept = _BUILT.get(key)
    if kept is not None and (kept[1] is None or kept[1] is _backends_found()):
        return dict(kept[0])
    for path, data in texts:
        if isinstance(data, UsageError):
            raise data
        for alias, table in _read_toml(path, data).items():
            raw[alias] = (table, path)
    specs = {alias: _build(alias, raw) for alias in raw}
    if not any(SOURCES[s.source].fields_from_disk for s in specs.values()):
        while len(_BUILT) >= _BUILT_MAX:
            _BUILT.pop(next(iter(_BUILT)))
        _BUILT[key] = (specs, _backends_found() if any(s.backend for s in specs.values()) else None)
    return dict(specs)


# load_registry's answers, by the path and bytes of each file it read: a sweep's runs, a command's later lookups and
# a test session read the same files again (the checks of every entry, 2% of the not-real suite). An answer with an
# entry whose fields come from more than its text (a local path: resolved against $HOME and the links on the way) is
# never kept; one with an entry that names a backend only while the backends found are the same (a plugin's
# registration decides whether it reads a file). Each caller gets its own dict (the specs are frozen).
_BUILT: dict[tuple, tuple[dict[str, ModelSpec], object]] = {}
_BUILT_MAX = 8


def _backends_found() -> object:
    from abricot_local.backends import found

    return found()


@functools.lru_cache(maxsize=8)
def _parsed(raw: bytes) -> bytes:
    return pickle.dumps(tomllib.loads(raw.decode()))


def _parse_toml(raw: bytes) -> dict[str, Any]:
    """tomllib's parse of ``raw``, once per process for the same bytes (the shipped file is read by
    every command, a sweep's runs, a test session's many); each caller gets its own copy."""
    return pickle.loads(_parsed(raw))


def _read_bytes(path: Path) -> bytes | UsageError:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        return UsageError(f"{path}: cannot read models file ({exc.strerror})")


def _read_toml(path: Path, raw: bytes) -> dict[str, dict[str, Any]]:
    try:
        data = _parse_toml(raw)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc}); note that an alias may be defined only once per file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}); save the models file as UTF-8") from None
    for alias, table in data.items():
        if not isinstance(table, dict):
            raise UsageError(f"{path}: '{alias}' must be a table ([{alias}]), not a bare key")
        nested = [k for k, v in table.items() if isinstance(v, dict)]
        if nested:
            raise UsageError(
                f"{path}: [{alias}] contains the table(s) {', '.join(nested)}: an alias with a dot "
                f"must be quoted, e.g. [\"{alias}.{nested[0]}\"]"
            )
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", alias) or alias.lower().endswith(".gguf"):
            raise UsageError(f"{path}: alias '{alias}' must use letters, digits, '.', '_', '-' and not end in .gguf")
    return data


def _build(alias: str, raw: dict[str, tuple[dict[str, Any], Path]], seen: tuple[str, ...] = ()) -> ModelSpec:
    """Resolve ``same_as`` (following chains) and validate one alias."""
    table, path = raw[alias]
    where = f"{path}: [{alias}]"
    unknown = sorted(set(table) - _KNOWN_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_KNOWN_KEYS))}")
    target = table.get("same_as")
    if target is not None:
        if not isinstance(target, str) or target not in raw:
            raise UsageError(f"{where}: same_as = {target!r} is not a known alias")
        if target in seen or target == alias:
            raise UsageError(f"{where}: same_as loops back through {' -> '.join(seen + (alias, target))}")
        parent = _build(target, raw, seen + (alias,))
        merged = dict(_spec_to_table(parent))
        merged.update(table)
        if "files" in table:
            merged.pop("file", None)
        if "file" in table:
            merged.pop("files", None)
        return _validate(alias, merged, path)
    return _validate(alias, table, path)


def _spec_to_table(spec: ModelSpec) -> dict[str, Any]:
    """Inverse of :func:`_validate`, used to copy an entry for ``same_as``."""
    table: dict[str, Any] = {"source": spec.source, **({"files": list(spec.files)} if spec.files else {})}
    if source_of(spec).pins_revision:
        table["revision"] = list(spec.revisions) if len(set(spec.revisions)) > 1 else spec.revision
    if spec.sha256:
        table["sha256"] = list(spec.sha256)
    if spec.sizes:
        table["size"] = list(spec.sizes)
    for key in ("gated", "base_gated"):
        if getattr(spec, key) is not None:
            table[key] = getattr(spec, key)
    if spec.n_ctx is not None:
        table["n_ctx"] = spec.n_ctx
    for key in _STR_KEYS:
        value = getattr(spec, key, "")
        if key not in ("source", "file", "same_as") and value:
            table[key] = value
    return table


def _validate(alias: str, t: dict[str, Any], origin: Path) -> ModelSpec:
    """Check types and consistency of one table and build its :class:`ModelSpec`."""
    where = f"{origin}: [{alias}]"
    for key in _STR_KEYS:
        if key in t and not isinstance(t[key], str):
            raise UsageError(f"{where}: '{key}' must be a string")
    backend = t.get("backend", "")
    fileless = False
    if backend:
        from abricot_local.backends import BACKENDS, known, reads_model_file

        if not known(backend):
            raise UsageError(f"{where}: backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        try:
            fileless = not reads_model_file(backend)  # its registration's: no backend (no runtime) is imported
        except UsageError:  # a plugin's backend that is refused: the entry is refused when it is used (the backend
            fileless = t.get("source") == "synthetic"  # named, and why), not every entry of the file with it
    source = t.get("source", "synthetic" if fileless else "hf")
    if source not in SOURCES:
        raise UsageError(f"{where}: source must be one of {', '.join(SOURCES)}, not {source!r}")
    kind = SOURCES[source]
    if kind.has_file == fileless:
        raise UsageError(f"{where}: source = \"synthetic\" (no file) goes with a backend that reads no model file "
                         f"(backend = \"fake\"), and only with one")
    missing = [k for k in kind.required if k not in t or (k != "revision" and not t[k])]
    if missing:
        raise UsageError(f"{where}: missing {', '.join(missing)} (required for source = \"{source}\")")
    files = _files(t, where, kind)
    n = len(files)
    revisions = _revisions(t, where, n) if kind.pins_revision else ()
    sha = tuple(s.lower() for s in _per_file(t, "sha256", str, where, n))
    bad = [s for s in sha if not _SHA_RE.match(s)]
    if bad:
        raise UsageError(f"{where}: sha256 {bad[0]!r} is not 64 hexadecimal digits")
    if t.get("from_sha256") and not _SHA_RE.match(t["from_sha256"]):  # quantize: the file the rung was made from
        raise UsageError(f"{where}: from_sha256 {t['from_sha256']!r} is not 64 hexadecimal digits")
    sizes = _per_file(t, "size", int, where, n)
    if any(isinstance(s, bool) or s <= 0 for s in sizes):
        raise UsageError(f"{where}: size must be a positive number of bytes")
    if "size_approx" in t and parse_size(t["size_approx"]) is None:
        raise UsageError(f"{where}: size_approx {t['size_approx']!r} is not a size like \"4.37 GB\"")
    for key in ("gated", "base_gated"):
        if t.get(key) is not None and not isinstance(t[key], bool):
            raise UsageError(f"{where}: {key} must be true or false (omit it when unknown)")
    n_ctx = t.get("n_ctx")
    if n_ctx is not None and (isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx <= 0):
        raise UsageError(f"{where}: n_ctx must be a positive integer")
    strs = kind.entry_fields({k: t.get(k, "") for k in _STR_KEYS if k not in ("source", "file")}, files, where,
                             origin)
    return ModelSpec(name=alias, source=source, files=files, revisions=revisions, sha256=sha,
                     sizes=tuple(sizes), gated=t.get("gated"), base_gated=t.get("base_gated"), n_ctx=n_ctx,
                     origin=str(origin), **strs)


def _files(t: dict[str, Any], where: str, kind: Source) -> tuple[str, ...]:
    if "file" in t and "files" in t:
        raise UsageError(f"{where}: give either 'file' or 'files', not both")
    if "files" in t:
        files = t["files"]
        if not isinstance(files, list) or not files or not all(isinstance(f, str) and f for f in files):
            raise UsageError(f"{where}: 'files' must be a non-empty list of file names")
        if len(set(files)) != len(files):
            raise UsageError(f"{where}: 'files' lists a file twice")
        return tuple(files)
    if t.get("file"):
        return (t["file"],)
    files = kind.default_files(t)
    if files is not None:
        return files
    raise UsageError(f"{where}: missing file (or files = [...] for a split model)")


def _revisions(t: dict[str, Any], where: str, n: int) -> tuple[str, ...]:
    value = t["revision"]
    revs = value if isinstance(value, list) else [value] * n
    if not all(isinstance(r, str) for r in revs):
        raise UsageError(f"{where}: revision must be a string (a commit, a branch, or \"\" for main) or a list of them")
    if len(revs) != n:
        raise UsageError(f"{where}: revision lists {len(revs)} commits for {n} files")
    for rev in revs:
        if _SHORT_HEX_RE.match(rev) and not _COMMIT_RE.match(rev):
            raise UsageError(f"{where}: revision {rev!r} looks like a short commit; give the full 40-character commit")
    return tuple(revs)


def _per_file(t: dict[str, Any], key: str, kind: type, where: str, n: int) -> list[Any]:
    """A scalar (single file) or a list with one value per file; [] when absent."""
    if key not in t:
        return []
    value = t[key]
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, kind) for v in values):
        what = "a number of bytes" if kind is int else "a string"
        raise UsageError(f"{where}: {key} must be {what} or a list of them (one per file)")
    if len(values) != n:
        raise UsageError(f"{where}: {key} has {len(values)} value(s) for {n} file(s); give one per file, in order")
    return values


def find(name: str, registry: dict[str, ModelSpec]) -> ModelSpec | None:
    """The spec of alias ``name`` (case-insensitive); None when the registry has none."""
    if name in registry:
        return registry[name]
    folded = {alias.lower(): alias for alias in registry}
    return registry[folded[name.lower()]] if name.lower() in folded else None


def lookup(name: str, registry: dict[str, ModelSpec]) -> ModelSpec:
    """The spec of alias ``name`` (case-insensitive: :func:`find`), or :class:`UnknownModelError`
    with close matches and the hint that a .gguf path works too."""
    spec = find(name, registry)
    if spec is None:
        raise unknown_model(name, registry)
    return spec


def unknown_model(name: str, registry: dict[str, ModelSpec]) -> UnknownModelError:
    """The error of a ``name`` that is no alias of ``registry``: its close matches (or the aliases whose PyPI
    package it names) and the hint that a .gguf path works too."""
    shipped = [alias for alias, spec in registry.items() if spec.package and spec.package.lower() == name.lower()]
    hint = (f" {name} is the PyPI package of {', '.join(shipped)}: run it by that alias." if shipped
            else did_you_mean(name, registry))
    return UnknownModelError(
        f"unknown model '{name}'.{hint} Run 'abricot-local models' for the list of aliases, "
        "or give the path to a .gguf file."
    )
