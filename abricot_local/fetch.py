"""Data files from URLs (the tasks' releases), and the names tasks use from the modules
that fetch things: :mod:`cache` (where files go, offline), :mod:`hashing` (SHA-256),
:mod:`hub` (the Hugging Face hub). Every expected failure is an :class:`AbricotError`.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from .cache import cache_dir, is_offline, publish
from .errors import DownloadError, IntegrityError
from .hashing import memo_store, sha256_file
from .hub import hub_dataset_download, hub_dataset_files

__all__ = ["cache_dir", "is_offline", "sha256_file", "download_url", "hub_dataset_files", "hub_dataset_download",
           "DownloadError"]


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
        publish(tmp, dest)
    except urllib.error.HTTPError as exc:
        raise DownloadError(f"could not download {url}: HTTP {exc.code} {exc.reason}; {by_hand}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DownloadError(f"could not download {url} ({reason}); {by_hand}") from None
    finally:
        tmp.unlink(missing_ok=True)
    memo_store(dest, digest)
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
