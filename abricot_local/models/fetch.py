"""Data files from URLs (the tasks' releases), and the names tasks use from the modules
that fetch things: :mod:`cache` (where files go, offline), :mod:`hashing` (SHA-256),
:mod:`hub` (the Hugging Face hub). Every expected failure is an :class:`AbricotError`.
"""

from __future__ import annotations

import errno
import hashlib
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from abricot_local.cache import cache_dir, is_offline, publish, shown
from abricot_local.errors import DownloadError, FilesNotDownloaded, IntegrityError
from abricot_local.hashing import memo_store, sha256_file
from .hub import hub_dataset_download, hub_dataset_files
from .temps import PART, remove_stale, temp_beside, temp_pattern

__all__ = ["cache_dir", "is_offline", "sha256_file", "download_url", "download_files", "hub_dataset_files",
           "hub_dataset_download", "DownloadError", "FilesNotDownloaded"]


class _Failed(Exception):
    """Why one URL could not be fetched, in a few words; ``network``: the host cannot be reached."""

    def __init__(self, cause: str, network: bool = False, integrity: bool = False):
        super().__init__(cause)
        self.cause, self.network, self.integrity = cause, network, integrity


def offline_cause() -> str | None:
    """"offline: ABRICOT_OFFLINE is set" (or HF_HUB_OFFLINE) when downloads are off, else None."""
    if not is_offline():
        return None
    return f"offline: {next((v for v in ('ABRICOT_OFFLINE', 'HF_HUB_OFFLINE') if os.environ.get(v)), 'ABRICOT_OFFLINE')} is set"


def _cause(url: str, exc: BaseException) -> _Failed:
    """A failed fetch of ``url`` in a few words: an unreachable network is said as one."""
    host = urllib.parse.urlsplit(url).hostname or url
    if isinstance(exc, urllib.error.HTTPError):
        return _Failed(f"{host} answered HTTP {exc.code} {exc.reason}")
    reason = getattr(exc, "reason", None) or exc
    if isinstance(reason, (socket.gaierror, socket.timeout, TimeoutError)) or \
            getattr(reason, "errno", None) in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN):
        why = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
        return _Failed(f"the network is unreachable ({host}: {why})", network=True)
    if isinstance(reason, ConnectionRefusedError):
        return _Failed(f"{host} refused the connection", network=True)
    return _Failed(f"{host}: {getattr(reason, 'strerror', None) or reason}")


def download_url(url: str, dest: Path, *, sha256: str | None = None, progress: bool = True) -> Path:
    """Download ``url`` to ``dest`` (temporary file, then rename). An existing ``dest``
    is kept when it matches ``sha256`` (or when no hash is given)."""
    try:
        return _download(url, Path(dest), sha256, progress)
    except _Failed as failed:
        by_hand = f"download it by hand and save it as {dest}"
        if failed.integrity:
            raise IntegrityError(f"{failed.cause}; the file was discarded. Retry, or {by_hand}") from None
        raise DownloadError(f"could not download {url}: {failed.cause}; {by_hand}") from None


def download_files(files, folder: Path, *, progress: bool = True) -> list[Path]:
    """Download ``files`` (``(url, name, sha256)`` each) into ``folder``, each SHA-256 verified;
    a file already there intact is kept. When some cannot be had, :class:`FilesNotDownloaded`
    names every one still missing with its URL and why (after an unreachable network, the others
    are not tried: they would wait for the same timeout)."""
    got, failed, cause, network = [], [], None, False
    for url, name, sha in files:
        dest = Path(folder) / name
        if network:
            if dest.is_file() and (not sha or sha256_file(dest) == sha.lower()):
                got.append(dest)
            else:
                failed.append((url, name))
            continue
        try:
            got.append(_download(url, dest, sha, progress))
        except _Failed as exc:
            failed.append((url, name))
            cause, network = cause or exc.cause, exc.network
    if failed:
        raise FilesNotDownloaded(cause or "", shown(folder), tuple(u for u, _ in failed),
                                 names=tuple(n for _, n in failed), network=network or is_offline())
    return got


def _download(url: str, dest: Path, sha256: str | None, progress: bool) -> Path:
    if dest.is_file() and (not sha256 or sha256_file(dest) == sha256.lower()):
        return dest
    off = offline_cause()
    if off:
        raise _Failed(off, network=True)
    remove_stale(dest.parent, temp_pattern(dest.name, PART))  # a killed download's (models/temps.py)
    made = [p for p in (dest.parent, *dest.parent.parents) if not p.exists()]  # the folders this download makes
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temp_beside(dest, PART)
    except OSError as exc:
        _unmake(made)
        raise DownloadError(f"cannot write {dest} ({exc.strerror}); choose a writable folder") from None
    try:  # the temporary file held (its lock: fd) until it is published or removed
        digest = _stream(url, os.dup(fd), progress, dest.name)
        if sha256 and digest != sha256.lower():
            raise _Failed(f"{url}: sha256 mismatch, expected {sha256.lower()}, got {digest}", integrity=True)
        publish(tmp, dest)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        tmp.unlink(missing_ok=True)
        _unmake(made)
        raise _cause(url, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        _unmake(made)
        raise
    finally:
        os.close(fd)
    memo_store(dest, digest)
    return dest


def _unmake(made: list[Path]) -> None:
    """The folders a failed download made (``made``, deepest first), removed while empty: nothing of it is left."""
    for folder in made:
        try:
            folder.rmdir()
        except OSError:
            return  # not empty (another file of it arrived), or not ours to remove


def _stream(url: str, fd: int, progress: bool, label: str) -> str:
    """Copy ``url`` into the open file ``fd`` (closed after), returning the SHA-256 of the bytes; a body shorter or
    longer than its Content-Length (the connection cut) is refused."""
    from tqdm.auto import tqdm

    digest = hashlib.sha256()
    got = 0
    request = urllib.request.Request(url, headers={"User-Agent": "abricot-local"})
    with os.fdopen(fd, "wb") as out, urllib.request.urlopen(request, timeout=60) as resp:
        total = resp.headers.get("Content-Length")
        total = int(total) if total and total.strip().isdigit() else None
        with tqdm(total=total, unit="B", unit_scale=True, desc=label, disable=not progress) as bar:
            for block in iter(lambda: resp.read(1024 * 1024), b""):
                out.write(block)
                digest.update(block)
                got += len(block)
                bar.update(len(block))
    if total is not None and got != total:
        raise _Failed(f"{url}: the download ended after {got:,} bytes of the {total:,} its Content-Length "
                      "announces (the connection was cut); the partial file was discarded")
    return digest.hexdigest()
