"""The body of a download (:func:`fetch.download_url`, :func:`hub_pull.pull`), continued where an earlier one stopped.

The file the bytes go into is a partial file the caller holds (:func:`temps.hold_partial`, named for the URL, so
the next download of that URL into that file finds it). A partial of N bytes asks only for the rest, with
``Range: bytes=N-``: a 206 whose Content-Range starts at N continues it (the progress bar starts at N); a 200 (a
server that ignores ranges, a ``file:`` URL) restarts it from byte 0 with that body; a 416 or a 206 for other
bytes restarts it with a plain request, except a 416 saying ``bytes */N``: the partial was already whole (its last
byte arrived before it was stopped). The SHA-256 returned is of the whole file (its first N bytes read back).
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from abricot_local.cache import shown

BLOCK = 1024 * 1024
_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


class Failed(Exception):
    """Why one URL could not be fetched, in a few words; ``network``: the host cannot be reached; ``integrity``:
    the bytes are not the file's (never kept)."""

    def __init__(self, cause: str, network: bool = False, integrity: bool = False):
        super().__init__(cause)
        self.cause, self.network, self.integrity = cause, network, integrity


KEEP_FROM = 1024 * 1024  # a download stopped with fewer bytes than this discards them: starting over costs less


def settled(tmp: Path, fd: int, keep: bool, what: str) -> str:
    """After a failed download (``what``: "download", "pull"): its partial file ``tmp`` (open as ``fd``) kept
    (``keep`` and at least KEEP_FROM bytes) or removed; what became of it, said after the failure's cause ("" when
    nothing had arrived). The caller removes what else it made when ``tmp`` is gone."""
    try:
        size = os.fstat(fd).st_size
    except OSError:
        size = 0
    if keep and size >= KEEP_FROM:
        return f"; the {size:,} bytes received are kept in {shown(tmp)}, where the next {what} continues"
    tmp.unlink(missing_ok=True)
    return "; the partial file was discarded" if size else ""


def waiting(notify: Callable[[str], None] | None) -> Callable[[Path], None] | None:
    """What tells ``notify`` (the caller's: a run's hooks, the CLI's line; None: nothing is said) that another
    process holds the partial file of the same file (temps.hold_partial's ``on_wait``: it waits for it). The
    library prints nothing itself."""
    if notify is None:
        return None
    return lambda path: notify(f"another process is downloading this file now ({shown(path)}); waiting for it")


def key(url: str) -> str:
    """The 16 hex digits that name ``url``'s partial file (temps.hold_partial)."""
    return hashlib.sha256(url.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def stream(url: str, fd: int, progress: bool, label: str, private: dict[str, str] | None = None) -> str:
    """Complete the open file ``fd`` (its bytes so far kept where the server continues them, else replaced) with
    ``url``'s body, returning the SHA-256 of the whole file; a body shorter or longer than announced (the connection
    cut) is :class:`Failed`. ``fd`` stays open. ``private`` headers (a token) go to ``url`` alone, never to a host
    it redirects to."""
    have = os.fstat(fd).st_size
    before = _prefix(fd, have) if have else None  # hashed before asking: not while a response waits
    resp = None
    if have:
        try:
            resp = _get(url, have, private)
        except urllib.error.HTTPError as exc:
            if exc.code != 416:
                raise
            whole = re.fullmatch(r"bytes\s+\*/(\d+)", (exc.headers.get("Content-Range") or "").strip())
            exc.close()
            if whole and int(whole[1]) == have:
                return before.hexdigest()
        if resp is not None and _continues(resp, have) is None:
            resp.close()
            resp = None
    if resp is None:
        resp, have = _get(url, 0, private), 0
    with resp:
        start, total, said = _continues(resp, have) or (0, None, "")
        digest = before if start else hashlib.sha256()
        os.ftruncate(fd, start)
        os.lseek(fd, start, os.SEEK_SET)
        got = _copy(resp, fd, digest, start, total, progress, label)
    if total is not None and start + got > total:
        raise Failed(f"{url}: the body ran past the {total:,} bytes its {said} announces", integrity=True)
    if total is not None and start + got < total:
        raise Failed(f"{url}: the download ended after {start + got:,} bytes of the {total:,} its {said} "
                     "announces (the connection was cut)")
    return digest.hexdigest()


def _get(url: str, start: int, private: dict[str, str] | None):
    """:func:`_open`, called with its first two arguments alone when nothing is private (as before the headers)."""
    return _open(url, start, private) if private else _open(url, start)


def _open(url: str, start: int, private: dict[str, str] | None = None):
    headers = {"User-Agent": "abricot-local"}
    if start:
        headers["Range"] = f"bytes={start}-"
    req = urllib.request.Request(url, headers=headers)
    for name, value in (private or {}).items():
        req.add_unredirected_header(name.capitalize(), value)  # urllib drops these on a redirect
    return urllib.request.urlopen(req, timeout=60)


def _length(resp) -> int | None:
    value = resp.headers.get("Content-Length")
    return int(value) if value and value.strip().isdigit() else None


def _continues(resp, have: int) -> tuple[int, int | None, str] | None:
    """Where ``resp``'s body goes: ``(start, the file's whole length if known, the header that says it)``: a 206
    continuing ``have`` bytes starts there, any other success at 0; None for a 206 of other bytes."""
    if getattr(resp, "status", None) != 206:
        return 0, _length(resp), "Content-Length"
    m = _RANGE.fullmatch((resp.headers.get("Content-Range") or "").strip())
    if not m or int(m[1]) != have or int(m[2]) < have:
        return None
    first, last, length = int(m[1]), int(m[2]), _length(resp)
    if (m[3] != "*" and last != int(m[3]) - 1) or (length is not None and length != last - first + 1):
        return None  # not the rest of the file, or a body of another length than its range
    return have, last + 1, "Content-Range"


def _prefix(fd: int, n: int):
    """A SHA-256 fed the first ``n`` bytes of ``fd``."""
    digest, at = hashlib.sha256(), 0
    while at < n:
        block = os.pread(fd, min(BLOCK, n - at), at)
        if not block:
            raise OSError(f"the partial file ended at {at:,} of its {n:,} bytes")
        digest.update(block)
        at += len(block)
    return digest


def _copy(resp, fd: int, digest, start: int, total: int | None, progress: bool, label: str) -> int:
    """Append ``resp``'s body to ``fd`` (at ``start``), feeding ``digest``; the bytes copied."""
    from tqdm.auto import tqdm

    got = 0
    with tqdm(total=total, initial=start, unit="B", unit_scale=True, desc=label, disable=not progress) as bar:
        for block in iter(lambda: resp.read(BLOCK), b""):
            view = memoryview(block)
            while view:
                view = view[os.write(fd, view):]
            digest.update(block)
            got += len(block)
            bar.update(len(block))
    return got
