"""A notebook user's review of the Python API: a label says what differs in what was run (an option left to its
default reads as the value the run resolved), Comparison's repr, published()'s numeric columns numeric whatever
they hold, evaluate's warning for a published task not run, samples() given no task name, an empty ``tasks``
refused at every door, and lm-eval's model_args with the API's "did you mean"."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest
from click.testing import CliRunner

import abricot_local as api
from abricot_local.analysis.labels import RunIdentity, task_values, unique_labels
from abricot_local.errors import UsageError
from conftest import FIXTURE

ARGS = dict(backend="fake", data={"abricot": str(FIXTURE)}, n_ctx=8192, progress=False)


@pytest.fixture
def discotex_runs(finished_run, discotex_dir):
    """Fake runs of DISCOTEX: the default prompt variant (recorded null, each task's `card`), `card` given, and
    `ita-bench` (test_settings_side_by_side.py's runs: made once per session)."""
    from abricot_local.analysis.loading import load_run

    base = ("run", "x", "--backend", "fake", "--n-ctx", "8192", "--data-dir", str(discotex_dir), "--tasks",
            "discotex", "--sample", "6")
    return [load_run(finished_run(*base, *more)) for more in
            ((), ("--prompt-variant", "card"), ("--prompt-variant", "ita-bench"))]


# -- 1. a label names the option as it was run -------------------------------------------------------------------
def test_an_option_left_to_its_default_is_labelled_as_the_value_resolved():
    default = RunIdentity("gemma", folder="a", options={"prompt_variant": None},
                          resolved=task_values([{"prompt_variant": "card", "shots": 0}]))
    card = RunIdentity("gemma", folder="b", options={"prompt_variant": "card"})
    ita = RunIdentity("gemma", folder="c", options={"prompt_variant": "ita-bench"})
    assert unique_labels([default, card]) == ("gemma (a)", "gemma (b)")  # nothing differs but where they are
    assert unique_labels([default, ita]) == ("gemma (prompt_variant=card)", "gemma (prompt_variant=ita-bench)")
    # a value the tasks resolved otherwise is no value of the run's
    assert task_values([{"prompt_variant": "card"}, {"prompt_variant": "ita-bench"}]) == {}
    unset = RunIdentity("gemma", folder="d", options={"prompt_variant": None})
    assert unique_labels([unset, ita]) == ("gemma (no prompt_variant)", "gemma (prompt_variant=ita-bench)")


def test_compared_runs_of_the_default_and_its_value_given_are_not_told_apart_by_it(discotex_runs):
    from abricot_local.analysis.runs import labelled

    default, card, ita = discotex_runs
    same = api.compare(default, card)
    assert not any("prompt_variant" in label for label in same.labels), same.labels
    assert [r.label for r in labelled([default, ita])] == ["x (prompt_variant=card)", "x (prompt_variant=ita-bench)"]
    # 2. the repr says what the comparison holds
    n = len(same.verdicts)
    assert repr(same) == (f"Comparison({same.labels[0]} vs {same.labels[1]}: {n} verdict{'s' * (n != 1)}, "
                          f"paired on {same.paired_on})")


# -- 3. published()'s numeric columns -----------------------------------------------------------------------------
def test_published_columns_are_numeric_when_no_row_has_a_value(discotex_runs):
    from abricot_local.record.schema import Published, PublishedCheck

    run = discotex_runs[0]
    check = PublishedCheck(reference="r", source="s", task="discotex", metric="accuracy", published=0.5,
                           comparable=False)
    p = replace(run, record=replace(run.record, published=Published(reproduces="s: r", checks=(check,)))).published()
    for column in ("value", "ci_low", "ci_high", "difference", "margin", "diff_ci90_low", "diff_ci90_high"):
        assert p[column].dtype == "float64", column
    assert str(p.items_to_settle.dtype) == "Int64" and str(p.inside.dtype) == "boolean"
    assert p.diff_ci90_low.round(3).isna().all() and p.items_to_settle.isna().all()


# -- 4. a published task not run ---------------------------------------------------------------------------------
def test_evaluate_warns_of_a_published_task_it_did_not_run(tmp_path):
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n')
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        run = api.evaluate("fake-as-llama", "abricot_abs", models_file=models, out=tmp_path / "o", sample=4, **ARGS)
    left = run.record.published.tasks_not_run
    assert left  # the paper's rows of abricot_inc
    lines = [str(w.message) for w in said if issubclass(w.category, api.AbricotWarning)]
    for task in left:
        line = next((x for x in lines if x.startswith(f"{task}: published, but not run here")), None)
        assert line is not None, lines
        assert "tasks left it out" in line and "not checked" in line and "--" not in line  # the API's words


# -- 5. samples() given no task name -----------------------------------------------------------------------------
@pytest.mark.parametrize("task", [["discotex"], 3])
def test_samples_of_no_task_name_is_a_usage_error(discotex_runs, task):
    with pytest.raises(UsageError, match=r"task must be one task's name .*discotex"):
        discotex_runs[0].samples(task)


# -- 6. an empty tasks is refused, not every task ---------------------------------------------------------------
@pytest.mark.parametrize("call", [api.evaluate, api.plan])
@pytest.mark.parametrize("tasks", ["", [], ()])
def test_an_empty_tasks_is_refused(call, tasks, tmp_path):
    with pytest.raises(UsageError, match=r"tasks is empty: give one or more task names .*leave it out") as err:
        if call is api.evaluate:
            call("fake", tasks, out=tmp_path / "o", **ARGS)
        else:
            call("fake", tasks, **{k: v for k, v in ARGS.items() if k != "progress"})
    assert "discotex" in str(err.value) and not (tmp_path / "o").exists()


def test_an_empty_tasks_flag_is_refused_too(tmp_path):
    from abricot_local.cli import cli

    for extra in ((), ("--dry-run",)):
        r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", "", "--out", str(tmp_path / "o"),
                                     *extra])
        assert r.exit_code != 0 and "--tasks is empty" in r.output, r.output
    assert not (tmp_path / "o").exists()


# -- 7. lm-eval's model_args -------------------------------------------------------------------------------------
def test_an_unknown_model_arg_says_the_close_one():
    from conftest import require_lm_eval

    require_lm_eval()
    from abricot_local.lm_eval.model import AbricotLM

    with pytest.raises(UsageError, match=r"unknown model_args thread\. Did you mean: threads\? .*n_ctx"):
        AbricotLM.create_from_arg_string("model=fake,backend=fake,thread=2")
    with pytest.raises(UsageError, match="unknown model_args zzzzzz") as err:
        AbricotLM.create_from_arg_string("model=fake,backend=fake,zzzzzz=2")
    assert "Did you mean" not in str(err.value)
