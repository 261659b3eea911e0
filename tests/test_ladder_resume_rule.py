"""A `run MODEL --quants Q,Q --until-settled` ladder holds each model's finished run that holds its look already to the
rule a model's run holds its folder to, where it first meets it (run/settle_sweep.py: its run asked for at the items it
holds; a rung's, settle.Rule.finished): with --resume, a run of other options is refused in the words of the model's
own --resume (the reference's ends the ladder, a rung's is that rung's error, the others go on); without, the folder
is refused as a run refuses one holding a finished run. Before, a folder holding the look was never run: the old runs
were taken as the command's, exit 0. Fake backend, in-process; one small ladder made once, copied per test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import fake_quants
from invented_data import write_discotex

MODELS = ("fake-q2", "fake-q4", "fake-q8")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(models.toml, data, a --max-items 20 ladder of three quants at the default seed, 1234)."""
    from conftest import isolated_env

    root = tmp_path_factory.mktemp("ladder_resume_rule")
    data = write_discotex(root / "discotex", per_source=60)
    models = fake_quants(root / "models.toml", {f"fake-{q[:2].lower()}": q for q in ("Q2_K", "Q4_K_M", "Q8_0")})
    with pytest.MonkeyPatch.context() as mp:  # as isolated_home, for a run shared past its test
        for name, value in isolated_env(root).items():
            mp.setenv(name, value)
        mp.chdir(root)
        r = CliRunner().invoke(cli, ladder(models, data, root / "lad"))
    assert r.exit_code == 0, r.output
    return models, data, root / "lad"


def ladder(models, data, out, *more) -> list[str]:
    return [str(a) for a in ("run", "fake-q2", "--quants", "Q2_K,Q4_K_M,Q8_0", "--models", models, "--backend", "fake",
                             "--tasks", "discotex", "--n-ctx", "4096", "--data-dir", data, "--until-settled",
                             "--max-items", 20, *more, "--out", out)]


def held(out: Path) -> dict[str, bytes]:
    return {m: (out / m / "results.json").read_bytes() for m in MODELS}


def test_a_ladder_resumed_with_another_seed_refuses_the_references_run_as_its_own_resume_does(made, tmp_path):
    models, data, lad = made
    out = shutil.copytree(lad, tmp_path / "lad")
    before = held(out)
    own = CliRunner().invoke(cli, ["run", "fake-q8", "--models", str(models), "--backend", "fake", "--tasks",
                                   "discotex", "--n-ctx", "4096", "--data-dir", str(data), "--sample", "20",
                                   "--out", str(out / "fake-q8"), "--seed", "9", "--resume"])  # its own --resume
    why = own.output.strip()
    assert own.exit_code == 2 and "--seed: recorded 1234, given 9" in why, own.output
    r = CliRunner().invoke(cli, ladder(models, data, out, "--seed", "9", "--resume"))
    assert r.exit_code == 2 and why in r.output and "== look at" not in r.output, r.output  # before any model runs
    assert held(out) == before and json.loads(before["fake-q2"])["config"]["seed"] == 1234


def test_a_rungs_run_of_other_options_is_that_rungs_error_and_the_others_go_on(made, tmp_path):
    """The Q2_K rung's record says --seed 9 (as a ladder run with it records it); the ladder resumed at the default
    seed refuses it as that rung's error, and takes the others' runs."""
    models, data, lad = made
    out = shutil.copytree(lad, tmp_path / "lad")
    path = out / "fake-q2" / "results.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["config"]["seed"] = doc["manifest"]["config"]["seed"] = 9
    path.write_text(json.dumps(doc), encoding="utf-8")
    before = held(out)
    r = CliRunner().invoke(cli, ladder(models, data, out, "--resume"))
    assert r.exit_code == 1, r.output
    said = [ln for ln in r.output.splitlines() if ln.startswith("error: ")]
    assert said == [f"error: fake-q2: cannot resume {out / 'fake-q2'}: its config differs from the recorded run "
                    "(--seed: recorded 9, given 1234); the same options are needed"], r.output
    shown = r.output.split("1 model(s) failed:")
    assert len(shown) == 2 and "fake-q4" in shown[0] and "fake-q4" not in shown[1], r.output
    assert held(out) == before


def test_a_ladder_without_resume_refuses_a_folder_holding_a_finished_run_as_a_run_does(made, tmp_path):
    models, data, lad = made
    out = shutil.copytree(lad, tmp_path / "lad")
    before = held(out)
    r = CliRunner().invoke(cli, ladder(models, data, out, "--seed", "9"))
    assert r.exit_code == 2, r.output
    assert f"{out / 'fake-q8'} already holds a finished run; choose another --out (--resume would not take it: its " \
           "config differs from the recorded run (--seed: recorded 1234, given 9)" in r.output, r.output
    r = CliRunner().invoke(cli, ladder(models, data, out))  # the same options: --resume offered
    assert r.exit_code == 2 and "already holds a finished run; choose another --out (or --resume to reuse it)" in \
        r.output, r.output
    assert held(out) == before
