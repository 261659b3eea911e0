"""A registry model pull stopped midway is continued by the next one (models/hub_pull.py), into the standard Hugging
Face cache layout: blobs/<etag>, snapshots/<commit>/<file> a relative link to it, refs/<revision>, found afterwards
by huggingface_hub itself (``hf_hub_download(local_files_only=True)``). A fake hub on 127.0.0.1 answers
huggingface_hub's HEAD as the hub does for an LFS file (a redirect to a CDN location, X-Repo-Commit, X-Linked-Etag,
X-Linked-Size) and serves the body there with ranges, cutting the connection where a test says."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import constants as hf_constants

from abricot_local.errors import DownloadError, IntegrityError
from abricot_local.models import hub, hub_probe, hub_pull, resume
from abricot_local.models.spec import ModelSpec

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
BODY = random.Random(11).randbytes(2 * 1024 * 1024 + 77)  # over resume.KEEP_FROM once cut midway
SHA = hashlib.sha256(BODY).hexdigest()
CUT = 1_300_000
REPO, FILE = "org/Tiny-GGUF", "tiny.Q4_K_M.gguf"


class Hub(BaseHTTPRequestHandler):
    """HEAD/GET /org/Tiny-GGUF/resolve/<rev>/<file>, with the hub's headers: a 302 to ``cdn``/cdn/<sha>?sig=...
    (another origin: huggingface_hub stops there), or with ``cdn`` empty the body itself (a file the hub serves);
    another file: 404 EntryNotFound; ``status``: that answer instead. The body (``body``): a Range answered with a
    206 unless ``ranges`` is False; ``cuts``: for each next body request, the bytes after which the connection is
    closed. ``seen``: each body request's Range (None: none); ``tokens``: (path, Authorization) of each request.
    The CDN location's ``sig``: the number of the HEAD that gave it (``fresh``), else 1; a sig in ``expired`` is
    answered 403, as a CDN answers an expired signed URL; ``expire``: a cut expires its request's sig."""
    protocol_version = "HTTP/1.1"
    body, ranges, cuts, seen, tokens, etag, cdn, status = BODY, True, [], [], [], SHA, "", None
    heads, fresh, expire, expired = 0, False, False, set()

    def do_HEAD(self):
        self.answer(head=True)

    def do_GET(self):
        self.answer(head=False)

    def answer(self, head: bool):
        path = self.path.split("?")[0]
        self.tokens.append((path, self.headers.get("Authorization")))
        resolve = path.startswith(f"/{REPO}/resolve/")
        if resolve and (self.status or not re.fullmatch(rf"/{REPO}/resolve/(main|{COMMIT})/{FILE}", path)):
            self.send_response(self.status or 404)
            self.send_header("X-Error-Code", "GatedRepo" if self.status == 403 else "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        sig = self.path.partition("?sig=")[2]
        if not resolve and (not path.startswith("/cdn/") or sig in Hub.expired):
            self.send_response(403 if path.startswith("/cdn/") else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        asked = None if head or (resolve and self.cdn) else self.headers.get("Range")
        start = int(re.fullmatch(r"bytes=(\d+)-", asked)[1]) if asked and self.ranges else 0
        data = self.body[start:]
        self.send_response(302 if resolve and self.cdn else 206 if start else 200)
        if resolve:
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("X-Linked-Etag", f'"{self.etag}"')
            self.send_header("ETag", '"0123abcd"')
            self.send_header("X-Linked-Size", str(len(self.body)))
        if resolve and head:
            Hub.heads += 1
        if resolve and self.cdn:
            self.send_header("Location", f"{self.cdn}/cdn/{self.etag}?sig={Hub.heads if Hub.fresh else 1}")
            data = b""
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(self.body) - 1}/{len(self.body)}")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        if head or not data:
            return
        self.seen.append(asked)
        cut = self.cuts.pop(0) if self.cuts else None
        if cut is not None and Hub.expire:
            Hub.expired.add(sig)
        self.wfile.write(data if cut is None else data[:cut])
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_hub(monkeypatch, tmp_path):
    """huggingface_hub pointed at the fake hub (as HF_ENDPOINT would), online, an empty HF cache; a pull gives up
    after one try that brings no new byte, at once."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Hub) for _ in range(2)]  # the hub, the CDN
    for server in servers:
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    url, cdn = (f"http://127.0.0.1:{server.server_address[1]}" for server in servers)
    monkeypatch.setattr(Hub, "cdn", cdn)
    monkeypatch.setattr(hf_constants, "ENDPOINT", url)
    monkeypatch.setattr(hf_constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(hf_constants, "AGENT_HARNESSES_PATH", str(tmp_path / "hf-home" / ".agent_harnesses.json"))
    monkeypatch.setattr(hub, "_set_offline", False)
    for var in ("ABRICOT_OFFLINE", "HF_HUB_OFFLINE", "HF_TOKEN", "HTTP_PROXY", "http_proxy", "ALL_PROXY",
                "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hub_probe, "unreachable", lambda timeout=3.0: None)
    monkeypatch.setattr(hub_pull, "RETRIES", 0)
    monkeypatch.setattr(hub_pull, "RETRY_WAIT", 0.0)
    monkeypatch.setattr(Hub, "body", BODY)
    monkeypatch.setattr(Hub, "etag", SHA)
    monkeypatch.setattr(Hub, "ranges", True)
    monkeypatch.setattr(Hub, "cuts", [])
    monkeypatch.setattr(Hub, "seen", [])
    monkeypatch.setattr(Hub, "tokens", [])
    monkeypatch.setattr(Hub, "status", None)
    monkeypatch.setattr(Hub, "heads", 0)
    monkeypatch.setattr(Hub, "fresh", False)
    monkeypatch.setattr(Hub, "expire", False)
    monkeypatch.setattr(Hub, "expired", set())
    yield tmp_path / "hf" / "models--org--Tiny-GGUF"
    for server in servers:
        server.shutdown()
        server.server_close()


def spec(revision: str = "", sha256: str = SHA) -> ModelSpec:
    return ModelSpec(name="tiny", source="hf", repo=REPO, files=(FILE,), revisions=(revision,),
                     sha256=(sha256,), sizes=(len(BODY),))


def partials(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / "blobs").glob(f"*{hub_pull.INCOMPLETE}"))


def assert_in_the_cache(root: Path, revision: str) -> None:
    """The layout huggingface_hub leaves, and huggingface_hub finding the file in it with no request."""
    blob = root / "blobs" / SHA
    pointer = root / "snapshots" / COMMIT / FILE
    assert blob.read_bytes() == BODY and hashlib.sha256(blob.read_bytes()).hexdigest() == SHA
    assert pointer.is_symlink() and os.readlink(pointer) == f"../../blobs/{SHA}"
    assert (root / "refs" / "main").read_text() == COMMIT if revision == "" else not (root / "refs").exists()
    found = huggingface_hub.hf_hub_download(REPO, FILE, revision=revision or None, local_files_only=True)
    assert Path(found) == pointer
    assert partials(root) == [] and [p.name for p in (root / "blobs").iterdir()] == [SHA]


def test_a_cut_pull_keeps_its_bytes_and_the_next_continues_them(fake_hub):
    Hub.cuts = [CUT, 0]  # cut, then the rest asked for at once (within the pull) and nothing comes
    with pytest.raises(DownloadError) as err:
        hub.pull_model(spec(), progress=False)
    text = str(err.value)
    (partial,) = partials(fake_hub)
    assert partial.read_bytes() == BODY[:CUT] and partial.name.startswith(f".{SHA}.")
    scan = huggingface_hub.scan_cache_dir(fake_hub.parent)  # huggingface_hub's cache tools see it as theirs
    assert [(f.file_path, f.size_on_disk) for f in scan.incomplete_files] == [(partial, CUT)]
    assert f"the {CUT:,} bytes received are kept in" in text and "next pull continues" in text
    assert "sig=" not in text and not (fake_hub / "snapshots" / COMMIT / FILE).exists()
    path = hub.pull_model(spec(), progress=False)
    assert Hub.seen == [None, f"bytes={CUT}-", f"bytes={CUT}-"]  # the next pull: the rest only
    assert path == fake_hub / "snapshots" / COMMIT / FILE
    assert_in_the_cache(fake_hub, "")


def test_a_cut_connection_is_continued_within_the_pull(fake_hub, monkeypatch):
    monkeypatch.setattr(hub_pull, "RETRIES", 2)
    Hub.cuts = [CUT, 200_000]
    assert hub.pull_model(spec(COMMIT), progress=False).read_bytes() == BODY
    assert Hub.seen == [None, f"bytes={CUT}-", f"bytes={CUT + 200_000}-"]
    assert_in_the_cache(fake_hub, COMMIT)
    Hub.seen.clear()
    hub.pull_model(spec(COMMIT), progress=False)
    assert Hub.seen == []  # found in the cache: nothing asked


def test_a_server_ignoring_the_range_restarts_from_zero(fake_hub):
    Hub.cuts = [CUT, 0]
    with pytest.raises(DownloadError):
        hub.pull_model(spec(), progress=False)
    Hub.ranges = False
    hub.pull_model(spec(), progress=False)
    assert Hub.seen == [None, f"bytes={CUT}-", f"bytes={CUT}-"]  # asked for the rest, answered 200 with the whole
    assert_in_the_cache(fake_hub, "")


def test_wrong_bytes_are_discarded_and_never_placed(fake_hub):
    Hub.cuts = [CUT, 0]
    with pytest.raises(DownloadError):
        hub.pull_model(spec(), progress=False)
    Hub.body = BODY[:CUT] + bytes(len(BODY) - CUT)  # the rest is not the file's
    with pytest.raises(IntegrityError) as err:
        hub.pull_model(spec(), progress=False)
    assert f"sha256 mismatch, expected {SHA}" in str(err.value) and "discarded" in str(err.value)
    assert Hub.seen == [None, f"bytes={CUT}-", f"bytes={CUT}-"]
    assert partials(fake_hub) == [] and list((fake_hub / "blobs").iterdir()) == []
    assert not (fake_hub / "snapshots" / COMMIT / FILE).exists()


def test_a_pin_the_hub_contradicts_is_refused_before_any_byte(fake_hub):
    with pytest.raises(IntegrityError, match="not the 0+ models.toml pins; nothing was downloaded"):
        hub.pull_model(spec(sha256="0" * 64), progress=False)
    assert Hub.seen == []


def test_the_token_goes_to_the_hub_and_never_to_the_cdn(fake_hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    hub.pull_model(spec(), progress=False)
    assert ("/cdn/" + SHA, None) in Hub.tokens and (f"/{REPO}/resolve/main/{FILE}", "Bearer hf_secret") in Hub.tokens
    assert [t for p, t in Hub.tokens if p.startswith("/cdn/")] == [None]
    shutil.rmtree(fake_hub)
    Hub.tokens.clear()
    Hub.seen.clear()
    monkeypatch.setattr(Hub, "cdn", "")  # the hub serves the bytes itself: the body's request carries the token
    Hub.cuts = [CUT, 0]
    with pytest.raises(DownloadError):
        hub.pull_model(spec(), progress=False)
    hub.pull_model(spec(), progress=False)
    assert Hub.tokens == [(f"/{REPO}/resolve/main/{FILE}", "Bearer hf_secret")] * 5  # HEAD, GET, GET; HEAD, GET
    assert Hub.seen == [None, f"bytes={CUT}-", f"bytes={CUT}-"]
    assert_in_the_cache(fake_hub, "")


@pytest.mark.parametrize("status, said", [(None, "not found in"), (403, "licence")])
def test_the_hub_refusing_is_said_as_huggingface_hub_says_it(fake_hub, status, said):
    Hub.status = status
    with pytest.raises(DownloadError, match=said):
        hub.pull_model(spec() if status else ModelSpec(name="x", source="hf", repo=REPO, files=("other.gguf",)),
                       progress=False)
    assert Hub.seen == [] and not (fake_hub / "blobs").exists()


def test_ctrl_c_keeps_the_partial(fake_hub, monkeypatch):
    real = resume._open

    def interrupted(url, start):  # CUT bytes arrive, then Ctrl-C
        resp, read = real(url, start), []

        def once(n):
            if read:
                raise KeyboardInterrupt
            read.append(n)
            return resp.fp.read(CUT)
        resp.read = once
        return resp

    monkeypatch.setattr(resume, "_open", interrupted)
    with pytest.raises(KeyboardInterrupt):
        hub.pull_model(spec(), progress=False)
    (partial,) = partials(fake_hub)
    assert partial.read_bytes() == BODY[:CUT]
    monkeypatch.setattr(resume, "_open", real)
    hub.pull_model(spec(), progress=False)
    assert Hub.seen[-1] == f"bytes={CUT}-"
    assert_in_the_cache(fake_hub, "")


def test_a_huggingface_hub_download_of_the_blob_is_waited_for(fake_hub):
    """huggingface_hub's lock for the blob held (its download under way): the pull waits, then uses its blob."""
    from huggingface_hub.utils import WeakFileLock

    lock = fake_hub.parent / ".locks" / fake_hub.name / f"{SHA}.lock"
    lock.parent.mkdir(parents=True)
    held, done = threading.Event(), threading.Event()

    def other():
        with WeakFileLock(str(lock)):
            held.set()
            done.wait(5)
            (fake_hub / "blobs").mkdir(parents=True, exist_ok=True)
            (fake_hub / "blobs" / SHA).write_bytes(BODY)

    thread = threading.Thread(target=other)
    thread.start()
    held.wait(5)
    threading.Timer(0.1, done.set).start()
    hub.pull_model(spec(), progress=False)
    thread.join()
    assert Hub.seen == []  # no byte fetched: the blob the other download made
    assert_in_the_cache(fake_hub, "")


def test_an_etag_that_names_no_file_is_refused(fake_hub):
    Hub.etag = "../../escaped"
    with pytest.raises(DownloadError, match="without a usable ETag header"):
        hub.pull_model(spec(sha256=""), progress=False)
    assert Hub.seen == [] and not (fake_hub.parent / "escaped").exists() and not (fake_hub / "blobs").exists()


def test_an_expired_cdn_link_is_said_so_and_the_next_pull_continues(fake_hub):
    """The CDN refuses its signed URL after a cut (403: it expired) and the hub gives the same one again: the pull
    stops, saying run again (not a licence, not HF_TOKEN), its bytes kept; the next pull continues them."""
    Hub.expire, Hub.cuts = True, [CUT]
    with pytest.raises(DownloadError) as err:
        hub.pull_model(spec(), progress=False)
    text = str(err.value)
    assert "has expired or was refused" in text and "run the same command again" in text
    assert "licence" not in text and "HF_TOKEN" not in text and "sig=" not in text and ";;" not in text
    assert f"the {CUT:,} bytes received are kept in" in text and Hub.heads == 2  # the re-ask: no fresh link
    assert [p.read_bytes() for p in partials(fake_hub)] == [BODY[:CUT]]
    Hub.expired.clear()
    hub.pull_model(spec(), progress=False)
    assert Hub.seen == [None, f"bytes={CUT}-"]
    assert_in_the_cache(fake_hub, "")


def test_an_expired_cdn_link_is_renewed_within_the_pull(fake_hub):
    Hub.expire, Hub.fresh, Hub.cuts = True, True, [CUT]
    hub.pull_model(spec(), progress=False)
    assert Hub.heads == 2 and Hub.expired == {"1"}  # a second HEAD, a fresh location: the rest from there
    assert Hub.seen == [None, f"bytes={CUT}-"]
    assert_in_the_cache(fake_hub, "")


@pytest.mark.parametrize("before", [False, True])
def test_a_blob_already_there_is_linked_as_not_new(fake_hub, monkeypatch, before):
    """huggingface_hub's _create_symlink moves a new blob into the snapshot where links cannot be made, and copies
    one already there (another revision's, another download's): new_blob says which, as huggingface_hub says it."""
    from huggingface_hub import file_download

    real, calls = file_download._create_symlink, []

    def recorded(src, dst, new_blob=False):
        calls.append((Path(src).name, new_blob))
        return real(src, dst, new_blob=new_blob)

    monkeypatch.setattr(file_download, "_create_symlink", recorded)
    if before:
        (fake_hub / "blobs").mkdir(parents=True)
        (fake_hub / "blobs" / SHA).write_bytes(BODY)
    hub.pull_model(spec(), progress=False)
    assert calls == [(SHA, not before)] and Hub.seen == ([] if before else [None])
    assert_in_the_cache(fake_hub, "")


def test_a_refused_body_is_said_in_whole_sentences(fake_hub):
    """A 401/403 to a body on the hub's own host: the hub's advice (gated or private), then what became of the
    bytes as its own sentence; on a CDN's signed URL: its link expired, run again."""
    own = hub_pull._Body(REPO, f"{REPO}/{FILE} @ abc", FILE, f"{hf_constants.ENDPOINT}/{REPO}/resolve/main/{FILE}",
                         {}, fake_hub / "b", 10, None)
    text = str(hub_pull._error(hub_pull._HTTPStatus(403, "Forbidden"), own, "; the 5 bytes received are kept"))
    assert "licence" in text and text.endswith("repository name. The 5 bytes received are kept.")
    cdn = dataclasses.replace(own, location="https://cdn.example/x?sig=1")
    text = str(hub_pull._error(hub_pull._HTTPStatus(401, "Unauthorized"), cdn, "; the 5 bytes received are kept"))
    assert "licence" not in text and "(cdn.example: HTTP 401 Unauthorized); the 5 bytes received are kept; run " in text
