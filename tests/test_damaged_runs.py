"""A finished run whose results.json or samples files were damaged (a value of the wrong JSON type, a
task's own field missing): every command that reads runs (`report`, `report --verify`, the html page,
`compare`, `check`, `merge`) refuses it with one line naming the file and the key, never a traceback.
All on the fake backend and invented data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import FIXTURE
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def refused(r, says: str, code: int = 2) -> None:
    assert "Traceback" not in r.output and (r.exception is None or isinstance(r.exception, SystemExit)), r.output
    assert r.exit_code == code and says in r.output, r.output


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_discotex(tmp_path_factory.mktemp("damaged") / "d", 4)


@pytest.fixture
def runs(finished_run, data, tmp_path):
    """``make(name, *extra)``: a copy of a finished fake run of 4 DISCOTEX and 4 ABRICOT (abs) items."""
    def make(name: str, *extra) -> Path:
        return finished_run("run", "fake", "--backend", "fake", "--tasks", "discotex,abricot_abs", "--data-dir", data,
                            "--data", f"abricot={FIXTURE}", "--limit", 4, *extra, into=tmp_path / name)
    return make


def edit_record(run: Path, change) -> Path:
    doc = json.loads((run / "results.json").read_text())
    change(doc)
    (run / "results.json").write_text(json.dumps(doc))
    return run


def edit_line(run: Path, task: str, change, line: int = 0) -> Path:
    path = run / f"samples-{task}.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    change(rows[line])
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    return run


def test_a_schema_version_that_is_no_integer_is_one_line(runs):
    run = edit_record(runs("a"), lambda d: d.update(schema_version=[1]))
    says = f"{run / 'results.json'} is malformed: schema_version is a JSON list, not an integer"
    refused(invoke("report", run, "--strict"), says)
    refused(invoke("check", run), says)


@pytest.mark.parametrize("change, says, commands", [
    (lambda d: d["config"].update(protocol=-1), "config.protocol is a number (-1), not a string",
     ("compare", "check", "verify")),
    (lambda d: d["tasks"]["discotex"]["config"].update(seed="1234"),
     "tasks.discotex.config.seed is a string ('1234'), not an integer", ("compare", "check")),
    (lambda d: d["config"].update(shots="0"), "config.shots is a string ('0'), not an integer", ("check",)),
    (lambda d: d["config"].update(prompt_variant=5), "config.prompt_variant is a number (5), not string", ("check",)),
    (lambda d: d["config"].update(n_ctx=[8192]), "config.n_ctx is a JSON list, not an integer", ("check",)),
    (lambda d: d["tasks"]["abricot_abs"]["config"].update(seed=-1), "tasks.abricot_abs.config.seed must be at least 0",
     ("check",)),
])
def test_a_recorded_option_of_the_wrong_type_names_the_file_and_its_key(runs, change, says, commands):
    good, run = runs("good"), edit_record(runs("bad"), change)
    says = f"{run / 'results.json'} is malformed: {says}"
    for command in commands:
        if command == "verify":
            refused(invoke("report", run, "--verify"), f"not verified: {says}")
        elif command == "compare":
            refused(invoke("compare", run, good), says)
        else:
            refused(invoke("check", run), says)


@pytest.mark.parametrize("task, change, says", [
    ("discotex", lambda s: s.pop("class"), ": the samples of task discotex lack its field 'class' (id "),
    ("discotex", lambda s: s.update({"class": "zz"}), " is malformed (id 'task_1_ted_test_1'): class is a string "
     "('zz'), not an integer"),
    ("abricot_abs", lambda s: s.update(expected_score="zz"), " is malformed (id "),
    ("abricot_abs", lambda s: s.pop("expected_score"), ": the samples of task abricot_abs lack its field "
     "'expected_score'"),
    ("abricot_abs", lambda s: s.update(human_mean={}), " is malformed (id "),
])
def test_a_samples_line_lacking_its_tasks_field_is_one_line_for_every_reader(runs, tmp_path, task, change, says):
    good, run = runs("good"), edit_line(runs("bad"), task, change)
    says = f"{run / f'samples-{task}.jsonl'} line 1{says}"
    refused(invoke("report", run, "--verify"), f"not verified: {says}")
    refused(invoke("report", run, "--format", "html", "-o", tmp_path / "p.html"), says)
    refused(invoke("compare", good, run), says)
    refused(invoke("check", run), says)


def test_merge_refuses_a_damaged_shard_in_one_line(finished_run, data, tmp_path):
    shards = [finished_run("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--limit", 6,
                           "--shard", f"{k}/3", into=tmp_path / f"s{k}") for k in (1, 2, 3)]
    edit_line(shards[1], "discotex", lambda s: s.pop("class"))
    r = invoke("merge", *shards, "--out", tmp_path / "m")
    refused(r, f"{shards[1] / 'samples-discotex.jsonl'} line 1: the samples of task discotex lack its field 'class'")
    assert not (tmp_path / "m" / "results.json").exists()
    edit_line(shards[1], "discotex", lambda s: s.update({"class": 0}))  # mended: the shards merge
    edit_record(shards[2], lambda d: d["tasks"]["discotex"]["config"].update(seed="1234"))
    refused(invoke("merge", *shards, "--out", tmp_path / "m"),
            f"{shards[2] / 'results.json'} is malformed: tasks.discotex.config.seed is a string ('1234'), not an integer")
