"""One model file from the Hugging Face hub into the standard Hugging Face cache, continued where a stopped pull
left it (huggingface_hub 2.4 downloads into a temporary file unique to its process and deletes it when stopped,
so the next process started the file over).

The file's facts come from huggingface_hub's own HEAD (``get_hf_file_metadata``: ETag, commit, size, the location
its bytes are served from, a CDN's signed URL after a redirect). The body goes, with :func:`resume.stream`, into
the partial file :func:`temps.hold_partial` keeps beside its blob (``blobs/.<etag>.<16 hex of the etag>.incomplete``:
a pull of any commit holding the same bytes continues it; a second abricot-local pull waits for the first;
huggingface_hub's ``scan_cache_dir`` counts it as an incomplete download, ``hf cache prune`` removes it, as its
own; a CDN's signed location that expires during a pull is asked of the hub again once). Checked for its size
and its SHA-256 (the ETag of an LFS or Xet file is its SHA-256; the registry's pin), it
becomes ``blobs/<etag>``, with ``snapshots/<commit>/<file>`` a relative link to it and ``refs/<revision>``, all
made by huggingface_hub's own helpers under its own lock for that blob (``.locks/<repo folder>/<etag>.lock``): a
huggingface_hub download of the same file at the same time waits for the blob, then finds it;
``hf_hub_download(local_files_only=True)`` and other tools find the file as one huggingface_hub downloaded.

hf_hub_download stays the way where this cannot work, each said where it is decided: offline (the caller),
a huggingface_hub without the helpers (an older release), and a Xet file whose bytes no HTTP location serves.
"""

from __future__ import annotations

import errno
import http.client
import os
import re
import time
import urllib.error
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from abricot_local.cache import publish, shown
from abricot_local.errors import DownloadError, IntegrityError, ModelError
from abricot_local.hashing import memo_store

from . import resume
from .hub_errors import hub_error
from .temps import (
    PART,
    hold_partial,
    partial_pattern,
    remove_stale,
    temp_beside,
    temp_pattern,
)

RETRIES = 5  # cut connections in a row with no new byte that one pull continues (huggingface_hub's http_get: 5)
RETRY_WAIT = 1.0  # seconds before each
_TRANSIENT = {408, 429, 500, 502, 503, 504}  # HTTP answers another try may not get
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[0-9A-Za-z_-][0-9A-Za-z_.-]*")
INCOMPLETE = ".incomplete"  # the ending huggingface_hub gives its own partial blobs


@dataclass(frozen=True)
class _Body:
    """What one pull fetches: ``location`` (with ``auth`` headers for it alone) into ``blob``."""

    repo: str
    what: str  # repo/file @ commit, as messages say it
    label: str  # the progress bar's
    location: str
    auth: dict
    blob: Path
    size: int | None
    sha256: str | None


class _HTTPStatus(Exception):
    """An HTTP error answer to the body's request, shaped as hub_errors reads huggingface_hub's."""

    def __init__(self, code: int, reason: str):
        super().__init__(f"HTTP {code} {reason}")
        self.code, self.response = code, SimpleNamespace(status_code=code)


def pull(api, repo: str, filename: str, revision: str | None, *, sha256: str | None = None,
         size: int | None = None, progress: bool = True, notify: Callable[[str], None] | None = None) -> Path:
    """``filename`` of model repository ``repo`` at ``revision`` (None: the default branch) in the HF cache, its
    snapshot path; ``api`` is the huggingface_hub module (hub.hub_module()). Online only. A stopped pull's bytes are
    continued; ``sha256`` and ``size`` (the registry's pins) are checked before the blob is placed. ``notify``: told
    when another process pulls the same blob now and this one waits for it."""
    try:
        from huggingface_hub import constants, errors
        from huggingface_hub.file_download import (
            _cache_commit_hash_for_specific_revision,
            _create_symlink,
            repo_folder_name,
        )
        from huggingface_hub.utils import WeakFileLock
    except ImportError:  # a huggingface_hub without the helpers that lay the cache out as it does: its own download
        return hf_download(api, repo, filename, revision)
    parts = filename.split("/")
    if any(p in ("", ".", "..") for p in parts) or "\\" in filename:
        raise ModelError(f"'{filename}' is not a file name inside {repo}; fix 'file' in models.toml")
    rev = revision or constants.DEFAULT_REVISION
    storage = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo, repo_type="model")
    if _COMMIT.fullmatch(rev) and (storage / "snapshots" / rev).joinpath(*parts).exists():
        return (storage / "snapshots" / rev).joinpath(*parts)  # huggingface_hub's shortcut: no request
    url = api.hf_hub_url(repo, filename, revision=rev)
    try:
        meta = api.get_hf_file_metadata(url)
    except Exception as exc:
        said = hub_error(exc, repo, filename, revision, dataset=False)
        if isinstance(exc, (errors.RevisionNotFoundError, errors.EntryNotFoundError)):
            raise said from None
        return _cached_or(api, repo, filename, revision, said)  # as hf_hub_download falls back
    if not meta.commit_hash or not _NAME.fullmatch(meta.etag or ""):  # an ETag names the blob: no path in it
        header = "X-Repo-Commit" if not meta.commit_hash else "ETag"
        return _cached_or(api, repo, filename, revision, DownloadError(
            f"{url} was answered without a usable {header} header (the Hugging Face hub sends one), so {filename} "
            "cannot be placed in the Hugging Face cache; check HF_ENDPOINT and the proxy or firewall, and retry"))
    location = meta.location or url
    if meta.xet_file_data is not None and location == url:
        # A Xet file the hub did not redirect to an HTTP location (its bridge serves a redirected one's bytes,
        # ranges included): its bytes come through the Xet protocol, which only huggingface_hub speaks (hf_xet);
        # that download starts over when stopped.
        return hf_download(api, repo, filename, revision)
    limit = getattr(constants, "MAX_HTTP_DOWNLOAD_SIZE", None)
    if limit and meta.size and meta.size > limit:  # huggingface_hub serves these through Xet only
        return hf_download(api, repo, filename, revision)
    what = f"{repo}/{filename} @ {meta.commit_hash[:12]}"
    etag_sha = meta.etag.lower() if _SHA256.fullmatch(meta.etag.lower()) else None
    for pinned, served, name in ((sha256 and sha256.lower(), etag_sha, "SHA-256"), (size, meta.size, "size")):
        if pinned and served and pinned != served:
            raise IntegrityError(
                f"{what}: the hub serves a file of {name} {served}, not the {pinned} models.toml pins; nothing "
                "was downloaded. If the repository was re-uploaded, pin another revision (and its sha256) in "
                "your own models.toml")
    pointer = (storage / "snapshots" / meta.commit_hash).joinpath(*parts)
    if pointer.exists():
        try:
            _cache_commit_hash_for_specific_revision(str(storage), rev, meta.commit_hash)
        except OSError:
            pass  # a read-only cache: the file is there (huggingface_hub's rule)
        return pointer
    body = _Body(repo, what, parts[-1], location, _auth(url, location), storage / "blobs" / meta.etag,
                 meta.size or size, etag_sha or (sha256 and sha256.lower()))
    lock = Path(constants.HF_HUB_CACHE) / ".locks" / storage.name / f"{meta.etag}.lock"
    try:
        for folder in (body.blob.parent, pointer.parent, lock.parent):
            folder.mkdir(parents=True, exist_ok=True)
        _cache_commit_hash_for_specific_revision(str(storage), rev, meta.commit_hash)
    except OSError as exc:
        raise DownloadError(f"cannot write the Hugging Face cache {shown(storage)} ({exc.strerror or exc}); "
                            "make it writable, or set HF_HUB_CACHE to a writable folder") from None

    def place(new_blob: bool) -> None:
        # new_blob=False for a blob already there (another download's, another revision's with the same ETag), as
        # huggingface_hub says it: where links cannot be made, that blob is copied, not moved from its snapshot.
        if not pointer.exists():
            _create_symlink(str(body.blob), str(pointer), new_blob=new_blob)

    def renew() -> str | None:
        """A fresh location for the same bytes (a CDN's signed URL expires), None when the hub gives none."""
        try:
            fresh = api.get_hf_file_metadata(url)
        except Exception:  # noqa: BLE001 - any failure to re-ask: the pull stops with the run-again advice
            return None
        same = fresh.etag == meta.etag and fresh.location and fresh.location != url
        return fresh.location if same else None

    digest = _fetch(body, lambda: WeakFileLock(str(lock)), place, progress, renew, notify)
    if digest:
        memo_store(body.blob, digest)
    return pointer


def hf_download(api, repo: str, filename: str, revision: str | None, *, local: bool = False) -> Path:
    """huggingface_hub's own download (``local``: only the cache), its errors as :class:`DownloadError`."""
    try:
        return Path(api.hf_hub_download(repo_id=repo, filename=filename, revision=revision, local_files_only=local))
    except Exception as exc:
        raise hub_error(exc, repo, filename, revision, dataset=False) from None


def _cached_or(api, repo: str, filename: str, revision: str | None, error: BaseException) -> Path:
    """The file from the cache when the hub's facts cannot be had, else ``error``."""
    try:
        return Path(api.hf_hub_download(repo_id=repo, filename=filename, revision=revision, local_files_only=True))
    except Exception:
        raise error from None


def _auth(url: str, location: str) -> dict:
    """The token's header (huggingface_hub's header builder: HF_TOKEN, the stored token) for ``location`` when it
    is on the hub's own host; a CDN's signed URL gets none, as huggingface_hub sends none."""
    from huggingface_hub.utils import build_hf_headers

    if _origin(url) != _origin(location):
        return {}
    token = {k.lower(): v for k, v in build_hf_headers().items()}.get("authorization")
    return {"authorization": token} if token else {}


def _fetch(body: _Body, locked: Callable, place: Callable[[bool], None], progress: bool,
           renew: Callable[[], str | None] | None = None, notify: Callable[[str], None] | None = None) -> str | None:
    """The blob made from ``body.location`` through its partial file, then ``place(new_blob)``d, under
    huggingface_hub's lock for it (``locked()``); its SHA-256, None when another download made the blob first
    (``new_blob`` False then). ``renew()``: a fresh location once a CDN's signed one is refused (:func:`_stream`).
    The partial goes once published, when its SHA-256 or size is not the expected one, and after a failure that left
    under resume.KEEP_FROM bytes; it stays after any other failure, Ctrl-C or a kill, and the next pull continues it."""
    blob = body.blob
    remove_stale(blob.parent, temp_pattern(blob.name, PART))  # a killed pull's unresumable temporary file
    mine = resume.key(blob.name)
    remove_stale(blob.parent, partial_pattern(blob.name, but=mine, suffix=INCOMPLETE))
    try:
        held = hold_partial(blob, mine, resume.waiting(notify), INCOMPLETE)
        fd, tmp, _ = held or (*temp_beside(blob, PART), False)  # a partial not safely ours: not resumed
    except OSError as exc:
        raise DownloadError(f"cannot write {shown(blob.parent)} ({exc.strerror}); make the Hugging Face cache "
                            "writable, or set HF_HUB_CACHE to a writable folder") from None
    digest, published, new = None, False, False
    try:
        with locked():
            if blob.exists():  # a download this waited for made it, or another revision's with the same ETag
                tmp.unlink()
            else:
                digest = _stream(body, fd, progress, renew)
                got = os.fstat(fd).st_size
                if body.size is not None and got != body.size:
                    raise resume.Failed(f"{body.what}: {got:,} bytes arrived where {body.size:,} were announced",
                                        integrity=True)
                if body.sha256 and digest != body.sha256:
                    raise resume.Failed(f"{body.what}: sha256 mismatch, expected {body.sha256}, got {digest}",
                                        integrity=True)
                publish(tmp, blob)
                new = True
            published = True
            place(new)
    except BaseException as exc:
        integrity = isinstance(exc, resume.Failed) and exc.integrity
        note = "" if published else resume.settled(tmp, fd, held is not None and not integrity, "pull")
        if isinstance(exc, (resume.Failed, _HTTPStatus, OSError, http.client.HTTPException)):
            raise _error(exc, body, note) from None
        raise  # Ctrl-C: its partial file settled as a failure's
    finally:
        os.close(fd)
    return digest


def _stream(body: _Body, fd: int, progress: bool, renew: Callable[[], str | None] | None = None) -> str:
    """resume.stream, again from where it stopped after a cut connection or a busy server: RETRIES times in a row
    with no new byte, as huggingface_hub's http_get does (it keeps no bytes between processes). A CDN refusing its
    signed location (401/403: it expired during a long pull) is continued once from a fresh one, ``renew()``'s."""
    idle, location = 0, body.location
    while True:
        had = os.fstat(fd).st_size
        try:
            return resume.stream(location, fd, progress, body.label, body.auth)
        except urllib.error.HTTPError as exc:
            exc.close()
            failure: Exception = _HTTPStatus(exc.code, exc.reason)
            if exc.code in (401, 403) and renew and _signed(body.location):
                fresh, renew = renew(), None  # once a pull
                if fresh and fresh != location:
                    location = fresh
                    continue
            if exc.code not in _TRANSIENT:
                raise failure from None
        except resume.Failed as exc:
            failure = resume.Failed(exc.cause.replace(location, body.location), exc.network, exc.integrity)
            if exc.integrity:
                raise failure from None
        except (OSError, http.client.HTTPException) as exc:
            if getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES):
                raise
            failure = exc
        idle = 0 if os.fstat(fd).st_size > had else idle + 1
        if idle > RETRIES:
            raise failure
        time.sleep(RETRY_WAIT)


def _error(exc: BaseException, body: _Body, note: str) -> Exception:
    """A failed pull said in one line a user can act on (hub_errors for a refused HTTP status)."""
    host = urllib.parse.urlsplit(body.location).netloc or body.location
    if isinstance(exc, resume.Failed):
        cause = exc.cause.replace(body.location, body.what)  # not a CDN's signed URL
        if exc.integrity:
            return IntegrityError(f"{cause}; the downloaded file was discarded. Retry; if the repository was "
                                  "re-uploaded, pin another revision and sha256 in your own models.toml")
        return DownloadError(f"could not download {cause}{note}; check the network and retry")
    if isinstance(exc, _HTTPStatus):
        if exc.code in (401, 403) and _signed(body.location):  # not the hub's answer: its CDN's, to a signed link
            return DownloadError(
                f"the signed download link the hub gave for {body.what} has expired or was refused ({host}: {exc})"
                f"{note}; run the same command again: it asks the hub for a fresh link (if this repeats, check the "
                "proxy or firewall)")
        said = hub_error(exc, body.repo, None, None, dataset=False)
        if isinstance(said, DownloadError):  # the hub's own host refused: its sentences, then the note's
            return DownloadError(f"{said} {note[2:3].upper()}{note[3:]}." if note else str(said))
        return DownloadError(f"{host} refused the download of {body.what} ({exc}){note}; retry later")
    if getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        return DownloadError(f"the disk is full while downloading {body.what}{note}; free some space and retry")
    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        return DownloadError(f"cannot write {exc.filename} ({exc.strerror}){note}; make the Hugging Face cache "
                             "writable and retry")
    reason = getattr(exc, "reason", None) or exc
    return DownloadError(f"could not download {body.what} from {host} ({type(reason).__name__}: {reason}){note}; "
                         "check the network or proxy and retry")


def _signed(location: str) -> bool:
    """``location`` is not on the hub's host (HF_ENDPOINT's): a CDN's signed URL the hub redirected to."""
    from huggingface_hub import constants

    return _origin(location) != _origin(constants.ENDPOINT)


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.netloc
