"""The published verdict of a recorded run made again and diffed against its record: one function
(analysis.overview.published_differences) for `check` (run/held.py: the rows the model's registry entry names,
each task's items rebuilt from its data, the block's own fields too) and `report --verify`
(overview.verdict_differences: the rows recorded, the checks alone). Fake backend; the invented ABRICOT rows."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from abricot_local.analysis.baselines import base_name
from abricot_local.analysis.loading import load_run
from abricot_local.analysis.overview import (VerdictTask, published_differences, reproduced_tasks,
                                             verdict_differences)
from abricot_local.cli import cli
from conftest import FIXTURE

LINE = "published.checks[0] (llama-3.1-8b, abricot_abs.pearson) verdict: recorded "


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A finished fake run of ABRICOT abs under a registry entry reproducing the paper's row."""
    root = tmp_path_factory.mktemp("h1pub")
    models = root / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n')
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}", "--tasks",
                   "abricot_abs", "--n-ctx", 8192, "--out", root / "abricot")
        assert r.exit_code == 0, r.output
    return root / "abricot"


def _edited(made, tmp_path, change):
    run = tmp_path / "run"
    shutil.copytree(made, run)
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    change(doc["published"])
    (run / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    return run


def _tasks(run):
    rec = run.record.published
    return [VerdictTask(t.name, t.instance(), tuple(t.samples), t.entry.n) for t in run.run_tasks
            if base_name(t.name) in reproduced_tasks(rec.reproduces)]


def test_the_run_as_written_has_no_difference(made):
    run = load_run(made)
    assert reproduced_tasks(run.record.published.reproduces) == {"abricot_abs", "abricot_inc"}
    assert reproduced_tasks(None) == frozenset()
    assert len(_tasks(run)) == 1 and verdict_differences(run) == ()
    assert published_differences(run.record, run.record.published.reproduces, _tasks(run), block=True) == ()


def test_an_edited_verdict_is_the_same_line_for_check_and_verify(made, tmp_path):
    def change(pub):
        c = pub["checks"][0]
        c["verdict"] = "differs" if c["verdict"] != "differs" else "reproduced"
    run = _edited(made, tmp_path, change)
    (line,) = verdict_differences(load_run(run))
    assert line.startswith(LINE) and "made again" in line
    checked = invoke("check", run)
    assert checked.exit_code == 1 and line in checked.output
    verified = invoke("report", run, "--verify")
    assert verified.exit_code == 1 and f"published verdict differs: {run} {line}" in verified.output


def test_the_blocks_own_fields_are_held_by_check_alone(made, tmp_path):
    """An edited ``tasks_not_run``: `check` (block=True) names it; `report --verify` holds the checks only, as
    it did before the two were one function."""
    run = _edited(made, tmp_path, lambda pub: pub.update(tasks_not_run=["abricot_abs"]))
    r = load_run(run)
    assert verdict_differences(r) == ()
    assert published_differences(r.record, r.record.published.reproduces, _tasks(r), block=True) == (
        'published.tasks_not_run: recorded ["abricot_abs"], made again ["abricot_inc"]',)
    checked = invoke("check", run)
    assert checked.exit_code == 1 and 'published.tasks_not_run: recorded ["abricot_abs"], made again' in checked.output
    assert invoke("report", run, "--verify").exit_code == 0
