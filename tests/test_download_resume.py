"""Resumable downloads (fetch.download_url, models/resume.py, temps.hold_partial): a download stopped midway keeps
its bytes in a partial file named for its URL, and the next asks for the rest with ``Range: bytes=N-``; a server
that ignores ranges, a 416 or a 206 for other bytes restarts it from zero; a wrong SHA-256 removes it; two
processes never write one partial. A test server on 127.0.0.1 (no internet)."""

from __future__ import annotations

import hashlib
import http.server
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from abricot_local.errors import DownloadError, IntegrityError
from abricot_local.models import fetch, resume
from abricot_local.models.temps import PARTIAL, hold_partial, partial_pattern

BODY = random.Random(7).randbytes(3 * 1024 * 1024 + 123)  # a few MiB: over resume.KEEP_FROM once cut midway
SHA = hashlib.sha256(BODY).hexdigest()
HALF = 1_600_000


class _Serve(http.server.BaseHTTPRequestHandler):
    """Serves ``body``; ``ranges``: answers a Range with a 206 (else a 200 of the whole); ``cuts``: for each next
    request, the bytes after which it closes the connection (its Content-Length announcing all); ``answer``: a
    (status, Content-Range) to send instead, for the next requests; ``stall``: waits after the cut, not closing."""
    protocol_version = "HTTP/1.1"
    body, ranges, seen = BODY, True, []
    cuts: list = []
    answers: list = []
    stall = 0.0

    def do_GET(self):  # noqa: N802
        asked = self.headers.get("Range")
        self.seen.append(asked)
        start = int(re.fullmatch(r"bytes=(\d+)-", asked)[1]) if asked and self.ranges else 0
        if self.answers:
            status, content_range = self.answers.pop(0)
            data = b"" if status == 416 else self.body[start:]
            self.send_response(status)
            self.send_header("Content-Range", content_range)
        elif start:
            if start >= len(self.body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(self.body)}")
                data = b""
            else:
                data = self.body[start:]
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(self.body) - 1}/{len(self.body)}")
        else:
            data = self.body
            self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        cut = self.cuts.pop(0) if self.cuts else None
        self.wfile.write(data if cut is None else data[:cut])
        self.wfile.flush()
        if cut is not None and self.stall:
            time.sleep(self.stall)
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def server(monkeypatch):
    monkeypatch.delenv("ABRICOT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    for name, value in (("seen", []), ("cuts", []), ("answers", []), ("ranges", True), ("body", BODY),
                        ("stall", 0.0)):
        monkeypatch.setattr(_Serve, name, value)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Serve)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/model.gguf"
    httpd.shutdown()
    httpd.server_close()


def partial_of(url, dest):
    return dest.parent / f".{dest.name}.{resume.key(url)}{PARTIAL}"


def test_a_cut_download_continues_from_its_bytes_with_a_range_request(tmp_path, server, monkeypatch):
    dest = tmp_path / "models" / "m.gguf"
    _Serve.cuts = [HALF]
    with pytest.raises(DownloadError, match=f"the {HALF:,} bytes received are kept in .*continues") as err:
        fetch.download_url(server, dest, sha256=SHA, progress=False)
    assert "ended after 1,600,000 bytes of the 3,145,851" in str(err.value)
    part = partial_of(server, dest)
    assert [p.name for p in dest.parent.iterdir()] == [part.name] and part.read_bytes() == BODY[:HALF]
    assert partial_pattern("m.gguf").fullmatch(part.name) and part.name in str(err.value)

    bars = []
    import tqdm.auto

    class Bar(tqdm.auto.tqdm):
        def __init__(self, *a, **k):
            bars.append((k["initial"], k["total"]))
            super().__init__(*a, **{**k, "disable": True})

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    assert fetch.download_url(server, dest, sha256=SHA, progress=True) == dest
    assert _Serve.seen == [None, f"bytes={HALF}-"] and bars == [(HALF, len(BODY))]  # the bar starts at N
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == SHA and list(dest.parent.iterdir()) == [dest]
    assert fetch.sha256_file(dest) == SHA  # the memo stored holds the whole file's hash


def test_a_download_cut_twice_continues_twice(tmp_path, server):
    dest = tmp_path / "d" / "m.gguf"
    dest.parent.mkdir()
    _Serve.cuts = [HALF, 1_000_000]
    for _ in range(2):
        with pytest.raises(DownloadError, match="kept in"):
            fetch.download_url(server, dest, sha256=SHA, progress=False)
    assert fetch.download_url(server, dest, sha256=SHA, progress=False).read_bytes() == BODY
    assert _Serve.seen == [None, f"bytes={HALF}-", f"bytes={HALF + 1_000_000}-"]


def test_without_a_pinned_hash_a_changed_file_is_never_spliced(tmp_path, server):
    """Nothing tells a file changed at its URL between two tries when no SHA-256 pins it: such a download starts
    afresh each time, so what is published is one version of the file, never the head of one and the tail of
    another."""
    dest = tmp_path / "d" / "m.gguf"
    dest.parent.mkdir()
    _Serve.cuts = [HALF]
    with pytest.raises(DownloadError) as err:
        fetch.download_url(server, dest, progress=False)
    assert "kept in" not in str(err.value) and list(dest.parent.iterdir()) == []
    _Serve.body = bytes(reversed(BODY))  # the file at the URL changed meanwhile
    assert fetch.download_url(server, dest, progress=False).read_bytes() == bytes(reversed(BODY))
    assert _Serve.seen == [None, None]  # no range asked


def test_a_server_that_ignores_ranges_restarts_from_zero(tmp_path, server):
    dest = tmp_path / "d" / "m.gguf"
    dest.parent.mkdir()
    partial_of(server, dest).write_bytes(b"stale bytes of another file" * 50_000)
    _Serve.ranges = False
    assert fetch.download_url(server, dest, sha256=SHA, progress=False).read_bytes() == BODY
    assert _Serve.seen == [f"bytes={27 * 50_000}-"] and list(dest.parent.iterdir()) == [dest]  # the 200: from byte 0


def test_a_wrong_sha256_removes_the_partial_and_the_next_download_starts_clean(tmp_path, server):
    dest = tmp_path / "d" / "m.gguf"
    dest.parent.mkdir()
    part = partial_of(server, dest)
    part.write_bytes(b"\0" * HALF)  # not the file's first bytes: the server's 206 continues them all the same
    with pytest.raises(IntegrityError, match=f"expected {SHA}.*the file was discarded"):
        fetch.download_url(server, dest, sha256=SHA, progress=False)
    assert _Serve.seen == [f"bytes={HALF}-"] and not part.exists() and not dest.exists()
    assert fetch.download_url(server, dest, sha256=SHA, progress=False).read_bytes() == BODY
    assert _Serve.seen == [f"bytes={HALF}-", None]


@pytest.mark.parametrize("status, content_range", [(416, "bytes */99"), (206, "bytes 5-{last}/{size}"),
                                                   (206, "bytes {n}-{last}/{bigger}"), (206, "garbage")])
def test_a_416_or_a_206_for_other_bytes_restarts_from_zero(tmp_path, server, status, content_range):
    dest = tmp_path / "d" / "m.gguf"
    dest.parent.mkdir()
    partial_of(server, dest).write_bytes(BODY[:HALF])
    _Serve.answers = [(status, content_range.format(n=HALF, last=len(BODY) - 1, size=len(BODY),
                                                    bigger=len(BODY) + 1))]
    assert fetch.download_url(server, dest, sha256=SHA, progress=False).read_bytes() == BODY
    assert _Serve.seen == [f"bytes={HALF}-", None] and list(dest.parent.iterdir()) == [dest]


def test_a_partial_already_whole_is_published_after_the_416_that_says_so(tmp_path, server):
    dest = tmp_path / "d" / "m.gguf"
    dest.parent.mkdir()
    partial_of(server, dest).write_bytes(BODY)  # killed after its last byte, before its rename
    assert fetch.download_url(server, dest, sha256=SHA, progress=False).read_bytes() == BODY
    assert _Serve.seen == [f"bytes={len(BODY)}-"] and list(dest.parent.iterdir()) == [dest]


def test_ctrl_c_keeps_the_partial_and_a_small_cut_discards_it(tmp_path, server, monkeypatch):
    dest = tmp_path / "d" / "m.gguf"
    dest.parent.mkdir()
    real = resume._open

    def interrupted(url, start):
        resp, read = real(url, start), []

        def once(n):
            if read:
                raise KeyboardInterrupt
            read.append(n)
            return resp.fp.read(HALF)
        resp.read = once
        return resp

    monkeypatch.setattr(resume, "_open", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fetch.download_url(server, dest, sha256=SHA, progress=False)
    assert partial_of(server, dest).read_bytes() == BODY[:HALF]
    monkeypatch.setattr(resume, "_open", real)
    small = tmp_path / "small" / "s.tsv"
    _Serve.cuts = [1000]
    with pytest.raises(DownloadError, match="ended after 1,000 bytes.*the partial file was discarded"):
        fetch.download_url(server, small, progress=False)
    assert not small.parent.exists()  # under resume.KEEP_FROM: nothing left, not even its folder


def test_a_partial_is_held_two_processes_never_write_one(tmp_path, server, capsys):
    dest = tmp_path / "d" / "m.gguf"
    dest.parent.mkdir()
    fd, part, waited = hold_partial(dest, resume.key(server))  # another download of it, now (flock's locks are
    # per open file, so a second open in this process meets it as another process's would)
    assert not waited and part == partial_of(server, dest)
    done, said = [], []
    worker = threading.Thread(target=lambda: done.append(fetch.download_url(server, dest, sha256=SHA, progress=False,
                                                                             notify=said.append)))
    worker.start()
    try:
        time.sleep(0.15)
        assert worker.is_alive() and _Serve.seen == []  # it waits: nothing asked, nothing written
        os.write(fd, BODY[:HALF])  # what the other got before it stopped
    finally:
        os.close(fd)
    worker.join(5)
    assert done == [dest] and dest.read_bytes() == BODY and _Serve.seen == [f"bytes={HALF}-"]
    assert any("another process is downloading this file now" in line for line in said)  # the caller's notify
    assert capsys.readouterr().err == ""  # the library prints nothing


def test_a_process_waiting_for_one_that_publishes_downloads_nothing(tmp_path, server):
    dest = tmp_path / "d" / "m.gguf"
    dest.parent.mkdir()
    fd, part, _ = hold_partial(dest, resume.key(server))
    done = []
    worker = threading.Thread(target=lambda: done.append(fetch.download_url(server, dest, sha256=SHA,
                                                                             progress=False)))
    worker.start()
    try:
        time.sleep(0.1)
        os.write(fd, BODY)
        os.replace(part, dest)  # the other download published it
    finally:
        os.close(fd)
    worker.join(5)
    assert done == [dest] and _Serve.seen == [] and list(dest.parent.iterdir()) == [dest]


def test_a_link_at_the_partials_name_is_not_followed_nor_resumed(tmp_path, server):
    dest = tmp_path / "d" / "m.gguf"
    dest.parent.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    partial_of(server, dest).symlink_to(victim)
    assert fetch.download_url(server, dest, sha256=SHA, progress=False).read_bytes() == BODY
    assert victim.read_bytes() == b"keep me" and partial_of(server, dest).is_symlink() and _Serve.seen == [None]
    hard = tmp_path / "d" / "h.gguf"
    os.link(victim, partial_of(server, hard))  # a second name of another file: not a partial this made
    assert fetch.download_url(server, hard, sha256=SHA, progress=False).read_bytes() == BODY
    assert victim.read_bytes() == b"keep me" and _Serve.seen == [None, None]


def test_a_partial_from_another_url_is_removed_and_a_held_one_left(tmp_path, server):
    dest = tmp_path / "d" / "m.gguf"
    dest.parent.mkdir()
    old = partial_of(server + "?v=1", dest)
    old.write_bytes(BODY[:HALF])
    fd, live, _ = hold_partial(dest, resume.key(server + "?v=2"))
    try:
        assert fetch.download_url(server, dest, sha256=SHA, progress=False).read_bytes() == BODY
        assert sorted(p.name for p in dest.parent.iterdir()) == sorted([dest.name, live.name])
    finally:
        os.close(fd)


def test_a_download_killed_with_sigkill_continues(tmp_path, server):
    dest = tmp_path / "d" / "m.gguf"
    dest.parent.mkdir()
    _Serve.cuts, _Serve.stall = [HALF], 2.0  # the server stalls after HALF bytes: the download is killed there
    code = ("import sys; from pathlib import Path; from abricot_local.models.fetch import download_url; "
            "download_url(sys.argv[1], Path(sys.argv[2]), sha256=sys.argv[3], progress=False)")
    child = subprocess.Popen([sys.executable, "-c", code, server, str(dest), SHA])
    part = partial_of(server, dest)
    deadline = time.monotonic() + 10
    while not (part.exists() and part.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    got = part.stat().st_size  # its first block or more, held by no one now
    assert 0 < got <= HALF and part.read_bytes() == BODY[:got]
    assert fetch.download_url(server, dest, sha256=SHA, progress=False).read_bytes() == BODY
    assert _Serve.seen == [None, f"bytes={got}-"] and list(dest.parent.iterdir()) == [dest]
