"""A finished run's --resume needs no model file (run.plan.make_plan, as it needs no data): where the run a --resume
finds finished is one the request does not grow, and the model's file is not here (a path gone, a registry model
not downloaded, a local entry's file gone, a hub name no longer in its store), nothing is fetched and the plan's model SHA-256 is the record's, so the resume still compares its
config and data; said once. A file here is hashed and compared as ever (a changed one refused); a grow and a
--margin judged again still need the model."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local import backends
from abricot_local.cli import cli
from gguf_synth import Synth
from invented_data import write_discotex
import test_dry_agrees

scored = test_dry_agrees.scored  # the fixture: the models each run loads, scored by the fake backend
TAKEN = "its model file is not here: the finished run is taken as recorded"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def said(r) -> str:
    return " ".join(r.output.split())


def test_a_path_gone_resumes_its_finished_run_as_recorded_in_a_sweep_and_alone(tmp_path, scored, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m2").mkdir()
    Synth().write(tmp_path / "m2" / "g.gguf")
    (tmp_path / "models.toml").write_text('[fake2]\nbackend = "fake"\n', encoding="utf-8")
    data = write_discotex(tmp_path / "d", 4)
    args = ("--models", "models.toml", "--tasks", "discotex", "--data-dir", data, "--limit", 2)
    r = invoke("run", "m2/g.gguf", "fake2", *args, "--out", "swg")
    assert r.exit_code == 0 and scored == ["g", "fake2"], r.output
    held = (tmp_path / "swg" / "g" / "results.json").read_bytes()
    (tmp_path / "m2" / "g.gguf").unlink()
    r = invoke("run", "m2/g.gguf", "fake2", *args, "--out", "swg", "--resume")
    assert r.exit_code == 0, r.output
    assert said(r).count(TAKEN) == 1 and "error" not in r.output, r.output
    assert "comparison of 2 model(s) in swg" in r.output and "swg/g " in r.output, r.output  # (not dropped)
    alone = invoke("run", "m2/g.gguf", *args, "--out", "swg/g", "--resume")
    assert alone.exit_code == 0 and said(alone).count(TAKEN) == 1, alone.output
    assert scored == ["g", "fake2"] and (tmp_path / "swg" / "g" / "results.json").read_bytes() == held


def test_a_file_here_is_still_hashed_and_a_grow_still_needs_it(tmp_path, scored, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m").mkdir()
    Synth().write(tmp_path / "m" / "g.gguf")
    data = write_discotex(tmp_path / "d", 4)
    args = ("run", "m/g.gguf", "--tasks", "discotex", "--data-dir", data, "--out", "o")
    assert invoke(*args, "--sample", 2).exit_code == 0 and scored == ["g"]
    Synth(fill=b"\x02").write(tmp_path / "m" / "g.gguf")  # another file in its place: refused as ever
    r = invoke(*args, "--sample", 2, "--resume")
    given = hashlib.sha256((tmp_path / "m" / "g.gguf").read_bytes()).hexdigest()[:12]
    assert r.exit_code != 0 and "its model file differs from the recorded run" in r.output and given in r.output
    assert TAKEN not in said(r), r.output
    (tmp_path / "m" / "g.gguf").unlink()
    r = invoke(*args, "--sample", 3, "--resume")  # a grow scores new items: it needs the model
    assert r.exit_code != 0 and "model file not found: m/g.gguf" in r.output and TAKEN not in said(r), r.output
    assert scored == ["g"]


def test_a_registry_model_not_downloaded_is_not_fetched_to_confirm_its_finished_run(tmp_path, scored, monkeypatch):
    from abricot_local.models.sources import Hub

    Synth().write(tmp_path / "h.gguf")
    fetched = []

    def fetch(self, spec, **_):
        fetched.append(spec.name)
        return tmp_path / "h.gguf"

    monkeypatch.setattr(Hub, "fetch", fetch)  # (never in the cache: Hub.local_file finds none)
    models = tmp_path / "models.toml"
    models.write_text('[hm]\nsource = "hf"\nrepo = "org/H-GGUF"\nrevision = "' + "a" * 40 + '"\nfile = "h.gguf"\n'
                      'quant = "Q8_0"\n', encoding="utf-8")
    data = write_discotex(tmp_path / "d", 4)
    args = ("run", "hm", "--models", models, "--tasks", "discotex", "--data-dir", data, "--limit", 2, "--force",
            "--out", tmp_path / "o")
    assert invoke(*args).exit_code == 0 and fetched and scored == ["hm"]
    n = len(fetched)
    held = (tmp_path / "o" / "results.json").read_bytes()
    r = invoke(*args, "--resume")
    assert r.exit_code == 0 and said(r).count(TAKEN) == 1, r.output
    assert len(fetched) == n and scored == ["hm"] and (tmp_path / "o" / "results.json").read_bytes() == held
    r = invoke(*args[:-4], "--limit", 3, "--force", "--out", tmp_path / "o", "--resume")  # other options: refused
    assert r.exit_code != 0 and "limit" in r.output and len(fetched) == n, r.output


def test_a_local_entry_gone_is_taken_as_recorded_but_not_judged_again_at_another_margin(tmp_path, scored):
    from conftest import FIXTURE

    Synth().write(tmp_path / "g.gguf")
    models = tmp_path / "models.toml"
    models.write_text('[g]\nsource = "local"\npath = "g.gguf"\nquant = "Q8_0"\n'
                      'reproduces = "ABRICOT paper: llama-3.1-8b"\n', encoding="utf-8")
    args = ("run", "g", "--models", models, "--tasks", "abricot_abs", "--n-ctx", 8192, "--data",
            f"abricot={FIXTURE}", "--sample", 2, "--out", tmp_path / "o")
    r = invoke(*args)
    assert r.exit_code == 0 and scored == ["g"], r.output
    (tmp_path / "g.gguf").unlink()
    r = invoke(*args, "--resume", "--margin", 0.05)  # its verdict judged again: the model needed
    assert r.exit_code != 0 and "file not found" in r.output and TAKEN not in said(r), r.output
    r = invoke(*args, "--resume")
    assert r.exit_code == 0 and said(r).count(TAKEN) == 1 and scored == ["g"], r.output


def test_a_model_taken_as_recorded_is_never_loaded():
    from abricot_local.errors import ModelError
    from abricot_local.models.given import load
    from abricot_local.hashing import RECORDED
    from abricot_local.models.ref import ModelRef

    ref = ModelRef("m/g.gguf", "path", "fake", "g", path=Path("m/g.gguf"), sha256="0" * 64, sha256_origin=RECORDED)
    with pytest.raises(ModelError, match="its file is not here"):
        load(ref, backends.backend_options("fake", {}))


def test_a_hub_name_no_longer_in_its_store_is_taken_as_recorded(tmp_path, scored, monkeypatch):
    from abricot_local.errors import ModelError
    from abricot_local.models import stores

    Synth().write(tmp_path / "h.gguf")
    held = [stores.Found(tmp_path / "h.gguf", "hf", "h")]  # in the cache for the run, gone for its --resume

    def where(name, **_):
        if not held:
            raise ModelError(f"{name} is not in the cache")
        return held[0]

    monkeypatch.setattr(stores, "locate", where)
    args = ("run", "hf:org/H-GGUF/h.gguf", "--tasks", "discotex", "--data-dir", write_discotex(tmp_path / "d", 4),
            "--limit", 2, "--out", tmp_path / "o")
    assert invoke(*args).exit_code == 0 and scored == ["h"]
    held.clear()
    r = invoke(*args, "--resume")
    assert r.exit_code == 0 and said(r).count(TAKEN) == 1 and scored == ["h"], r.output
