"""A `run MODEL --quants Q,Q --until-settled --resume` that meets a model whose folder holds the look already is never
silent (run/settle_sweep.py): each such model is said kept as it is, nothing scored; and a rung whose verdict against
the reference would be kept at another margin than the ladder's --margin is refused as that rung's error, in one line
naming the margin and what to run (a fixed-n rung: judged at each task's declared margin; a rung --until-settled: its
looks were read at its own, as a single run --until-settled is not judged again: run.found.rejudged). Before, a finished
`--sample 20` ladder resumed with --until-settled --margin 0.2 said nothing, exit 0, its keep line at 0.02. Fake
backend, in-process; one small fixed-n ladder made once, copied per test."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import fake_quants
from invented_data import write_discotex


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(models.toml, data, a plain --sample 20 ladder of fake-q8 and fake-q2)."""
    from conftest import isolated_env

    root = tmp_path_factory.mktemp("ladder_resume_rule_71")
    data = write_discotex(root / "discotex", per_source=30)
    models = fake_quants(root / "models.toml", {"fake-q8": "Q8_0", "fake-q2": "Q2_K"})
    with pytest.MonkeyPatch.context() as mp:
        for name, value in isolated_env(root).items():
            mp.setenv(name, value)
        mp.chdir(root)
        r = CliRunner().invoke(cli, args(models, data, root / "lad", "--sample", 20))
    assert r.exit_code == 0, r.output
    return models, data, root / "lad"


def args(models, data, out, *more) -> list[str]:
    return [str(a) for a in ("run", "fake-q8", "--quants", "Q8_0,Q2_K", "--models", models, "--backend", "fake",
                             "--tasks", "discotex", "--n-ctx", "4096", "--data-dir", data, *more, "--out", out)]


def resumed(made, tmp_path, *more):
    models, data, lad = made
    out = shutil.copytree(lad, tmp_path / "lad")
    before = {m: (out / m / "results.json").read_bytes() for m in ("fake-q8", "fake-q2")}
    r = CliRunner().invoke(cli, args(models, data, out, "--until-settled", "--looks", "10,20", "--max-items", 20,
                                     *more, "--resume"))
    assert before == {m: (out / m / "results.json").read_bytes() for m in ("fake-q8", "fake-q2")}  # nothing written
    return out, r


def test_a_fixed_n_ladder_resumed_until_settled_at_another_margin_is_refused_in_one_line(made, tmp_path):
    out, r = resumed(made, tmp_path, "--margin", 0.2)
    assert r.exit_code == 1, r.output
    said = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
    assert said == [f"error: fake-q2: {out / 'fake-q2'} holds fake-q2's fixed-n run (--sample 20: no rule of "
                    "--until-settled): its verdict against fake-q8 is judged at each task's declared margin, not "
                    "again at --margin 0.2; run the ladder anew with --until-settled --margin 0.2 in another --out"], \
        r.stderr
    assert f"fake-q8: the run in {out / 'fake-q8'} holds 20 items already" in r.stderr  # the reference: said too


def test_a_fixed_n_ladder_resumed_until_settled_without_a_margin_says_each_model_kept(made, tmp_path):
    out, r = resumed(made, tmp_path)
    assert r.exit_code == 0, r.output
    for model in ("fake-q8", "fake-q2"):
        assert f"{model}: the run in {out / model} holds 20 items already" in r.stderr, r.stderr
    assert "== look at" not in r.stderr and "error" not in r.stderr, r.stderr


def test_a_fixed_n_ladder_resumed_at_the_tasks_own_margin_keeps_each_model(made, tmp_path):
    """--margin 0.02, DISCOTEX's declared accuracy margin, the one the fixed-n verdicts were judged at: kept, as with
    none (the senior read's case: it was refused, naming the margin it was judged at)."""
    out, r = resumed(made, tmp_path, "--margin", 0.02)
    assert r.exit_code == 0, r.output
    for model in ("fake-q8", "fake-q2"):
        assert f"{model}: the run in {out / model} holds 20 items already" in r.stderr, r.stderr
    assert "error" not in r.stderr, r.stderr
