"""Models and data sets from the Hugging Face hub, through the standard Hugging Face cache
(shared with other tools). A model pull stopped midway is continued by the next one (:mod:`hub_pull`: a
partial file beside its blob; huggingface_hub 2.4 starts a stopped file over); data sets are huggingface_hub's
downloads. With :mod:`fetch` and :mod:`resume` (data URLs), the only modules of abricot-local that do
network I/O."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Iterator

from abricot_local.models import hub_probe
from abricot_local.cache import cache_dir, is_offline
from abricot_local.errors import DownloadError, ModelError, opt
from abricot_local.hashing import verify_file
from . import hub_pull
from .hub_errors import hub_error, is_connection_error
from .spec import ModelSpec


_set_offline = False  # hub_module() turned huggingface_hub's offline mode on, and so turns it off again


def hub_module():
    """The huggingface_hub module, imported on first use (keeps the CLI start fast); offline while
    abricot-local is (:func:`is_offline`). ``local_files_only`` alone is not enough: huggingface_hub
    still builds a user agent, and with it fetches its agent-harness registry
    (``GET {ENDPOINT}/api/agent-harnesses``, 3 s timeout) once per process. It reads
    ``HF_HUB_OFFLINE`` at import into ``constants.HF_HUB_OFFLINE``, which its calls consult each
    time: that constant is set here (not the variable, which :func:`is_offline` and child processes
    would read after), before any call, and reset when abricot-local is online again in the process."""
    global _set_offline
    import huggingface_hub
    from huggingface_hub import constants

    if is_offline():
        if not constants.HF_HUB_OFFLINE:
            constants.HF_HUB_OFFLINE = _set_offline = True
    elif _set_offline:
        constants.HF_HUB_OFFLINE = _set_offline = False
    return huggingface_hub


def cached_paths(spec: ModelSpec) -> list[Path] | None:
    """Paths of all parts in the Hugging Face cache, or None if any is missing."""
    hub = hub_module()
    paths = []
    for i, name in enumerate(spec.files):
        found = hub.try_to_load_from_cache(spec.repo, name, revision=spec.revision_for(i))
        if not isinstance(found, str):
            return None
        paths.append(Path(found))
    return paths


def download_folder(spec: ModelSpec) -> Path:
    """Where a pull of ``spec`` writes: the Hugging Face hub cache (models.sources asks, per source)."""
    try:
        from huggingface_hub import constants

        return Path(constants.HF_HUB_CACHE)
    except ImportError:
        return Path.home() / ".cache" / "huggingface" / "hub"


@contextlib.contextmanager
def progress_bars(enabled: bool) -> Iterator[None]:
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
    from abricot_local.memory import free_disk

    dest = download_folder(spec)
    space = free_disk(dest)[1]
    free = f"{space / 2**30:.1f} GiB free" if space is not None else "free space unknown"
    size = spec.approx_bytes
    files = ", ".join(spec.files) if len(spec.files) <= 2 else f"{spec.files[0]} (+{len(spec.files) - 1} parts)"
    return (f"downloading {spec.repo} @ {(spec.revision or '?')[:12]}: {files}, "
            f"{f'{size / 1e9:.2f} GB' if size else 'size unknown'} -> {dest} ({free})")


def pull_model(spec: ModelSpec, *, progress: bool = True, offline: bool | None = None, notify=None) -> Path:
    """Download every part of ``spec`` into the standard HF cache (a stopped pull is continued: :mod:`hub_pull`),
    check size and sha256 where known, and return the path of the first part. ``notify(line)``
    is told what will be fetched before anything starts, and when another process pulls a part now (waited for)."""
    if not spec.repo:  # sources.Hub's entries name one (models.toml's check); no other source downloads here
        raise ModelError(f"model '{spec.name}' names no Hugging Face repository (source = {spec.source})")
    offline = is_offline() if offline is None else offline
    if not offline:
        hub_probe.require(f"model '{spec.name}' ({spec.repo})")  # one line, not ~24 s of retries
    if notify and not offline:
        notify(download_line(spec))
    paths = []
    with progress_bars(progress):
        for i, name in enumerate(spec.files):
            rev = spec.revision_for(i)
            if offline:  # the cache alone: huggingface_hub's own lookup
                paths.append(hub_pull.hf_download(hub_module(), spec.repo, name, rev, local=True))
            else:
                paths.append(hub_pull.pull(hub_module(), spec.repo, name, rev, sha256=spec.sha256_for(i),
                                           size=spec.size_for(i), progress=progress, notify=notify))
    verify_parts(spec, paths)
    return colocate(spec, paths)


def verify_parts(spec: ModelSpec, paths: list[Path], *, fresh: bool = False) -> None:
    for i, path in enumerate(paths):
        what = f"model '{spec.name}' ({spec.repo}/{spec.files[i]})"
        verify_file(path, sha256=spec.sha256_for(i), size=spec.size_for(i), what=what, fresh=fresh)


def colocate(spec: ModelSpec, paths: list[Path]) -> Path:
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


def hub_dataset_files(repo_id: str, revision: str | None = None, *, local_only: bool = False) -> list[str]:
    """File names of a Hugging Face dataset repository (from the cache when offline or ``local_only``)."""
    if not local_only and not is_offline() and not hub_probe.unreachable():
        try:
            return sorted(hub_module().list_repo_files(repo_id, repo_type="dataset", revision=revision))
        except Exception as exc:
            err = hub_error(exc, repo_id, None, revision, dataset=True)
            if not is_connection_error(exc) or not isinstance(err, DownloadError):
                raise err from None
    files = _cached_dataset_files(repo_id, revision)
    if files is None:
        why = ("offline" if is_offline() else "asked not to download" if local_only else
               f"the hub cannot be reached ({hub_probe.unreachable() or 'the connection failed'})")
        raise DownloadError(f"dataset {repo_id} cannot be listed: {why}, and it is not in the local Hugging Face "
                            "cache. Run once online to cache it.")
    return files


def hub_dataset_download(repo_id: str, filename: str, revision: str | None = None, *,
                         progress: bool = True, local_only: bool = False) -> Path:
    """One file of a dataset repository, via the standard HF cache (only the cache: ``local_only``)."""
    local = local_only or is_offline() or bool(hub_probe.unreachable())  # unreachable: the cached copy, if any
    with progress_bars(progress):
        try:
            return Path(hub_module().hf_hub_download(repo_id=repo_id, filename=filename, revision=revision,
                                               repo_type="dataset", local_files_only=local))
        except Exception as exc:
            if local and not is_offline() and not local_only:
                hub_probe.require(f"{repo_id}/{filename}", f"give the data file with {opt('data', ('TASK', 'FILE'))}")
            raise hub_error(exc, repo_id, filename, revision, dataset=True) from None
