"""A sweep's wrong `sha256` is found before its first item is scored (hob review: a ladder's Q8_0 pinned wrong was
refused only after its F16 rung had been scored in full). A sweep's plan holds every model file that is here to its
models.toml pin (run.plan.make_plan: a ladder, an --until-settled ladder, a list of models), so its first plan names
the entry to fix, as the late refusal does; the hash is remembered, so each later check reads nothing more. A dry
run hashes nothing: a hash remembered from an earlier run that contradicts the pin refuses the sweep, as its run does."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from abricot_local import hashing
from abricot_local.cli import cli
from abricot_local.errors import IntegrityError
from abricot_local.run import execute
from abricot_local.run.plan import make_plan
from abricot_local.run.request import request_of
from gguf_synth import Synth, kv
from invented_data import write_discotex

F16, Q8_0 = 1, 7  # llama.cpp's llama_ftype


def ladder(tmp_path: Path, wrong: tuple[str, ...] = ("t-q8",), more: str = "") -> Path:
    """Two local rungs of base "t" (F16, Q8_0), each pinned to its file's SHA-256 but those in ``wrong``."""
    text = ""
    for alias, ftype, quant in (("t-f16", F16, "F16"), ("t-q8", Q8_0, "Q8_0")):
        s = Synth()
        s.kvs.append(kv("general.file_type", "u32", ftype))
        sha = hashlib.sha256(s.write(tmp_path / f"{alias}.gguf").read_bytes()).hexdigest()
        sha = "0" * 8 + sha[8:] if alias in wrong else sha
        text += (f'["{alias}"]\nsource = "local"\npath = "{alias}.gguf"\nsha256 = "{sha}"\nquant = "{quant}"\n'
                 'base = "t"\n\n')
    toml = tmp_path / "models.toml"
    toml.write_text(text + more, encoding="utf-8")
    return toml


def reads(monkeypatch) -> list[int]:
    """Counts every SHA-256 computed from a file's bytes (hashing.file_digest's: hashing's one use of hashlib)."""
    made = []
    monkeypatch.setattr(hashing, "hashlib", SimpleNamespace(sha256=lambda: made.append(1) or hashlib.sha256()))
    return made


@pytest.mark.parametrize("how", [["t-f16", "--quants", "F16,Q8_0"],
                                 ["t-f16", "--quants", "F16,Q8_0", "--until-settled", "--max-items", "8"],
                                 ["t-f16", "t-q8"]])
def test_a_sweeps_wrong_pin_is_refused_before_its_first_model_runs(tmp_path, monkeypatch, how):
    toml, data, out = ladder(tmp_path), write_discotex(tmp_path / "d", 4), tmp_path / "out"
    ran = []  # the models loaded to score their items
    monkeypatch.setattr(execute, "open_backend", lambda plan, **k: ran.append(plan.model_label) or 1 / 0)
    r = CliRunner().invoke(cli, ["run", *how, "--models", str(toml), "--tasks", "discotex", "--data-dir", str(data),
                                 "--out", str(out)])
    assert ran == [] and r.exit_code == 2 and not out.exists(), (ran, r.output)
    assert "model 't-q8': sha256 mismatch" in r.output and f"[t-q8] in {toml}" in r.output, r.output
    assert "fix `sha256` there" in r.output and "[t-f16]" not in r.output, r.output


def test_every_wrong_pin_is_named_and_a_file_to_download_is_left_to_its_download(tmp_path):
    hub = '["t-hub"]\nrepo = "someone/t-GGUF"\nrevision = "' + "0" * 40 + '"\nfile = "t.gguf"\nbase = "t"\n'
    toml = ladder(tmp_path, ("t-f16", "t-q8"), more=hub)
    request = request_of(["t-hub", "t-f16", "nowhere", "t-q8"], models_file=str(toml), listed=True)
    with pytest.raises(IntegrityError) as err:  # the hub entry's plan: nothing downloaded, the files here held first
        make_plan(request, "t-hub", tasks=False)
    said = err.value.raw().splitlines()
    assert len(said) == 2 and "[t-f16]" in said[0] and "[t-q8]" in said[1], said


def test_each_file_is_hashed_once_the_models_own_check_reads_nothing(tmp_path, monkeypatch):
    toml = ladder(tmp_path, wrong=())
    made, request = reads(monkeypatch), request_of(["t-f16", "t-q8"], models_file=str(toml), listed=True)
    assert make_plan(request, "t-f16", tasks=False).model_sha256 == hashing.remembered(tmp_path / "t-f16.gguf")
    assert len(made) == 2 and hashing.remembered(tmp_path / "t-q8.gguf")  # the sweep's first plan: both held
    assert make_plan(request, "t-q8", tasks=False).model_sha256 == hashing.remembered(tmp_path / "t-q8.gguf")
    assert len(made) == 2  # the next plan, its own fetch's check included: nothing read


def test_the_dry_run_hashes_nothing_and_says_a_remembered_hash_against_the_pin(tmp_path):
    toml, data = ladder(tmp_path), write_discotex(tmp_path / "d", 4)
    args = ["run", "t-f16", "--quants", "F16,Q8_0", "--models", str(toml), "--tasks", "discotex", "--data-dir",
            str(data), "--dry-run"]
    r = CliRunner().invoke(cli, args)
    files = [tmp_path / "t-f16.gguf", tmp_path / "t-q8.gguf"]
    assert "sha256 mismatch" not in r.output, r.output  # not hashed (hashing.py remembers what it hashed)
    assert [hashing.remembered(f) for f in files] == [None, None]
    hashing.sha256_file(files[1])  # hashed by an earlier run: remembered
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2 and hashing.remembered(files[0]) is None, r.output  # the sweep refused, as its run is
    assert "error: model 't-q8': sha256 mismatch" in r.output and "cannot be planned" not in r.output, r.output
    r = CliRunner().invoke(cli, args[:1] + ["t-q8"] + args[4:])  # one model: refused, as its run is
    assert r.exit_code == 2 and "sha256 mismatch" in r.output and f"[t-q8] in {toml}" in r.output, r.output
