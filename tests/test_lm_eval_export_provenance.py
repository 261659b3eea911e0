"""A run exported in lm-eval's layout carries its provenance as `abricot-local lm-eval` writes it
(``config.abricot_local``: the model, the config, the backend's record), so that the export read back is the
run it came from: the same model, backend, options and kernels, and `compare` of the two names no recorded
setting that differs. The export is the same bytes from `Run.to_lm_eval` and `report --format lm-eval`.
"""

from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import FIXTURE

import abricot_local
from abricot_local.analysis.differing import differing_settings
from abricot_local.cli import cli

# the fake run test_hostile_files.py and test_output_paths.py share (finished_run makes it once a session)
FAKE = ("--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "4")


def test_an_export_reads_back_as_the_run_it_came_from(finished_run, tmp_path):
    run_dir = finished_run("run", "fake", *FAKE)  # read only
    run = abricot_local.load_run(run_dir)
    where = run.to_lm_eval(tmp_path / "api")
    r = CliRunner().invoke(cli, ["report", str(run_dir), "--format", "lm-eval", "-o", str(tmp_path / "cli")])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "cli" / where.name).iterdir()) == sorted(p.name for p in where.iterdir())
    for p in where.iterdir():
        assert (tmp_path / "cli" / where.name / p.name).read_bytes() == p.read_bytes(), p.name
    (results,) = where.glob("results_*.json")
    own = json.loads(results.read_text(encoding="utf-8"))["config"]["abricot_local"]
    assert own["model"] == run.record.model.to_dict() and own["config"]["n_ctx"] == 8192
    assert own["backend"] == "fake" and own["schedule"] == run.record.provenance.schedule

    back = abricot_local.load_run(where, data={"abricot": str(FIXTURE)})
    assert back.record.model == run.record.model
    assert back.record.config.backend == back.record.provenance.backend == "fake"
    assert back.record.config.to_dict() == run.record.config.to_dict()  # n_ctx, engine, the task options as given
    assert back.kernels == run.kernels and back.label == run.label
    assert back.settings == run.settings
    assert differing_settings(run, back) == ()
    cmp = abricot_local.compare(run, back)
    assert cmp.verdicts and {v.kind for v in cmp.verdicts} == {"identical"}, [v.line for v in cmp.verdicts]
