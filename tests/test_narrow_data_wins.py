"""The narrower name wins:

1. ``--data TASK=PATH`` is for one task: a task's own pair wins over its data key's (group's), in either order
   (tasks.options.TaskOptions.data_for, the task's name looked up first), where ``--data abricot=MISSING --data
   abricot_abs=FILE --tasks abricot_abs`` failed on the missing file; the data a reader is given still wins over
   what runs recorded for each task it names, by key too (analysis.lm_eval_input.given_wins);
2. a finished run's --resume takes a bare file name's gone model as recorded where its absolute path here is the
   record's (models.locate), as it did a path written with a folder; elsewhere the bare name is looked for as ever.
"""

from __future__ import annotations

import os
import shutil

import pytest
from click.testing import CliRunner
from conftest import FIXTURE

from abricot_local.cli import cli
from abricot_local.tasks.options import TaskOptions
from gguf_synth import Synth
from invented_data import write_discotex
import test_dry_agrees

scored = test_dry_agrees.scored  # the fixture: the models each run loads, scored by the fake backend
TAKEN = "its model file is not here: the finished run is taken as recorded"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.mark.parametrize("first", ["group", "task"])
def test_a_task_s_own_data_wins_over_its_group_s_in_either_order(tmp_path, monkeypatch, first):
    monkeypatch.chdir(tmp_path)
    pairs = [("--data", f"abricot={tmp_path / 'nonexistent.csv'}"), ("--data", f"abricot_abs={FIXTURE}")]
    given = [a for pair in (pairs if first == "group" else pairs[::-1]) for a in pair]
    r = invoke("run", "fakeA", "--backend", "fake", *given, "--tasks", "abricot_abs", "--sample", 10, "--dry-run")
    assert r.exit_code == 0 and "nonexistent.csv" not in r.output, r.output
    r = invoke("run", "fakeA", "--backend", "fake", *given, "--tasks", "abricot", "--sample", 10, "--dry-run")
    assert r.exit_code != 0 and "abricot_inc: data file not found" in r.output, r.output  # the group's: inc's


def test_the_data_given_wins_over_the_recorded_for_each_task_it_names_by_name_or_by_key(tmp_path):
    from abricot_local.analysis.lm_eval_input import given_wins

    def read(found, given):
        opts = TaskOptions(data=given_wins(found, given))
        return {n: opts.data_for("abricot", n) for n in ("abricot_abs", "abricot_inc")}

    a, b, c = (str(tmp_path / f"{k}.csv") for k in "abc")
    assert read((("abricot", a),), (("abricot_abs", c),)) == {"abricot_abs": c, "abricot_inc": a}
    by_name = (("abricot_abs", a), ("abricot_inc", b))  # recorded by name: the tasks' files differed
    assert read(by_name, (("abricot", c),)) == {"abricot_abs": c, "abricot_inc": c}  # the key given: both tasks
    assert read(by_name, (("abricot_inc", c),)) == {"abricot_abs": a, "abricot_inc": c}


def test_a_bare_file_name_s_finished_run_resumes_as_recorded_from_its_folder_alone(tmp_path, scored, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Synth().write(tmp_path / "g2.gguf")
    data = write_discotex(tmp_path / "d", 4)
    args = ("run", "g2.gguf", "--tasks", "discotex", "--data-dir", data, "--limit", 2)
    assert invoke(*args, "--out", "rg").exit_code == 0 and scored == ["g2"]
    held = (tmp_path / "rg" / "results.json").read_bytes()
    os.rename(tmp_path / "g2.gguf", tmp_path / "g2.bak")
    r = invoke(*args, "--out", "rg", "--resume")
    assert r.exit_code == 0 and " ".join(r.output.split()).count(TAKEN) == 1, r.output
    assert scored == ["g2"] and (tmp_path / "rg" / "results.json").read_bytes() == held
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # another folder's g2.gguf is not the recorded file: looked for
    shutil.copytree(tmp_path / "rg", tmp_path / "elsewhere" / "rg")
    r = invoke(*args, "--out", "rg", "--resume")
    assert r.exit_code != 0 and "model file not found: g2.gguf is not in the current folder" in r.output, r.output
