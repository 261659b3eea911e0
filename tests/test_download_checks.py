"""Before and around downloads (issue 10, items 3 and 5): memory and disk are checked before
any network call and refused with the numbers (--force goes on); a DisCoTEX pull that fails
names every missing file; an unreachable hub fails in seconds with one line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import huggingface_hub
import pytest
from click.testing import CliRunner
from huggingface_hub import constants as hf_constants

from abricot_local.models import fetch, hub, hub_probe
from abricot_local import memory
from abricot_local.cli import cli
from abricot_local.tasks import discotex
from invented_data import write_discotex

GIB = 2**30
ENTRY = """["{alias}"]
repo = "example/Huge-GGUF"
revision = "0123456789abcdef0123456789abcdef01234567"
file = "huge.Q4_K_M.gguf"
size_approx = "{size}"
n_ctx = 4096
"""


def models_file(tmp_path, size: str, alias: str = "huge-q4"):
    p = tmp_path / "models.toml"
    p.write_text(ENTRY.format(alias=alias, size=size), encoding="utf-8")
    return p


@pytest.fixture
def online(monkeypatch, tmp_path):
    """Downloads allowed (no offline variable), an empty HF cache, and every network call a failure."""
    monkeypatch.delenv("ABRICOT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    calls = []

    def network(*args, **kwargs):
        calls.append(args or kwargs)
        raise AssertionError("a network call")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", network)
    monkeypatch.setattr(hub_probe, "unreachable", network)
    return calls


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_too_big_for_ram_is_refused_before_any_download(online, tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 16 * GIB)
    r = invoke("run", "huge-q4", "--models", models_file(tmp_path, "40 GB"), "--tasks", "discotex",
               "--data-dir", write_discotex(tmp_path / "d"))
    assert r.exit_code != 0 and online == []
    line = r.output.strip().splitlines()[-1]
    weights, kv = 40e9 / GIB, memory.kv_estimate_from_size(int(40e9), 4096) / GIB
    assert line.startswith("error: not enough memory")
    assert f"needs about {weights + kv:.1f} GiB (weights {weights:.1f} GiB + KV cache {kv:.1f} GiB)" in line
    assert "but 16.0 GiB is available" in line and "--force" in line
    assert not (tmp_path / "hf").exists() and not (tmp_path / "results").exists()


def test_force_goes_on_to_the_download(online, tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 16 * GIB)
    pulled = []

    def pull_model(spec, **kw):
        pulled.append(spec.name)
        raise fetch.DownloadError("mocked download reached")

    monkeypatch.setattr(hub, "pull_model", pull_model)
    r = invoke("run", "huge-q4", "--models", models_file(tmp_path, "40 GB"), "--tasks", "discotex",
               "--data-dir", write_discotex(tmp_path / "d"), "--force")
    assert pulled == ["huge-q4"] and "mocked download reached" in r.output and "not enough memory" not in r.output


def test_a_run_says_its_plan_before_the_download_starts(online, tmp_path, monkeypatch):
    """A multi-GB download may take long, and fail: the run's plan (the download, each task's items, tokens
    and time as estimated from the registry entry) is said before it starts, not only once the model loads."""
    monkeypatch.setattr(memory, "available_memory", lambda: 64 * GIB)
    said = []

    def pull_model(spec, **kw):
        said.append("download started")
        raise fetch.DownloadError("mocked download reached")

    monkeypatch.setattr(hub, "pull_model", pull_model)
    r = invoke("run", "huge-q4", "--models", models_file(tmp_path, "2 GB"), "--tasks", "discotex",
               "--data-dir", write_discotex(tmp_path / "d"), "--sample", "3")
    assert r.exit_code != 0 and said == ["download started"]
    lines = r.output.splitlines()
    first = [ln for ln in lines if ln.startswith("plan")]
    assert first[0].startswith("plan: download: ") and "2.00 GB" in first[0], r.output
    assert any(ln.startswith("plan (estimated): huge-q4 discotex: 3 items, ") for ln in first), r.output
    assert lines.index(first[0]) < next(k for k, ln in enumerate(lines) if "mocked download reached" in ln)


def test_too_big_for_the_disk_is_refused_before_any_download(online, tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 64 * GIB)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr("shutil.disk_usage", lambda path: usage(10 * GIB, 10 * GIB - 100 * 2**20, 100 * 2**20))
    r = invoke("run", "huge-q4", "--models", models_file(tmp_path, "2 GB"), "--tasks", "discotex",
               "--data-dir", write_discotex(tmp_path / "d"))
    assert r.exit_code != 0 and online == []
    line = r.output.strip().splitlines()[-1]
    assert f"not enough disk space: the download needs about {2e9 / GIB:.1f} GiB" in line
    assert "has 0.1 GiB free" in line and str(tmp_path) in line and "--force" in line


@pytest.fixture
def folded(monkeypatch):
    """Errors folded to 120 columns, as on a terminal (a pipe gets whole lines)."""
    monkeypatch.setattr("abricot_local.cli.app.FOLD", True)


@pytest.fixture
def user_cache(home, monkeypatch):
    """The cache where a user's is (~/.cache/abricot-local, HOME a tmp folder), so that a message shows
    it as ~/.cache/...: as long as a user's, whatever the tmp folder's length (pytest-xdist adds popen-gwN/)
    folds it the same; and an empty Hugging Face cache (``home``)."""
    monkeypatch.delenv("ABRICOT_CACHE_DIR")
    return home / ".cache" / "abricot-local"


def test_discotex_pull_names_every_missing_file_its_url_and_the_offline_way_each_on_a_line(tmp_path, folded,
                                                                                          user_cache):
    """Offline (conftest): both release files fail; each file, its URL and --data-dir on a line of its own,
    within 120 columns, each URL once, and the cause said (offline), not only that the download failed."""
    r = invoke("data", "pull", "discotex")
    assert r.exit_code != 0
    lines = r.output.rstrip().splitlines()
    assert max(map(len, lines)) <= 120, r.output
    assert "offline: ABRICOT_OFFLINE is set" in " ".join(ln.strip() for ln in lines[:2])
    assert "data pull" not in r.output  # (it was just run)
    urls = [url for url, _, _ in discotex.release_files()]
    base = urls[0].rsplit("/", 1)[0] + "/"
    assert all(u.startswith(base) for u in urls) and lines.count("    " + base) == 1
    for url in urls:
        assert "      " + url.rsplit("/", 1)[1] in lines and r.output.count(url.rsplit("/", 1)[1]) == 1
    assert r.output.count(discotex.RELEASE_COMMIT) == 1
    assert lines[-1].startswith("  offline: --data-dir DIR")
    assert len(r.output) < 700


def test_an_unreachable_network_is_said_as_one_and_the_second_file_is_not_tried(tmp_path, folded, monkeypatch,
                                                                              user_cache):
    import urllib.error

    tried = []

    def urlopen(request, timeout=None):
        tried.append(request.full_url)
        raise urllib.error.URLError(socket.gaierror(-3, "Temporary failure in name resolution"))

    monkeypatch.delenv("ABRICOT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("urllib.request.urlopen", urlopen)
    # the hub unreachable too (no real connection, whatever the machine's network and an earlier test's probe)
    monkeypatch.setattr(hub_probe, "unreachable", lambda timeout=3.0: "huggingface.co:443: Temporary failure in "
                                                                      "name resolution")
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex")
    assert r.exit_code == 2 and len(tried) == 1
    lines = r.output.rstrip().splitlines()
    assert max(map(len, lines)) <= 120, r.output
    assert "the network is unreachable (raw.githubusercontent.com: Temporary failure in name resolution)" in \
        " ".join(ln.strip() for ln in lines[:2])
    assert "  get it:  abricot-local data pull discotex (once the network is back)" in lines
    for url, name, _ in discotex.release_files():
        assert "      " + name in lines and "    " + url.rsplit("/", 1)[0] + "/" in lines
    assert lines[-1] == "  offline: --data-dir DIR (the DisCoTEX release or Parquet rows)"


def test_discotex_pull_names_only_what_is_still_missing(tmp_path, monkeypatch):
    """One file came through (or was saved by hand): the message names only the other, with its cause."""
    from abricot_local.errors import FilesNotDownloaded

    got = []
    real = fetch._download

    def download(url, dest, sha256, progress):
        if "ted" in url:
            got.append(dest)
            return dest
        return real(url, dest, sha256, progress)

    monkeypatch.setattr(fetch, "_download", download)
    with pytest.raises(FilesNotDownloaded) as err:
        discotex.pull(tmp_path / "d")
    assert len(got) == 1 and err.value.names == ("discotex_1_wiki_test_set_release.tsv",)
    r = invoke("data", "pull", "discotex")
    assert r.exit_code != 0 and "      discotex_1_wiki_test_set_release.tsv" in r.output.splitlines()
    assert "ted_test_set_release.tsv" not in r.output and "save this file by hand into" in r.output


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def no_proxy(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hub_probe, "_answers", {})


def test_probe_says_why_and_is_asked_once(monkeypatch, no_proxy):
    port = closed_port()
    monkeypatch.setattr(hub_probe, "endpoint", lambda: f"http://127.0.0.1:{port}")
    start = time.perf_counter()
    reason = hub_probe.unreachable()
    assert reason and f"127.0.0.1:{port}" in reason and time.perf_counter() - start < 5
    connects = []
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: connects.append(a))
    assert hub_probe.unreachable() == reason and connects == []  # remembered, not asked again
    with pytest.raises(fetch.DownloadError, match=r"^cannot download x: the Hugging Face hub .* cannot be reached"):
        hub_probe.require("x")


def test_probe_finds_a_listening_hub(monkeypatch, no_proxy):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setattr(hub_probe, "endpoint", lambda: f"http://127.0.0.1:{server.getsockname()[1]}")
        assert hub_probe.unreachable() is None
        hub_probe.require("x")  # no error


# `pull` in a fresh process, huggingface_hub pointed at a port closed just before (as closed_port), by a driver started
# once the tests are collected (conftest.start_early), beside the other tests: it prints what the test reads
UNREACHABLE = """
import json, os, socket, subprocess, sys, time
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{port}"}
start = time.perf_counter()
r = subprocess.run(sys.argv[1:], env=env, capture_output=True, text=True, timeout=120)
print(json.dumps({"port": port, "returncode": r.returncode, "stdout": r.stdout, "stderr": r.stderr,
                  "wall": time.perf_counter() - start}))
"""


def unreachable_env(root) -> dict[str, str]:
    """The environment the command gets (but HF_ENDPOINT): downloads allowed, no proxy, its own caches."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ABRICOT_OFFLINE", "HF_HUB_OFFLINE") and "proxy" not in k.lower()}
    return env | {"HF_HOME": str(root / "hf"), "ABRICOT_CACHE_DIR": str(root / "cache"),
                  "ABRICOT_CONFIG_DIR": str(root / "config")}


def early_children(tmp_path_factory) -> dict:
    from conftest import Early

    root = tmp_path_factory.mktemp("unreachable-hub")
    cmd = [sys.executable, "-m", "abricot_local", "pull", "huge-q4", "--models", str(models_file(root, "1 GB"))]
    return {"pull": Early([sys.executable, "-c", UNREACHABLE, *cmd], env=unreachable_env(root), cwd=root,
                          timeout=180)}


@pytest.fixture(scope="module")
def unreachable_pull(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    yield child
    child.close()


def test_unreachable_hub_fails_fast_with_one_line(unreachable_pull):
    """The real command in a fresh process, huggingface_hub pointed at a closed local port (UNREACHABLE)."""
    driver = unreachable_pull.result()
    assert driver.returncode == 0, driver.stderr
    got = json.loads(driver.stdout)
    r, port, wall = subprocess.CompletedProcess([], got["returncode"], got["stdout"], got["stderr"]), got["port"], \
        got["wall"]
    assert r.returncode != 0
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and "Retrying" not in r.stderr, r.stderr
    assert lines[0].startswith("error: cannot download model 'huge-q4'")
    assert f"Hugging Face hub (http://127.0.0.1:{port}) cannot be reached" in lines[0]
    # the startup measured only when it may matter: under 5 s, the bound holds whatever it is
    env = unreachable_env(Path(unreachable_pull.popen["cwd"])) | {"HF_ENDPOINT": f"http://127.0.0.1:{port}"}
    assert wall < 5 or wall < 5 + _startup(env), f"{wall:.1f} s"


def _startup(env) -> float:
    """Seconds this machine takes to start the CLI and print its version (load varies)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "abricot_local", "--version"], env=env, capture_output=True, timeout=120)
    return time.perf_counter() - start
