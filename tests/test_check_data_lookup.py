"""`check` finds a recorded run's data as `run` does: `--data-dir DIR` each task's DIR/KEY/ (then DIR), `--data
TASK=PATH` for one task (data from two folders), then the recorded paths; a relative recorded path (data, model)
is said to be relative to the folder the run was started from. Fake backend, invented data, one item re-scored."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.errors import ResultsError
from abricot_local.record import read_run
from conftest import FIXTURE
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A fake run of abricot_abs (its file given with --data) and discotex (--data-dir DIR: DIR/discotex/), started
    in ``root`` with relative paths, as a user types them; then its data moved (to ``a_moved``, ``d_moved``): the
    paths the run recorded lead nowhere."""
    root = tmp_path_factory.mktemp("lookup")
    (root / "a").mkdir()
    shutil.copy(FIXTURE, root / "a" / FIXTURE.name)
    write_discotex(root / "d" / "discotex", 4)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        r = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_abs,discotex", "--data",
                   f"abricot=a/{FIXTURE.name}", "--data-dir", "d", "--limit", 2, "--out", "run")
        assert r.exit_code == 0, r.output
    (root / "a").rename(root / "a_moved")
    (root / "d").rename(root / "d_moved")
    return root


@pytest.fixture
def away(made, tmp_path, monkeypatch):
    """The run, checked from another working folder."""
    monkeypatch.chdir(tmp_path)
    return made / "run"


def recorded_at(made: Path, to: Path, abricot: str) -> Path:
    """A copy of the run in ``to`` recording its abricot file as ``abricot``."""
    shutil.copytree(made / "run", to)
    doc = json.loads((to / "results.json").read_text())
    doc["tasks"]["abricot_abs"]["data"][0]["path"] = abricot
    (to / "results.json").write_text(json.dumps(doc))
    return to


def test_data_dir_finds_each_tasks_own_folder_as_run_does(made, away, tmp_path):
    both = tmp_path / "both"  # the cache's layout, as `run --data-dir both` finds it: both/abricot/, both/discotex/
    shutil.copytree(made / "a_moved", both / "abricot")
    shutil.copytree(made / "d_moved" / "discotex", both / "discotex")
    r = invoke("check", away, "--data-dir", both, "--sample", 1)
    assert r.exit_code == 0, r.output


def test_data_from_two_folders_is_given_with_data_and_data_dir(made, away, tmp_path):
    shutil.copytree(made / "a_moved", tmp_path / "abricot_here")
    shutil.copytree(made / "d_moved" / "discotex", tmp_path / "flat")  # the discotex files, flat in the folder
    r = invoke("check", away, "--data", f"abricot={tmp_path / 'abricot_here' / FIXTURE.name}",
               "--data-dir", tmp_path / "flat", "--sample", 1)
    assert r.exit_code == 0, r.output


def test_data_given_for_a_task_is_the_only_place_looked(made, away, tmp_path):
    run = recorded_at(made, tmp_path / "run", str(made / "a_moved" / FIXTURE.name))  # the recorded path good
    other = tmp_path / FIXTURE.name
    other.write_text(FIXTURE.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    r = invoke("check", run, "--data", f"abricot={other}", "--data-dir", made / "d_moved", "--sample", 1)
    assert r.exit_code == 2 and f"data file {other} has sha256" in r.output and "not the same file" in r.output
    r = invoke("check", run, "--data-dir", made / "d_moved", "--sample", 1)
    assert r.exit_code == 0, r.output  # the same run, nothing given for abricot: its recorded path


def test_data_for_no_task_of_the_run_is_refused(away):
    r = invoke("check", away, "--data", "abricot_inc=x.csv")
    assert r.exit_code == 2 and "--data abricot_inc=x.csv: no task of the run reads it" in r.output, r.output


def test_a_relative_recorded_data_path_is_said_to_be_one(made, away, tmp_path):
    run = recorded_at(made, tmp_path / "run", f"a/{FIXTURE.name}")  # as a run recorded the path typed
    r = invoke("check", run, "--data-dir", made / "d_moved")
    assert r.exit_code == 2
    assert f"\n    a/{FIXTURE.name}\n" in r.output and "relative to the folder that run was started from" in r.output
    assert "--data-dir DIR" in r.output and "--data abricot=FILE" in r.output


def test_a_relative_recorded_model_path_is_said_to_be_one(made):
    from abricot_local.cli.options import flags
    from abricot_local.run.check import recorded_model

    record = read_run(made / "run")
    moved = replace(record, model=replace(record.model, path="mdl/gone.gguf", source="path"),
                    config=replace(record.config, backend="llama.cpp"))
    with pytest.raises(ResultsError) as err:
        recorded_model(moved)
    text = str(err.value.said_by(flags))  # as the command line words it
    assert "mdl/gone.gguf is missing (a relative path: relative to the folder the run was started from" in text
    assert text.endswith("; give it with --model")
