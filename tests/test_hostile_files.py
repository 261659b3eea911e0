"""What other tools and earlier runs leave on disk, as a hostile or unlucky user leaves it (issue 29,
items 4, 5, 7 and 8): damaged Ollama manifests and LM Studio settings, digests that leave the store,
blobs that are not their name, calibration caches of absurd numbers and two writers at once,
results.json files Python's parser chokes on, a shard lacking a task, huge names and hard links.
Each is one line, or a listing row saying what is wrong; none is a traceback. No network, fake
backend and tmp folders only."""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.run import calibration
from abricot_local.models import locate as modellocate
from abricot_local.cli import cli
from abricot_local.errors import ModelError, ResultsError, UnknownModelError
from abricot_local.jsonfiles import MAX_DEPTH
from abricot_local.run.cost import Measured
from conftest import FIXTURE

GGUF = b"GGUF" + struct.pack("<IQQ", 3, 0, 0)  # a valid header: no tensors, no keys
SHA = hashlib.sha256(GGUF).hexdigest()
FAKE = ("--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "4")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_line_error(r) -> str:
    """The output of a command that failed as it should: exit 2, one ``error:`` line, no traceback."""
    assert r.exit_code == 2, (r.exit_code, r.output, r.exception)
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    return lines[0]




def deep(n: int) -> str:
    return "[" * n + "]" * n


def manifest(root: Path, name: str, doc) -> Path:
    path = root / "manifests" / "registry.ollama.ai" / "library" / name / "latest"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def layer(digest, media="application/vnd.ollama.image.model") -> dict:
    return {"mediaType": media, "digest": digest, "size": 1}


# -- item 4: Ollama and LM Studio files -------------------------------------------------------------
def test_damaged_ollama_manifests_are_one_line_and_listed_as_unusable(home, tmp_path):
    root = home / ".ollama" / "models"
    (root / "blobs").mkdir(parents=True)
    (root / "blobs" / f"sha256-{SHA}").write_bytes(GGUF)
    manifest(root, "good", {"schemaVersion": 2, "layers": [layer(f"sha256:{SHA}")]})
    bad = {
        "medialist": {"schemaVersion": 2, "layers": [layer(f"sha256:{SHA}", media=["a", "b"])]},  # was TypeError
        "digestnumber": {"schemaVersion": 2, "layers": [layer(12345)]},  # was AttributeError
        "nested": '{"schemaVersion": 2, "layers": ' + deep(100_000) + "}",  # was RecursionError
        "bigint": '{"schemaVersion": 2, "layers": [], "size": ' + "9" * 5000 + "}",
        "latin1": b'{"schemaVersion": 2, "layers": [], "name": "caf\xe9"}'.decode("latin-1"),
    }
    for name, doc in bad.items():
        path = manifest(root, name, doc)
        if name == "latin1":
            path.write_bytes(b'{"schemaVersion": 2, "layers": [], "name": "caf\xe9"}')
    expect = {"medialist": "no media type as text", "digestnumber": "a layer's digest is 12345,",
              "nested": f"deeper than {MAX_DEPTH} levels", "bigint": "an integer of 5,000 digits",
              "latin1": "not UTF-8 text (byte 0xe9"}
    for name, words in expect.items():
        with pytest.raises(ModelError, match=re.escape(words)) as err:
            modellocate.resolve_model_ref(f"ollama:{name}")
        assert "\n" not in str(err.value)
    with pytest.raises(UnknownModelError, match="Did you mean: ollama:good:latest"):  # the listing held
        modellocate.resolve_model_ref("ollama:goood")
    r = invoke("models", "--local")
    assert r.exit_code == 0, r.output
    rows = listed_rows(r.output, "ollama")
    assert set(rows) == {f"ollama:{n}:latest" for n in ["good", *bad]}
    assert "unusable" not in rows["ollama:good:latest"]
    for name, words in expect.items():
        assert "unusable:" in rows[f"ollama:{name}:latest"] and words in rows[f"ollama:{name}:latest"]


def listed_rows(output: str, prefix: str) -> dict[str, str]:
    """`models --local`'s rows by name, each with the lines its wrapped cells continue on."""
    rows: dict[str, str] = {}
    name = None
    for ln in output.splitlines():
        if ln.startswith(prefix):
            name = ln.split()[1]
            rows[name] = ln.strip()
        elif name and ln.startswith(" ") and ln.strip() and not ln.startswith("  ["):
            rows[name] += " " + ln.strip()
        else:
            name = None
    for ln in output.replace("\n  ", " ").splitlines():  # a problem's whole line, under the table
        if ln.startswith("unusable: "):
            rows[ln.split()[1].rstrip(":")] += " " + ln
    return rows


def test_lm_studio_settings_nested_too_deep_fall_back_to_the_default_folder(home):
    (home / ".lmstudio").mkdir()
    (home / ".lmstudio" / "settings.json").write_text('{"downloadsFolder": ' + deep(100_000) + "}")
    repo = home / ".lmstudio" / "models" / "pub" / "R"
    repo.mkdir(parents=True)
    (repo / "r-Q4_0.gguf").write_bytes(GGUF)
    r = invoke("models", "--local")
    assert r.exit_code == 0 and "lmstudio:pub/R/r-Q4_0.gguf" in r.output, r.output
    assert modellocate.resolve_model_ref("lmstudio:pub/R").path == repo / "r-Q4_0.gguf"


# -- item 5a: digests that leave the store, blobs that are not their name -----------------------------
def test_an_ollama_digest_must_be_hex_and_a_blob_its_own_hash(home, tmp_path, monkeypatch):
    root = home / ".ollama" / "models"
    (root / "blobs").mkdir(parents=True)
    secret = tmp_path / "secret.gguf"
    secret.write_bytes(GGUF)
    opened = []
    real_open = open

    def spy(file, *a, **kw):
        opened.append(os.path.realpath(file) if isinstance(file, (str, os.PathLike)) else file)
        return real_open(file, *a, **kw)

    rel = os.path.relpath(secret, root / "blobs")
    manifest(root, "escape", {"schemaVersion": 2, "layers": [layer(f"sha256:x/{rel}")]})
    manifest(root, "short", {"schemaVersion": 2, "layers": [layer("sha256:" + "a" * 63)]})
    monkeypatch.setattr("builtins.open", spy)
    for name in ("escape", "short"):
        with pytest.raises(ModelError, match="not sha256: and 64 hex digits"):
            modellocate.resolve_model_ref(f"ollama:{name}")
    monkeypatch.setattr("builtins.open", real_open)
    assert str(secret) not in opened  # never opened, never hashed
    # a blob named for other bytes than it holds: found when hashed, listed as such
    other = b"GGUF" + struct.pack("<IQQ", 3, 0, 0) + b"\x00" * 8
    wrong = hashlib.sha256(other).hexdigest()
    (root / "blobs" / f"sha256-{wrong}").write_bytes(GGUF)  # the name of `other`, the bytes of GGUF
    manifest(root, "swapped", {"schemaVersion": 2, "layers": [layer(f"sha256:{wrong}")]})
    r = invoke("models", "--local")
    assert r.exit_code == 0, r.output
    rows = listed_rows(r.output, "ollama")
    row = rows["ollama:swapped:latest"]
    assert "unusable:" in row and f"has sha256 {SHA}, not the {wrong}" in row
    assert all("unusable:" in rows[f"ollama:{n}:latest"] and "64 hex digits" in rows[f"ollama:{n}:latest"]
               for n in ("escape", "short"))


# -- item 4: the calibration cache ---------------------------------------------------------------------
def entry(label: str, **measured) -> dict:
    from abricot_local.backends.fake import FakeBackend
    from abricot_local.backends.options import ScoringOptions

    m = {"token_s": 1e-3, "prompt_tokens": 256, "call_s": 1e-2, "row_s": 2e-3, "load_s": 1.5, **measured}
    return {"model": label, "sha256": f"synthetic:{label}", "settings": FakeBackend.speed_settings(ScoringOptions()),
            "host": calibration.host(), "measured": m, "facts": None, "when": "2025-01-01T00:00:00+00:00"}


@pytest.mark.parametrize("bad, words", [
    (dict(token_s=0), "measured.token_s is 0"), (dict(token_s=-1e-3), "measured.token_s is -0.001"),
    (dict(token_s=float("inf")), "measured.token_s is inf"), (dict(token_s="abc"), "measured.token_s is 'abc'"),
    (dict(token_s=1e308), "measured.token_s is 1e+308"), (dict(load_s=float("nan")), "measured.load_s is nan"),
    (dict(prompt_tokens=True), "prompt_tokens is True"),
])
def test_a_bad_calibration_entry_is_ignored_with_a_note(bad, words):
    good = entry("fake")
    doc = {"version": 1, "calibrations": [entry("fake", **bad), good]}
    calibration.cache_file().parent.mkdir(parents=True, exist_ok=True)
    calibration.cache_file().write_text(json.dumps(doc))
    cache = calibration.read()
    assert [c.model for c in cache.calibrations] == ["fake"] and cache.calibrations[0].measured.token_s == 1e-3
    assert len(cache.notes) == 1 and "calibration 1 ignored" in cache.notes[0] and words in cache.notes[0]


def test_calibration_caches_nested_too_deep_or_with_string_facts_are_one_line_in_the_dry_run():
    path = calibration.cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    negative = entry("fake", token_s=-1e-3)  # once a silent 1.43e+03 tokens/s
    stringy = {**entry("fake"), "facts": "abc"}
    path.write_text(json.dumps({"version": 1, "calibrations": [negative, stringy]}))
    r = invoke("run", "fake", *FAKE, "--dry-run")
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())  # the plan's lines are folded to 120 columns
    assert "calibration 1 ignored (measured.token_s is -0.001" in said
    assert "calibration 2 ignored (facts is not an object)" in said and "no calibration yet" in said
    assert "tokens/s" not in r.output  # no speed from either
    path.write_text('{"version": 1, "calibrations": ' + deep(100_000) + "}")
    r = invoke("run", "fake", *FAKE, "--dry-run")
    assert r.exit_code == 0, r.output
    assert f"ignored: nests lists or objects deeper than {MAX_DEPTH} levels" in " ".join(r.output.split())
    calibration.store(calibration.Calibration.from_json(entry("fake")))  # a new calibration replaces the file
    assert len(calibration.load()) == 1 and not calibration.read().notes


# -- item 8a: two calibrations at once ----------------------------------------------------------------------
def test_calibrations_made_at_once_are_all_kept():
    """8 writers x 10 calibrations each, at the same time: all 80 kept (without the lock: about 52)."""
    def writer(w: int) -> None:
        for k in range(10):
            calibration.store(calibration.Calibration(
                f"m{w}-{k}", f"synthetic:m{w}-{k}", {"n_batch": 512}, calibration.host(),
                Measured(1e-3, 256, 1e-2, 2e-3, 1.0), None, "2025-01-01T00:00:00+00:00"))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kept = calibration.read()
    assert sorted(c.model for c in kept.calibrations) == sorted(f"m{w}-{k}" for w in range(8) for k in range(10))
    assert not kept.notes and not list(calibration.cache_file().parent.glob(".calibrations.json.*.tmp"))
    assert not calibration.cache_file().with_name("calibrations.json.lock").exists()  # removed by the last writer


# -- item 4: results.json, and merge ------------------------------------------------------------------------
@pytest.fixture
def fake_run(finished_run, tmp_path) -> Path:
    return finished_run("run", "fake", *FAKE, into=tmp_path / "run")  # a copy: the tests damage it


@pytest.mark.parametrize("damage, words", [
    (lambda t: t.replace('"n": 4', '"n": ' + "7" * 5000, 1), "an integer of 5,000 digits"),
    (lambda t: t.replace('"n": 4', '"n": ' + deep(100_000), 1), f"deeper than {MAX_DEPTH} levels"),
    (lambda t: t.replace('"n": 4', '"n": ' + deep(MAX_DEPTH + 1), 1), f"deeper than {MAX_DEPTH} levels"),
    (lambda t: t.encode("utf-8").replace(b'"schema_version"', b'"sch\xe9ma_version"', 1), "not UTF-8 text"),
])
def test_results_json_that_chokes_the_parser_is_one_line(fake_run, damage, words):
    from abricot_local.record import read_run

    path = fake_run / "results.json"
    text = path.read_text(encoding="utf-8")
    assert '"n": 4' in text
    damaged = damage(text)
    path.write_bytes(damaged if isinstance(damaged, bytes) else damaged.encode("utf-8"))
    with pytest.raises(ResultsError, match=words) as err:
        read_run(fake_run)
    assert "\n" not in str(err.value) and str(path) in str(err.value)
    for command in (("report", fake_run), ("check", fake_run), ("compare", fake_run, fake_run)):
        r = invoke(*command)
        assert r.exit_code != 0 and "Traceback" not in r.output, (command, r.output)
        assert isinstance(r.exception, (SystemExit, type(None))), (command, r.exception)


def test_merge_of_a_shard_lacking_a_task_is_one_line(tmp_path):
    base = ("run", "fake", "--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx",
            "8192", "--limit", "6")
    for k in (1, 2):
        assert invoke(*base, "--shard", f"{k}/2", "--out", tmp_path / f"s{k}").exit_code == 0
    path = tmp_path / "s2" / "results.json"
    doc = json.loads(path.read_text())
    dropped = sorted(doc["tasks"])[0]
    del doc["tasks"][dropped]  # (its manifest still names it)
    path.write_text(json.dumps(doc))
    line = one_line_error(invoke("merge", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "m"))
    assert f"lacks task(s) {dropped}" in line and not (tmp_path / "m").exists()


# -- item 7b: hard links are parsed once ----------------------------------------------------------------------
def test_hard_links_to_one_gguf_are_parsed_once(home, tmp_path, monkeypatch):
    from abricot_local.gguf import file as model_file

    folder = tmp_path / "links"
    folder.mkdir()
    first = folder / "m-000.gguf"
    first.write_bytes(GGUF + b"\x00" * 64)
    for k in range(1, 600):
        os.link(first, folder / f"m-{k:03d}.gguf")
    calls = []
    real = model_file.verify_gguf
    # (the folder's files only: `models --local` lists the registry's PyPI-shipped files too, parsed once a process)
    monkeypatch.setattr(model_file, "verify_gguf", lambda p: (folder in Path(p).parents and calls.append(p)) or real(p))
    r = invoke("models", "--local", "--model-dir", folder)
    assert r.exit_code == 0, r.output
    assert len([ln for ln in r.output.splitlines() if ln.startswith("model-dir")]) == 600
    assert len(calls) == 1 and "hashing 1 model file(s)" in r.output  # once, not 600 times
    (folder / "m-599.gguf").unlink()
    (folder / "m-599.gguf").write_bytes(GGUF)  # another file now: parsed on its own
    model_file.headers(folder / "m-599.gguf")
    assert len(calls) == 2
