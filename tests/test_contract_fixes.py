"""Contracts a review found broken: compare's text names --margin as each door writes it (the API's
Comparison.render says margin=0.05); an INTERRUPTED file's resume advice is the door's own call; a samples
file is named by one rule (record/outputs.py) that every reader follows, a task key with a '/' (a plugin's
variant) included; a ladder's mixed architectures are found for a run of any backend."""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import abricot_local as api
from abricot_local.cli import cli
from abricot_local.errors import UsageError
from conftest import FIXTURE, fail_after

ARGS = dict(backend="fake", data={"abricot": str(FIXTURE)}, n_ctx=8192, progress=False)
CLI = ["--backend", "fake", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def evaluate(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return api.evaluate("fake", "abricot_abs", **{**ARGS, **kw})


def test_compare_names_the_margin_in_each_door_s_words(tmp_path):
    one, two = (evaluate(out=tmp_path / n, sample=4) for n in ("a", "b"))
    text = api.compare(one, two, margin=0.05).render()
    assert "margin=0.05" in text and "--margin" not in text and "\ue000" not in text, text
    r = invoke("compare", one.path, two.path, "--margin", "0.05")
    assert r.exit_code == 0 and "(--margin 0.05)" in r.output and "margin=0.05" not in r.output, r.output


def test_an_interrupted_folder_advises_the_call_of_the_door_that_ran_it(tmp_path):
    with pytest.MonkeyPatch.context() as m:
        fail_after(m, 2, KeyboardInterrupt)
        with pytest.raises(KeyboardInterrupt):
            evaluate(out=tmp_path / "api", sample=4)
    said = (tmp_path / "api" / "INTERRUPTED").read_text()
    assert "resume: abricot_local.evaluate(..., out=" in said and "resume=True)" in said and "--" not in said, said
    with pytest.MonkeyPatch.context() as m:
        fail_after(m, 2, KeyboardInterrupt)
        r = CliRunner().invoke(cli, ["run", "fake", "--tasks", "abricot_abs", "--sample", "4", *CLI,
                                     "--out", str(tmp_path / "cli")])
    said = (tmp_path / "cli" / "INTERRUPTED").read_text()
    assert r.exit_code != 0 and "resume: abricot-local" in said and "--resume" in said, (r.output, said)
    assert "evaluate(" not in said, said


def test_a_door_without_a_hint_of_its_own_leaves_advice_for_every_door(tmp_path):
    from abricot_local.run.folder import OutputDir
    from abricot_local.run.run_folder import RunFolder

    assert RunFolder(tmp_path).resume_line(tmp_path) == ""  # no door's hint: OutputDir says each door's way
    with OutputDir(tmp_path / "o") as out:
        out.running({"t": 2})
        out.interrupted()
    said = (tmp_path / "o" / "INTERRUPTED").read_text()
    assert "--resume" in said and "resume=True" in said, said


@pytest.mark.parametrize("task", ["discotex", "abricot_abs@calamita~paper", "t~en/it", "t~a\\b"])
def test_one_samples_file_name_rule_written_and_read(tmp_path, task):
    from abricot_local.record.outputs import _runs_own, samples_name, task_of
    from abricot_local.record.samples import samples_path
    from abricot_local.run.states import items_text, saved_counts

    name = samples_name(task)
    assert "/" not in name and "\\" not in name and task_of(name) is not None
    assert (task_of(name) == task) == (task in ("discotex", "abricot_abs@calamita~paper"))
    assert task_of("samples-.jsonl") is None and task_of("results.json") is None
    (tmp_path / "RUNNING").write_text("")
    line = '{"id": "%s", "choices": ["x", "y"], "logprobs": [-1.0, -2.0], "gold": 0, "pred": 0}\n'  # a sample
    (tmp_path / name).write_text(line % "a" + line % "b")
    assert samples_path(tmp_path, name, task) == tmp_path / name  # the reader takes the writer's name
    with pytest.raises(Exception, match="not this task's samples file"):
        samples_path(tmp_path, samples_name("other"), task)
    assert saved_counts(tmp_path, [task]) == {task: 2}  # counted under the run's own key
    assert items_text(saved_counts(tmp_path, [task]), {task: 4}) == f"2 of 4 items ({task} 2/4)"
    assert _runs_own((tmp_path / name).absolute())


def _gguf(path: Path, arch: str) -> Path:
    from gguf_synth import Synth, kv

    return Synth(kvs=[kv("general.architecture", "str", arch), kv("tokenizer.ggml.tokens", "arr:str", ["a", "b"])]
                 ).write(path)


def test_a_ladder_of_two_architectures_is_refused_whatever_backend_recorded_the_runs(tmp_path):
    from abricot_local.models.quants import architecture, refuse_mixed

    def run(path, **model):
        model = {"path": str(path), "size": path.stat().st_size, **model}
        return SimpleNamespace(model=SimpleNamespace(**model), provenance=SimpleNamespace(extra={}, n_vocab=2))

    a, b = _gguf(tmp_path / "a.gguf", "llama"), _gguf(tmp_path / "b.gguf", "gemma3")
    assert architecture(run(a)) == "llama"  # no backend's own key recorded: the file's header says it
    assert architecture(run(a, architecture="qwen3")) == "qwen3"  # a record's model.architecture first
    assert architecture(run(a, size=1)) is None  # another file at that path now: not believed
    refuse_mixed("m", [("a", run(a)), ("a2", run(a))])
    with pytest.raises(UsageError, match="differ in architecture"):
        refuse_mixed("m", [("a", run(a)), ("b", run(b))])
