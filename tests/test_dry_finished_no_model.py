"""The dry run of a finished run's --resume says what the run does when the model file is not here (run.plan._located,
the run's own rule: the finished run found, the model taken as recorded): its folder holds the run, complete, nothing
to score (its items saved, left out), with the run's note, at no cost and nothing read (run.dry_run.model_cost), in a
sweep as alone, as text and as JSON; a resume of other options refused as the run refuses it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from abricot_local import backends
from abricot_local.cli import cli
from abricot_local.run import calibration, execute
from abricot_local.run.cost import CALIBRATED, Speed
from gguf_synth import Synth
from invented_data import write_discotex

TAKEN = "its model file is not here: the finished run is taken as recorded"
SPEED = Speed(1e-3, 0.0, 1e-2, 2e-3, 1.0, CALIBRATED, "m", "2026-12-05T00:00:00+00:00")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def said(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def gone(tmp_path, monkeypatch):
    """A sweep of m2/g.gguf (scored by the fake backend: its file is a header only) and fake2 run to the end in swg,
    then m2/g.gguf removed; the arguments that ran it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(execute, "open_backend", lambda plan, **_: backends.open_backend(
        "fake", plan.model_label, backends.backend_options("fake", {})))
    (tmp_path / "m2").mkdir()
    Synth().write(tmp_path / "m2" / "g.gguf")
    (tmp_path / "models.toml").write_text('[fake2]\nbackend = "fake"\n', encoding="utf-8")
    args = ("--models", "models.toml", "--tasks", "discotex", "--data-dir", write_discotex(tmp_path / "d", 4),
            "--limit", 2)
    r = invoke("run", "m2/g.gguf", "fake2", *args, "--out", "swg")
    assert r.exit_code == 0, r.output
    (tmp_path / "m2" / "g.gguf").unlink()
    return args


def test_a_sweeps_dry_run_says_its_finished_run_taken_as_recorded(gone, monkeypatch):
    monkeypatch.setattr(calibration, "speed_for", lambda *a, **k: SPEED)  # fake2 timed: the totals are numbers
    r = invoke("run", "m2/g.gguf", "fake2", *gone, "--out", "swg", "--resume", "--dry-run")
    assert r.exit_code == 0 and "cannot be planned" not in r.output and "not found" not in r.output, r.output
    assert said(r.stderr).count(f"resume: m2/g.gguf: {TAKEN}") == 1, r.stderr  # the run's note, said once
    row = next(line for line in r.stdout.splitlines() if line.startswith("g "))
    assert row.split()[1:4] == ["discotex", "0", "none"] and row.endswith("2 saved in --out, left out"), r.stdout
    assert f"file: {TAKEN}: nothing to load, nothing to score" in said(r.stdout), r.stdout
    fake2 = next(line for line in r.stdout.splitlines() if line.startswith("fake2 "))
    assert "discotex" in fake2 and "total:" in r.stdout and "(a model has no speed yet" not in r.stdout, r.stdout
    assert "instead: every item: ?" in r.stdout, r.stdout  # (every item would need its file: no time said)
    r = invoke("run", "m2/g.gguf", "fake2", *gone, "--out", "swg", "--resume", "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    g, f = json.loads(r.stdout)["models"]
    assert g["recorded"] == TAKEN and g["seconds"] == 0.0 and g["problem"] is None and g["path"] is None
    assert [(t["task"], t["items"], t["problem"]) for t in g["tasks"]] == [("discotex", 0, None)]
    assert f["recorded"] is None and f["seconds"] is not None and g["memory"] is None and g["speed"] is None


def test_one_models_dry_run_says_it_and_refuses_other_options_as_the_run(gone):
    r = invoke("run", "m2/g.gguf", *gone, "--out", "swg/g", "--resume", "--dry-run")
    assert r.exit_code == 0 and said(r.stderr).count(TAKEN) == 1, r.output
    assert "2 saved in --out, left out" in r.stdout and f"file: {TAKEN}" in said(r.stdout), r.stdout
    doc = json.loads(invoke("run", "m2/g.gguf", *gone, "--out", "swg/g", "--resume", "--dry-run", "--json").stdout)
    assert [m["recorded"] for m in doc["models"]] == [TAKEN] and doc["seconds"] == 0.0, doc
    assert [t["items"] for t in doc["models"][0]["tasks"]] == [0], doc
    args = ("m2/g.gguf", *gone[:-2], "--sample", 3, "--out", "swg/g", "--resume")  # other options: refused alike
    dry, run = invoke("run", *args, "--dry-run"), invoke("run", *args)
    assert dry.exit_code == run.exit_code != 0 and "--sample: recorded none, given 3" in dry.output, dry.output
    assert dry.output.splitlines()[-1] == run.output.splitlines()[-1], (dry.output, run.output)
