"""Offline means no request at all: with ABRICOT_OFFLINE=1 alone (huggingface_hub imported without
HF_HUB_OFFLINE), huggingface_hub's ``local_files_only`` calls still built a user agent, and with it fetched
its agent-harness registry (GET {ENDPOINT}/api/agent-harnesses, 3 s timeout) once per process. A logging
server on 127.0.0.1 stands for the hub: offline it sees nothing; online it sees requests, so it would have."""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from huggingface_hub import constants as hf_constants
from huggingface_hub.utils import _detect_agent

from abricot_local.errors import AbricotError, DownloadError
from abricot_local.models import hub, hub_probe
from abricot_local.models.spec import ModelSpec

COMMIT = "0123456789abcdef0123456789abcdef01234567"
DATA = b"GGUF" + bytes(60)


@pytest.fixture
def seen(monkeypatch, tmp_path):
    """The requests a local stand-in for the hub receives (each answered 404 at once), with
    huggingface_hub pointed at it as if HF_ENDPOINT named it, and nothing it remembered from earlier."""
    requests: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def answer(self):
            requests.append(f"{self.command} {self.path}")
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD = do_POST = answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(hf_constants, "ENDPOINT", url)
    monkeypatch.setattr(hf_constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(hf_constants, "AGENT_HARNESSES_PATH", str(tmp_path / "hf-home" / ".agent_harnesses.json"))
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_TELEMETRY", False)
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)  # no HF_HUB_OFFLINE when it was imported
    monkeypatch.setattr(_detect_agent, "_registry", None)  # the registry not yet asked for in this process
    monkeypatch.setattr(hub, "_set_offline", False)
    for var in ("HF_HUB_OFFLINE", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hub_probe, "unreachable", lambda timeout=3.0: None)
    yield requests
    server.shutdown()
    server.server_close()


def spec(name: str = "m.gguf") -> ModelSpec:
    return ModelSpec(name="test-model", source="hf", repo="org/Test-GGUF", files=(name,), revisions=(COMMIT,),
                     sha256=(hashlib.sha256(DATA).hexdigest(),), sizes=(len(DATA),))


def put_in_cache(name: str) -> None:
    """``name`` in the Hugging Face cache, as a download of org/Test-GGUF at COMMIT leaves it."""
    snap = Path(hf_constants.HF_HUB_CACHE) / "models--org--Test-GGUF" / "snapshots" / COMMIT
    snap.mkdir(parents=True, exist_ok=True)
    (snap / name).write_bytes(DATA)


def test_offline_resolution_makes_no_request_and_online_does(seen, monkeypatch):
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    put_in_cache("cached.gguf")
    assert hub.cached_paths(spec("cached.gguf")) is not None
    assert hub.pull_model(spec("cached.gguf"), progress=False).name == "cached.gguf"
    assert hub.cached_paths(spec()) is None
    with pytest.raises(AbricotError, match="not in the local Hugging Face cache"):
        hub.pull_model(spec(), progress=False)
    with pytest.raises(DownloadError):
        hub.hub_dataset_download("org/data", "x.csv", COMMIT, progress=False)
    assert seen == []

    # online in the same process: huggingface_hub is no longer held offline, and the server hears it
    monkeypatch.delenv("ABRICOT_OFFLINE")
    monkeypatch.setattr(_detect_agent, "_registry", None)
    with pytest.raises(AbricotError):
        hub.pull_model(spec(), progress=False)
    assert hf_constants.HF_HUB_OFFLINE is False
    assert "GET /api/agent-harnesses" in seen
    assert f"HEAD /org/Test-GGUF/resolve/{COMMIT}/m.gguf" in seen


def test_offline_left_as_the_user_set_it(seen, monkeypatch):
    """huggingface_hub made offline by its own variable stays offline when abricot-local is online."""
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    hub.hub_module()
    monkeypatch.delenv("ABRICOT_OFFLINE")
    assert hub.hub_module().constants.HF_HUB_OFFLINE is True
    assert seen == []


def test_a_refusal_names_the_hub_it_asked(monkeypatch):
    """HF_ENDPOINT's host, not huggingface.co, is the one a refusal sends the user to."""
    from huggingface_hub import errors

    from abricot_local.models.hub_errors import hub_error

    monkeypatch.setattr(hf_constants, "ENDPOINT", "http://127.0.0.1:9")
    offline = hub_error(errors.LocalEntryNotFoundError("not cached"), "org/repo", "m.gguf", None, dataset=False)
    down = hub_error(ConnectionError("refused"), "org/repo", "m.gguf", None, dataset=True)
    assert "http://127.0.0.1:9 unreachable" in str(offline) and "huggingface.co" not in str(offline)
    assert "from http://127.0.0.1:9 (ConnectionError" in str(down)
