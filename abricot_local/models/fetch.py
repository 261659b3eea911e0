"""Data files from URLs (the tasks' releases; one stopped midway is continued: models/resume.py), and the names
tasks use from the modules that fetch things: :mod:`cache` (where files go, offline), :mod:`hashing` (SHA-256),
:mod:`hub` (the Hugging Face hub). Every expected failure is an :class:`AbricotError`.
"""

from __future__ import annotations

import errno
import http.client
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from abricot_local.cache import cache_dir, is_offline, publish, shown
from abricot_local.errors import DownloadError, FilesNotDownloaded, IntegrityError
from abricot_local.hashing import memo_store, sha256_file
from . import resume
from .hub import hub_dataset_download, hub_dataset_files
from .resume import Failed as _Failed
from .temps import PART, hold_partial, partial_pattern, remove_stale, temp_beside, temp_pattern

__all__ = ["cache_dir", "is_offline", "sha256_file", "download_url", "download_files", "hub_dataset_files",
           "hub_dataset_download", "DownloadError", "FilesNotDownloaded"]


_SAID = (urllib.error.URLError, OSError, ValueError, http.client.HTTPException)  # failures said in a few words


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


def download_url(url: str, dest: Path, *, sha256: str | None = None, progress: bool = True,
                 notify: Callable[[str], None] | None = None) -> Path:
    """Download ``url`` to ``dest`` (a partial file beside it, then rename; one an earlier download of ``url``
    left is continued, with an HTTP Range request: :func:`_download`). An existing ``dest`` is kept when it
    matches ``sha256`` (or when no hash is given). ``notify``: told when another process downloads the same file
    now and this one waits for it (nothing is printed)."""
    try:
        return _download(url, Path(dest), sha256, progress, notify)
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
            if _whole(dest, sha):
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


def _download(url: str, dest: Path, sha256: str | None, progress: bool, notify=None) -> Path:
    """``url`` into ``dest`` through its partial file (models/temps.py's hold_partial, models/resume.py): what an
    earlier download of ``url`` into ``dest`` left is continued, when ``sha256`` pins the file (else each download
    starts afresh: nothing would tell a file changed at its URL between two tries). The partial goes once it is published, when its
    whole file's SHA-256 is not the pinned one, when a failure this sees left fewer than resume.KEEP_FROM bytes, and when
    a download of another URL into ``dest`` starts; it stays after any other failure, Ctrl-C, or a kill."""
    if _whole(dest, sha256):
        return dest
    off = offline_cause()
    if off:
        raise _Failed(off, network=True)
    remove_stale(dest.parent, temp_pattern(dest.name, PART))  # a killed download's, from before partial files
    mine = resume.key(url)
    remove_stale(dest.parent, partial_pattern(dest.name, but=mine))  # a partial of this file from another URL
    made = [p for p in (dest.parent, *dest.parent.parents) if not p.exists()]  # the folders this download makes
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        # continued only under a pinned SHA-256, which the whole file is checked against: without one, a file
        # changed at its URL between two tries would be published spliced from both (no validator is kept)
        held = hold_partial(dest, mine, resume.waiting(notify)) if sha256 else None
        fd, tmp, waited = held or (*temp_beside(dest, PART), False)  # unpinned, or a partial not safely ours: afresh
    except OSError as exc:
        _unmake(made)
        raise DownloadError(f"cannot write {dest} ({exc.strerror}); choose a writable folder") from None
    try:  # the partial file held (its lock: fd) until it is published or removed
        if waited and _whole(dest, sha256):  # the download waited for published it
            tmp.unlink()
            return dest
        digest = resume.stream(url, fd, progress, dest.name)
        if sha256 and digest != sha256.lower():
            raise _Failed(f"{url}: sha256 mismatch, expected {sha256.lower()}, got {digest}", integrity=True)
        publish(tmp, dest)
    except BaseException as exc:
        failed = exc if isinstance(exc, _Failed) else _cause(url, exc) if isinstance(exc, _SAID) else None
        integrity = failed is not None and failed.integrity
        note = _settle(tmp, fd, made, keep=held is not None and not integrity)
        if failed is None:
            raise  # Ctrl-C: its partial file settled as a failure's
        raise _Failed(failed.cause + ("" if integrity else note), failed.network, integrity) from None
    finally:
        os.close(fd)
    memo_store(dest, digest)
    return dest


def _whole(dest: Path, sha256: str | None) -> bool:
    return dest.is_file() and (not sha256 or sha256_file(dest) == sha256.lower())


def _settle(tmp: Path, fd: int, made: list[Path], keep: bool) -> str:
    """After a failed download: resume.settled, and the folders it made removed with its partial file."""
    note = resume.settled(tmp, fd, keep, "download")
    if not tmp.exists():
        _unmake(made)
    return note


def _unmake(made: list[Path]) -> None:
    """The folders a failed download made (``made``, deepest first), removed while empty: nothing of it is left."""
    for folder in made:
        try:
            folder.rmdir()
        except OSError:
            return  # not empty (another file of it arrived), or not ours to remove
