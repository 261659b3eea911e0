"""The lm-eval door's and the API's last words: each says an option or a call as its user gives it.

lm-eval's shots are its own num_fewshot, which a message cannot know was given to lm-eval's command line or to
simple_evaluate: both are named (was ``--num_fewshot 2`` alone, a flag a simple_evaluate user has no use for), in
the tasks' warnings too (was ``shots=1`` and ``data={"discotex": DIR}``, the API's keywords). What the API renders
itself (a sweep's failures, a plan, a run's warning) writes a call as the API's, as its errors do (was the shell
command ``abricot-local run A B``).
"""

from __future__ import annotations

import logging
import warnings

import pytest

from abricot_local.errors import Call, DataError, call, opt, render


def test_the_door_names_lm_eval_s_shots_in_both_its_doors():
    from abricot_local.lm_eval.requests import door_words

    assert render(f"give {opt('shots', 2)}", door_words) == "give --num_fewshot 2 (simple_evaluate's num_fewshot=2)"
    assert render(opt("shots"), door_words) == "--num_fewshot (simple_evaluate's num_fewshot)"


def test_the_tasks_warning_of_no_few_shot_pool_is_in_the_door_s_words(monkeypatch, caplog):
    """The DISCOTEX loader's warning on data without a few-shot pool (the task's own refusal of shots, inside it)."""
    import abricot_local.tasks as tasks
    from abricot_local.lm_eval.tasks import loaders

    class NoPool:
        def __init__(self, shots):
            self.shots = shots

        def rows_and_pool(self):
            if self.shots:
                raise DataError(f"{opt('shots', self.shots)} draws shots from the train split; give the rows "
                                f"({opt('data', ('discotex', 'DIR'))})\nsecond line")
            return [], []

    monkeypatch.setattr(tasks, "make_task", lambda name, options: NoPool(options.shots))
    monkeypatch.setattr(loaders, "_warn", lambda task: None)
    monkeypatch.setattr(loaders, "_dataset", lambda splits: splits)
    loaders._discotex.cache_clear()
    with caplog.at_level(logging.WARNING, logger="abricot_local.lm_eval"):
        assert loaders.discotex(data_dir="/nowhere") == {"test": [], "train": []}
    loaders._discotex.cache_clear()
    (said,) = [r.getMessage() for r in caplog.records]
    assert said == ("discotex: no few-shot pool (--num_fewshot (simple_evaluate's num_fewshot) draws shots from "
                    """the train split; give the rows (--metadata '{"data": {"discotex": DIR}}' (simple_evaluate's """
                    """TaskManager(metadata={"data": {"discotex": DIR}})))); --num_fewshot """
                    "(simple_evaluate's num_fewshot) needs it")


RUN_AB = Call("run", ("A", "B"))


def test_a_sweep_s_failures_write_a_call_as_the_api_s():
    from abricot_local.api.calls import SweepError

    err = SweepError([("m", f"refused: run them as `{call(RUN_AB)}`")], [])
    assert err.failed == [("m", "refused: run them as `abricot_local.evaluate(['A', 'B'])`")]
    assert str(err).endswith("m: refused: run them as `abricot_local.evaluate(['A', 'B'])`")


def test_a_warning_writes_a_call_as_the_api_s():
    from abricot_local.api.options import AbricotWarning, warn

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn(f"warning: give {opt('shots', 2)}, or run `{call(RUN_AB)}`")
    (w,) = caught
    assert w.category is AbricotWarning and str(w.message) == "give shots=2, or run `abricot_local.evaluate(['A', 'B'])`"


def test_a_plan_writes_a_call_as_plan_s(monkeypatch):
    """``plan``'s answer: the problems its models carry (rendered when made) and the text ``str`` shows."""
    import abricot_local as api
    from abricot_local.console import plan as console_plan
    from abricot_local.run import dry_run
    from abricot_local.run.dry_plan import DryRun, ModelPlan

    problem = f"cannot plan it: `{call(RUN_AB)}`"
    monkeypatch.setattr(dry_run, "plan_of", lambda *a, **kw: DryRun((ModelPlan("fake", "fake", "fake",
                                                                                problem=problem),)))
    made = api.plan("fake", "abricot_abs", backend="fake")
    assert made.models[0].problem == "cannot plan it: `abricot_local.plan(['A', 'B'])`"
    monkeypatch.setattr(console_plan, "full", lambda plan: f"(a dry run) {call(RUN_AB)}")
    assert str(made) == "(a dry run) abricot_local.plan(['A', 'B'])"


@pytest.mark.parametrize("shots", [0, 3])
def test_the_door_s_shots_keep_their_number(shots):
    from abricot_local.lm_eval.requests import door_words

    assert render(opt("shots", shots), door_words).endswith(f"num_fewshot={shots})")


def test_a_models_file_not_there_is_named_by_the_door_s_key(tmp_path):
    from abricot_local.errors import UsageError
    from abricot_local.lm_eval.requests import open_model

    missing = tmp_path / "none.toml"
    with pytest.raises(UsageError) as err:
        open_model({"model": "fake", "backend": "fake", "models": str(missing)})
    assert str(err.value) == f"model_args models: models file not found: {missing}"


def test_shots_from_an_empty_few_shot_pool_are_one_line(monkeypatch):
    """lm-eval's sampler on a task loaded without its pool (the loader's warning above): its assertion, in words."""
    from click.testing import CliRunner

    from abricot_local.cli import cli
    from conftest import require_lm_eval

    require_lm_eval()
    from lm_eval._cli import HarnessCLI

    def sample(self, parsed):
        raise AssertionError("Error: no documents available for sampling.")  # lm-eval's samplers.py

    monkeypatch.setattr(HarnessCLI, "execute", sample)
    r = CliRunner().invoke(cli, ["lm-eval", "fake", "--tasks", "discotex_card", "--num_fewshot", "2"])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output + repr(r.exception)
    assert " ".join(r.output.split()).endswith("error: lm-eval found no documents to draw the --num_fewshot examples from: the "
                                     "task's few-shot split is empty (a warning above says why); give its data, or "
                                     "run it without --num_fewshot"), r.output
