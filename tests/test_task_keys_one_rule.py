"""The tasks a run resolved, one rule each: the task keys a config records (record.settings.task_keys) and the tasks
those keys name (tasks.base_names), used by the command line's and the API's advice alike: the API's grow and
until-settled calls name ``tasks=`` where the call named none, as `run`'s printed commands add --tasks. A sweep stopped
while its next model is planned counts, and names the tasks of, only the finished runs of the folders it named
(run.session.Folders.finished), never another run lying in its folder. Fake backend, pure records."""

from __future__ import annotations

import json
import shlex
import sys
import types
import warnings
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from abricot_local.analysis import sequential as sq
from abricot_local.analysis.settled import record_of
from abricot_local.api import calls
from abricot_local.cli import cli
from abricot_local.cli.run import grow_command
from abricot_local.record.schema import SCHEMA_VERSION, Model, Record, RunConfig, TaskEntry
from abricot_local.record.settings import task_keys
from abricot_local.run import plan as run_plan
from abricot_local.tasks import base_names
from invented_data import write_discotex

KEYS = ("discotex~card", "abricot_abs@calamita", "discotex")


def test_the_keys_a_config_records_and_the_tasks_they_name():
    assert task_keys(None) == () and task_keys(RunConfig()) == () and task_keys(RunConfig(tasks=KEYS)) == KEYS
    assert base_names(KEYS) == ("discotex", "abricot_abs") and base_names(()) == ()


def test_the_apis_grow_call_names_the_tasks_where_the_call_named_none_as_the_command_line_does(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["abricot-local", "run", "m", "--sample", "10", "--out", "o"])
    for sample in (10, None):  # a --sample run grown in its folder, a --limit run drawn anew
        config = types.SimpleNamespace(sample=sample, tasks=KEYS)
        said = shlex.split(grow_command(Path("o"), 20, config))
        assert said[said.index("--tasks") + 1] == "discotex,abricot_abs"
        assert "tasks=['discotex', 'abricot_abs'], " in calls._grow_hint(Path("o"), 20, config)
        assert "tasks=" not in calls._grow_hint(Path("o"), 20, config, pin=False)  # the call named its own


def _open_settled_run() -> Record:
    """A run --until-settled stopped at --max-items 40 with its verdict open, its config recording ``KEYS``."""
    name = sq.question_name("PAPER", "paper-model", "discotex", "accuracy")
    state = sq.start(1600, [sq.Question(name, "accuracy", 0.02, published=0.5)], max_items=40)
    right = np.array([1, 0] * 20)
    for n in state.planned:
        state = sq.look(state, n, {name: [right[:n], np.ones(n, int)]})
    return Record(schema_version=SCHEMA_VERSION, model=Model(name="m"),
                  config=RunConfig(tasks=KEYS, sample=40, max_items=40, until_settled=True),
                  tasks={"discotex": TaskEntry(metrics={}, n=40, sequential=record_of(state))})


def test_the_apis_until_settled_call_names_the_tasks_where_the_call_named_none(tmp_path):
    outcome = types.SimpleNamespace(record=_open_settled_run())
    done = types.SimpleNamespace(outcome=outcome, within=None, folder=tmp_path)
    for pin in (True, False):
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            calls._advise(done, pin=pin)
        call = [str(w.message) for w in said if "until_settled=True, max_items=" in str(w.message)]
        assert len(call) == 1 and ("tasks=['discotex', 'abricot_abs'], out=" in call[0]) == pin, call


def test_a_sweep_stopped_as_its_next_model_is_planned_counts_only_its_own_finished_runs(tmp_path, monkeypatch):
    data = write_discotex(tmp_path / "d", 4)
    sw = tmp_path / "sw"
    args = ["run", "fake-a", "fake-b", "--backend", "fake", "--data-dir", str(data), "--out", str(sw)]
    monkeypatch.setattr(sys, "argv", ["abricot-local", *args])
    make_plan = run_plan.make_plan

    def stopped_at_b(request, model=None, **kw):
        if model == "fake-b":  # another run's folder lies in the sweep's (first by name), of another task
            doc = json.loads((sw / "fake-a" / "results.json").read_text())
            doc["config"]["tasks"] = ["abricot_abs@calamita"]
            (sw / "aaa").mkdir()
            (sw / "aaa" / "results.json").write_text(json.dumps(doc))
            raise KeyboardInterrupt
        return make_plan(request, model, **kw)

    monkeypatch.setattr(run_plan, "make_plan", stopped_at_b)
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 130 and f"the sweep in {sw} holds 1 finished run(s)" in r.output, r.output
    again = shlex.split(r.output[r.output.index("resume with: ") + len("resume with: "):].splitlines()[0])
    assert again[again.index("--tasks") + 1] == "discotex" and again[-1] == "--resume", again
