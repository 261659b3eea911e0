"""`check`'s advice and refusals in the door's words: a model given to check (``model``) named as given, and
looked for in ``model_dirs``/--model-dir as `run` looks (the advice names only what check takes); an lm-eval output
(the --output_path folder or its inner folder) said to be one, without a command line in the API's words. Labels
tell only differences the recorded settings tell (a run of several protocols read back has no single protocol).
List-valued options take lists where the command line takes a comma list (``protocol``, ``quants``); ``data``'s
refusal names every form the API takes. Fake backend, invented data."""

from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import replace

import pytest
from click.testing import CliRunner

import abricot_local as al
from abricot_local.cli import cli
from abricot_local.errors import ResultsError, UsageError, keywords
from abricot_local.record import read_run
from conftest import FIXTURE

DATA = {"abricot": str(FIXTURE)}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A fake run of abricot_abs under both its protocols (--protocol all), 2 items each."""
    root = tmp_path_factory.mktemp("doorwords")
    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--protocol", "all",
                                 "--data", f"abricot={FIXTURE}", "--limit", "2", "--out", str(root / "run")])
    assert r.exit_code == 0, r.output
    return root / "run"


def test_a_model_given_to_check_is_named_as_given_and_looked_for_in_model_dirs(made, tmp_path):
    from abricot_local.cli.options import flags
    from abricot_local.run.check import recorded_model

    record = read_run(made)
    recorded = replace(record, config=replace(record.config, backend="llama.cpp"))
    with pytest.raises(ResultsError) as err:
        recorded_model(recorded, "nope.gguf", model_dirs=(str(tmp_path),))
    api, cli_text = str(err.value.said_by(keywords)), str(err.value.said_by(flags))
    assert api.startswith("model=nope.gguf cannot be opened: ") and "recorded model" not in api
    assert f"model_dirs={tmp_path}" in api and "model_dirs=DIR" in api  # looked there; advised as check takes it
    assert cli_text.startswith("--model nope.gguf cannot be opened")
    # both doors take what the advice names
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = al.check(made, sample=1, model_dirs=[tmp_path], progress=False)
    assert rep.passed and rep.checked == 2  # one item of each protocol's task
    r = CliRunner().invoke(cli, ["check", str(made), "--sample", "1", "--model-dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    with pytest.raises(UsageError, match="model_dirs must be"):
        al.check(made, model_dirs=5)


def test_an_lm_eval_output_folder_is_said_to_be_one_in_each_doors_words(tmp_path):
    inner = tmp_path / "lm" / "gemma.gguf"
    inner.mkdir(parents=True)
    (inner / "results_2026-01-01T00-00-00.json").write_text("{}")
    for given in (tmp_path / "lm", inner):  # lm-eval's --output_path folder, and its folder of the model
        with pytest.raises(ResultsError) as err:
            al.check(given)
        text = str(err.value)
        assert f"{given} is an lm-eval output" in text and "nothing to re-score" in text and "`compare`" in text
        assert "abricot-local" not in text.replace("runs of abricot-local", "")  # no command line in the API's words
        assert "no results.json" not in text
    r = CliRunner().invoke(cli, ["check", str(tmp_path / "lm")])
    assert r.exit_code != 0 and f"{inner}" in r.output and "is an lm-eval output" in r.output


def test_a_label_tells_no_protocol_difference_the_settings_deny(made, tmp_path):
    from abricot_local.analysis.differing import differing_settings
    from abricot_local.analysis.runs import labelled

    back = tmp_path / "back"  # as lm-eval's read-back records it: no protocol as given, each task's own
    shutil.copytree(made, back)
    doc = json.loads((back / "results.json").read_text())
    doc["config"]["protocol"] = None
    (back / "results.json").write_text(json.dumps(doc))
    a, b = labelled([al.load_run(made), al.load_run(back)])
    assert not differing_settings(a, b)
    assert "protocol" not in a.label and "protocol" not in b.label and a.label != b.label
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = al.evaluate("fake", "abricot_abs", limit=2, protocol="calamita", out=tmp_path / "c", backend="fake",
                            data=DATA, progress=False)
        paper = al.evaluate("fake", "abricot_abs", limit=2, protocol="paper", out=tmp_path / "p", backend="fake",
                            data=DATA, progress=False)
    x, y = labelled([paper, other])  # a difference the settings tell is still told
    assert (x.identity.option("protocol"), y.identity.option("protocol")) == ("paper", "calamita")
    assert (x.label, y.label) == ("fake (shots=3)", "fake (shots=0)")  # the shortest such: calamita's 0 shots


def test_list_options_take_lists_as_the_command_line_takes_comma_lists():
    from abricot_local.run.request import RunOptions
    from abricot_local.tasks.base import TaskOptions

    assert TaskOptions(protocol=["paper", "calamita"]).protocol == TaskOptions(protocol="paper,calamita").protocol
    assert RunOptions(quants=("Q4_K_M", "Q8_0")).quants == "Q4_K_M,Q8_0"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        listed = al.plan("fake", "abricot_abs", limit=2, protocol=["paper", "calamita"], backend="fake", data=DATA)
        text = al.plan("fake", "abricot_abs", limit=2, protocol="paper,calamita", backend="fake", data=DATA)
    assert str(listed) == str(text) and "abricot_abs@calamita" in str(listed)
    with pytest.raises(UsageError, match=r"protocol must be protocol names as text .*a list of them.*got \[1\]"):
        al.plan("fake", "abricot_abs", protocol=[1], backend="fake", data=DATA)
    with pytest.raises(UsageError) as err:
        al.plan("fake", "discotex", data="discotex", backend="fake")
    assert "{task: path}, 'task=path', or a list of 'task=path' and (task, path), got 'discotex'" in str(err.value)
