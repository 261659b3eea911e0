"""A task's data that is not, byte for byte, the release its published rows were made on (its DataSpec.release:
tasks/release.py) is said, and no published row is judged on it: a warning (on stderr as the run begins, in
results.json's task warnings, by lm-eval's door), and each published check not comparable ("made otherwise: data
FILE is not the release (sha256 X..., release Y...)"), never "reproduced" or "exact", by every reader of the record
(report, Run.published(), report --verify, check, merge) and by --until-settled's questions. The tests' invented
fixture is declared a release in this process (conftest.fixture_as_release); here the ABRICOT tasks declare the real
release alone, as an install does (`release_alone`). Fake backend; the fixture's 18 rows."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from abricot_local.analysis import baselines, questions
from abricot_local.analysis.loading import load_run
from abricot_local.cli import cli
from abricot_local.record import DataFile, TaskEntry
from abricot_local.tasks import make_task, release
from abricot_local.tasks.abricot import AbricotTask
from abricot_local.tasks.abricot_data import RELEASE_SHA256
from abricot_local.tasks.base import TaskOptions
from abricot_local.tasks.selection import TaskRun
from conftest import FIXTURE, isolated_env

ARGS = ("--backend", "fake", "--tasks", "abricot_abs", "--n-ctx", 8192)
SHA = hashlib.sha256(FIXTURE.read_bytes()).hexdigest()
SAID = f"data {FIXTURE} is not the release (sha256 {SHA[:12]}..., release {RELEASE_SHA256[:12]}...)"


def release_alone(mp) -> None:
    """The ABRICOT tasks' release: the real one alone (the fixture not declared)."""
    mp.setattr(AbricotTask, "data", replace(AbricotTask.data, release=(RELEASE_SHA256,)))


@pytest.fixture
def alone(monkeypatch):
    release_alone(monkeypatch)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A fake run of the fixture's 18 items under an entry reproducing the paper's row (every item of its data: the
    verdict would be "exact"), and its two shards; each result kept."""
    root = tmp_path_factory.mktemp("not_the_release")
    models = root / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n')
    results = {}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in isolated_env(root).items():
            mp.setenv(key, value)
        mp.chdir(root)
        release_alone(mp)
        for out, more in (("whole", ()), ("s1", ("--shard", "1/2")), ("s2", ("--shard", "2/2"))):
            results[out] = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}", *ARGS,
                                  *more, "--out", root / out)
            assert results[out].exit_code == 0, results[out].output
    return root, results


def record(folder):
    return json.loads((folder / "results.json").read_text(encoding="utf-8"))


def test_a_run_on_other_data_says_so_and_its_published_row_is_not_comparable(made):
    root, results = made
    r = results["whole"]
    assert f"warning: abricot_abs: {SAID}: the published rows were made on the release" in r.stderr
    entry = record(root / "whole")["tasks"]["abricot_abs"]
    assert entry["available"] == 18 and entry["warnings"][0].startswith(SAID + ": ")
    check = record(root / "whole")["published"]["checks"][0]
    assert (check["reference"], check["comparable"], check["differences"]) == ("llama-3.1-8b", False, [SAID])
    assert check.get("verdict") is None and check["inside"] is None
    assert f"made otherwise: {SAID}" in r.stdout
    assert "reproduced within" not in r.stdout and "exact" not in r.stdout


def test_every_reader_of_the_record_says_the_same(made, alone):
    root, _ = made
    rows = load_run(root / "whole").published()
    assert list(rows["verdict"]) == ["not comparable"] and list(rows["differences"]) == [SAID]
    shown = invoke("report", root / "whole")
    assert shown.exit_code == 0 and "not comparable" in shown.output and "reproduced within" not in shown.output
    verified = invoke("report", "--verify", root / "whole")
    assert verified.exit_code == 0 and "published verdicts of 1 of them match" in verified.output, verified.output
    checked = invoke("check", root / "whole")
    assert checked.exit_code == 0, checked.output
    merged = invoke("merge", root / "s1", root / "s2", "--out", root / "merged")
    assert merged.exit_code == 0, merged.output
    doc = record(root / "merged")
    assert doc["published"]["checks"][0]["differences"] == [SAID]
    assert sum(w.startswith(SAID) for w in doc["tasks"]["abricot_abs"]["warnings"]) == 1


def test_the_release_byte_for_byte_is_judged_as_before(alone):
    """The rule on a recorded entry: the release's SHA-256 is no difference (an old run made on it reads as
    before), another is one, after the protocol's; a record naming no data file cannot say."""
    ref = next(r for r in baselines.all_references(("abricot_abs",)) if r.model == "llama-3.1-8b")
    assert ref.release == (RELEASE_SHA256,)
    config = {"prompt_variant": "paper", "shots": 3, "shot_sampler": "lm-eval", "seed": 1234, "chat_template": False}
    entry = TaskEntry(metrics={}, n=18, config=config, data=(DataFile(path="/x/dataset_it.csv", sha256=RELEASE_SHA256),))
    assert baselines.made_otherwise(ref, entry) == ()
    assert baselines.made_otherwise(ref, replace(entry, data=())) == ()
    other = replace(entry, config={**config, "shots": 0}, data=(DataFile(path=str(FIXTURE), sha256=SHA),))
    assert baselines.made_otherwise(ref, other) == ("shots 0, published 3", SAID)


def test_lm_eval_s_door_warns_in_its_own_words(alone, caplog):
    from abricot_local.lm_eval.tasks import loaders

    task = make_task("abricot_abs", TaskOptions(data=(("abricot", str(FIXTURE)),), allow_download=False))
    with caplog.at_level(logging.WARNING, logger="abricot_local.lm_eval"):
        loaders._warn(task)
    said = [rec.getMessage() for rec in caplog.records]
    assert len(said) == 1 and said[0].startswith(f"abricot_abs: {SAID}: "), said
    assert """--metadata '{"data": {"abricot": FILE}}'""" in said[0]


def test_until_settled_waits_for_no_row_of_other_data(monkeypatch):
    """--until-settled's questions: the paper's row on the fixture declared a release, none once it is not."""
    task = make_task("abricot_abs", TaskOptions(data=(("abricot", str(FIXTURE)),), allow_download=False))
    plan = SimpleNamespace(runs=(TaskRun(task, ()),), reproduces="ABRICOT paper: llama-3.1-8b", margin=None,
                           data={task.key: (DataFile(path=str(FIXTURE), sha256=SHA),)})
    assert len(questions.questions(plan)[task.key]) == 1
    release_alone(monkeypatch)
    assert questions.questions(plan)[task.key] == []


def test_a_task_that_pins_no_release_gets_neither():
    task = make_task("discotex", TaskOptions(allow_download=False))
    assert task.data.release == () and release.notes(task) == ()
    assert release.differences((), (DataFile(path=str(FIXTURE), sha256=SHA),)) == ()


def test_a_release_declared_is_a_tuple_of_sha256_or_the_task_is_refused():
    from abricot_local.errors import TaskError
    from abricot_local.tasks.abricot import AbricotAbsTask
    from abricot_local.tasks.contract import checked

    class Slip(AbricotAbsTask):
        data = replace(AbricotAbsTask.data, release=RELEASE_SHA256)  # a string, not a tuple of them

    with pytest.raises(TaskError, match=r"data.release is '5dfe.*not a tuple of SHA-256"):
        checked(Slip)
    assert checked(AbricotAbsTask) is AbricotAbsTask
