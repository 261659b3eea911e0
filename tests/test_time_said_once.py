"""A plan that predicts no time says why, and how to get a prediction, once: a run whose model is downloaded says its
plan before the download (estimated) and again once the model is loaded, the second only that there is still no
time; a dry run of several models says it in the first model's speed line. The reason names how to get a prediction
in each door's words: `--dry-run` with `--calibrate` on the command line, `plan(...)` with `calibrate=True` in
Python."""

from __future__ import annotations

from types import SimpleNamespace

from click.testing import CliRunner

from abricot_local import console
from abricot_local.cli import cli
from abricot_local.cli.options import flags
from abricot_local.cli.plan import Said
from abricot_local.console.plan import brief, full
from abricot_local.errors import keywords, render
from abricot_local.run.cost import Work
from abricot_local.run.dry_plan import DryRun, ModelPlan, TaskPlan
from abricot_local.run.machine_cost import NO_CALIBRATION
from conftest import FIXTURE


def untimed(*labels: str, note: str = NO_CALIBRATION) -> DryRun:
    task = TaskPlan("discotex", 10, 10, Work(10, 2885, 11, 10, 4096, True, "the model's tokenizer"))
    return DryRun(tuple(ModelPlan(x, x, "llama.cpp", speed_note=note, tasks=(task,)) for x in labels))


def test_the_reason_names_the_dry_run_and_calibrate_in_each_doors_words():
    cli_words, api_words = render(NO_CALIBRATION, flags), render(NO_CALIBRATION, keywords)
    assert "--dry-run with --calibrate" in cli_words and "caches" in cli_words
    assert "plan(...) with calibrate=True" in api_words and "--" not in api_words


def test_a_run_says_why_there_is_no_time_once(monkeypatch, capsys):
    """The plan before a download, then the loaded model's: the reason said in the first, not in the second."""
    monkeypatch.setattr(console, "start_line", lambda plan, facts, kernels: "run: started")
    backend = SimpleNamespace(start_facts=lambda: None, provenance=lambda: SimpleNamespace(kernels=None))
    said = Said()
    said.before_download(untimed("m"))
    said.announce(None, backend, untimed("m"))
    err = render(capsys.readouterr().err, flags)
    assert err.count("no calibration yet") == 1 and err.count("--dry-run with --calibrate") == 1, err
    lines = err.splitlines()
    assert lines[1].startswith("plan (estimated): no time predicted: no calibration yet"), err
    assert "plan: no time predicted (why, and how to get a prediction: above)" in lines, err
    assert lines[-1] == "run: started"
    # another reason later (a model of a sweep with other settings) is said in full
    other = Said()
    other.before_download(untimed("m"))
    other.announce(None, backend, untimed("m", note="this backend has no calibration"))
    assert "plan: no time predicted: this backend has no calibration" in capsys.readouterr().err


def test_the_short_plan_says_the_reason_unless_said_before():
    assert brief(untimed("m"))[-1].startswith("plan: no time predicted: no calibration yet")
    assert brief(untimed("m"), NO_CALIBRATION)[-1] == "plan: no time predicted (why, and how to get a prediction: above)"
    assert brief(untimed("m"), "another reason")[-1].startswith("plan: no time predicted: no calibration yet")


def test_a_dry_run_of_several_models_says_the_reason_once():
    text = render(full(untimed("first", "second")), flags)
    assert text.count("no calibration yet") == 1 and "speed:    none, as for first above" in text, text
    # a model of another reason says its own
    two = DryRun((*untimed("first").models, *untimed("second", note="this backend has no calibration").models))
    assert "speed:    this backend has no calibration" in full(two)


def test_a_fake_backends_run_and_dry_run_say_it_once(tmp_path):
    args = ["run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={FIXTURE}",
            "--sample", "2"]
    for extra in (["--dry-run"], ["--out", str(tmp_path / "out")]):
        r = CliRunner().invoke(cli, [*args, *extra], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        assert r.output.count("no calibration yet") == 1 and "--dry-run with --calibrate" in r.output, r.output
