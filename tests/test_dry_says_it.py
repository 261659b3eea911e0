"""The dry run says what the run will do. A registry model whose PyPI package is not installed: the run installs
nothing and refuses it, naming the package to install and the offline ways (a GGUF of the model put where the
registry looks, held to its pinned SHA-256; or the file's path); the dry run's file line says that refusal, in the
same words, where it once planned a `pip install` download. A task's notes (what preparing it did that a reader must
know: --sample beyond the task's items, data not the release) are shown by the dry run, text and JSON, as the run
warns them. Fake backend; the invented fixture's 18 items."""

from __future__ import annotations

import hashlib
import json
import re
import struct
from dataclasses import replace

import pytest
from click.testing import CliRunner

from abricot_local.cache import cache_dir
from abricot_local.cli import cli
from abricot_local.errors import IntegrityError
from abricot_local.models.locate import locate, resolve_model_ref
from abricot_local.tasks.abricot import AbricotTask
from abricot_local.tasks.abricot_data import RELEASE_SHA256
from conftest import FIXTURE

GGUF = b"GGUF" + struct.pack("<IQQ", 3, 0, 0) + bytes(range(256)) * 4  # a valid header: no tensors, no keys
ARGS = ("--backend", "fake", "--tasks", "abricot_abs", "--n-ctx", "8192", "--data", f"abricot={FIXTURE}")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def flat(text: str) -> str:
    """The output with its folding undone (a fold's line break and indent: one space)."""
    return re.sub(r"\s*\n\s*", " ", text)


def test_a_package_not_installed_is_planned_as_the_run_refusal_and_a_file_put_in_its_place_is_held_to_its_pin(
        tmp_path):
    models = tmp_path / "models.toml"
    models.write_text(f'[gone]\nsource = "pypi"\npackage = "gone-pkg"\nmodule = "gone_pkg_xyz"\nfile = "g.gguf"\n'
                      f'version = "1.0"\nsha256 = "{hashlib.sha256(GGUF).hexdigest()}"\n')
    args = ("run", "gone", "--models", models, *ARGS[2:], "--sample", "3")  # llama.cpp's backend: never loaded
    placed = cache_dir() / "models" / "g.gguf"
    dry, js, r = invoke(*args, "--dry-run"), invoke(*args, "--dry-run", "--json"), invoke(*args, "--out", tmp_path / "o")
    assert dry.exit_code == 0 and js.exit_code == 0 and r.exit_code != 0, (dry.output, r.output)
    refusal = flat(r.output).split("error: ", 1)[1].strip()
    for said in ('pip install "gone-pkg==1.0"', f"{placed} (held to the SHA-256 its entry pins)",
                 "abricot-local run /path/to/file.gguf"):
        assert said in refusal, refusal
    assert f"file:     not here, and the run refuses (it installs nothing): {refusal}" in flat(dry.output), dry.output
    assert "download:" not in dry.output and "download:" not in r.output  # no download planned, none announced
    download = json.loads(js.output)["models"][0]["download"]
    assert (download["run_fetches"], download["refused"], download["refused_offline"]) == (False, refusal, None)
    assert not (tmp_path / "o").exists()

    placed.parent.mkdir(parents=True)
    placed.write_bytes(GGUF[:-1] + b"x")  # not the file the entry pins: refused, left as it is
    with pytest.raises(IntegrityError, match="(?s)sha256 mismatch.*in place of the package gone-pkg, which is not"):
        resolve_model_ref("gone", models_file=models)
    assert placed.read_bytes() == GGUF[:-1] + b"x"
    placed.write_bytes(GGUF)  # the model's own file, offline: found, held to its SHA-256, used
    assert locate("gone", models_file=models).path == placed  # the dry run's file line: this file, here
    got = resolve_model_ref("gone", models_file=models)
    assert (got.path, got.sha256) == (placed, hashlib.sha256(GGUF).hexdigest())


def test_a_dry_run_shows_each_task_note_as_the_run_warns_it(tmp_path, monkeypatch):
    monkeypatch.setattr(AbricotTask, "data", replace(AbricotTask.data, release=(RELEASE_SHA256,)))  # the fixture: not
    args = ("run", "fake", *ARGS, "--sample", "5000")
    dry, js, r = invoke(*args, "--dry-run"), invoke(*args, "--dry-run", "--json"), invoke(*args, "--out", tmp_path / "o")
    assert r.exit_code == 0 and dry.exit_code == 0 and js.exit_code == 0, (r.output, dry.output)
    notes = json.loads(js.output)["models"][0]["tasks"][0]["notes"]
    assert notes == json.loads((tmp_path / "o" / "results.json").read_text())["tasks"]["abricot_abs"]["warnings"]
    assert len(notes) == 2 and all(f"warning: abricot_abs: {note}" in flat(r.stderr) for note in notes), r.stderr
    assert notes[1] == "--sample 5000 asks for more items than the task has: all 18 are scored"
    assert notes[0].startswith(f"data {FIXTURE} is not the release (sha256")
    for note in notes:
        assert f"warning: {note}" in flat(dry.output), dry.output
