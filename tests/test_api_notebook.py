"""A notebook user's review of the Python API (the fake backend, tiny runs): a Run made from a relative folder
keeps reading it after os.chdir; the Jupyter table's n and intervals say what metrics() and `run` say; two Runs
of one folder are equal; the lm-eval door records the thread-dependent decode calls `run` records; a plan's repr
names a problem; an unknown option lists every keyword the call takes; one rule for an on/off option's bool."""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import replace

import pytest

import abricot_local as api
from abricot_local.errors import UsageError
from conftest import FIXTURE


@pytest.fixture
def discotex_run(finished_run, discotex_dir):
    """A fake run of 6 DISCOTEX items drawn over both sources (test_api_polish.py's: made once per session)."""
    return finished_run("run", "x", "--backend", "fake", "--n-ctx", "8192", "--data-dir", str(discotex_dir),
                        "--tasks", "discotex", "--sample", "6")


def _quiet(call, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", api.AbricotWarning)
        return call(*args, **kwargs)


# -- 1. a relative folder is resolved once, when the Run is made ---------------------------------------------------
def test_a_run_from_a_relative_folder_reads_it_after_chdir(tmp_path, monkeypatch, discotex_dir):
    monkeypatch.chdir(tmp_path)
    made = _quiet(api.evaluate, "fake", "discotex", backend="fake", limit=2, out="rel", data_dir=discotex_dir,
                  progress=False)
    other = _quiet(api.evaluate, "other", "discotex", backend="fake", limit=2, out="rel_b", data_dir=discotex_dir,
                   progress=False)
    loaded = api.load_run("rel")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    for run in (made, loaded):
        assert len(run.samples()) == 2 and run.task("discotex").samples == made.task("discotex").samples
    assert len(api.compare(made, other).to_frame()) > 0
    assert len(list(made.to_lm_eval(tmp_path / "lm").glob("samples_discotex_*.jsonl"))) == 1
    assert made.path == "rel" and made.folder == str(tmp_path / "rel")  # shown as given, read where it lies
    assert made.task("discotex").folder == str(tmp_path / "rel")


# -- 2, 3. the Jupyter table: metrics()' n, and "no interval" as `run` says it --------------------------------------
def _rows(run) -> list[list[str]]:
    return [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr><td>.*?</tr>", run._repr_html_())]


def test_the_jupyter_table_shows_each_metrics_own_n(discotex_run):
    run = api.load_run(discotex_run)
    frame = run.metrics()
    shown = {(task, metric): int(n) for task, metric, _, _, _, n in _rows(run)}
    assert shown == {(r.task, r.metric): r.n for r in frame.itertuples()}
    per_source = frame[frame.metric.str.startswith("accuracy_")]
    assert len(per_source) == 2 and per_source.n.sum() == 6 and (per_source.n < 6).all(), per_source


def test_the_jupyter_table_says_no_interval_where_a_value_has_none(discotex_run):
    run = api.load_run(discotex_run)
    entry = run.record.tasks["discotex"]
    nan = float("nan")
    doctored = replace(run.record, tasks={"discotex": replace(entry, metrics={**entry.metrics,
                                                                             "accuracy_ci95": [nan, nan]})})
    cells = {metric: ci for _, metric, _, ci, _, _ in _rows(api.Run(run.path, doctored))}
    assert cells["accuracy"] == "no interval" and cells["accuracy_ted"] == ""
    assert re.fullmatch(r"\[\d\.\d{3}, \d\.\d{3}\]", cells["binary_accuracy"])
    assert math.isnan(api.Run(run.path, doctored).metrics().set_index("metric").ci_low["accuracy"])


# -- 5c. equality: the same folder, record and tasks --------------------------------------------------------------
def test_runs_of_one_folder_are_equal_with_one_hash(discotex_run, tmp_path, monkeypatch, finished_run, discotex_dir):
    from abricot_local.analysis.runs import Run, labelled
    from abricot_local.record import read_run

    monkeypatch.chdir(discotex_run.parent)
    a, b = api.load_run(discotex_run), Run(discotex_run.name, read_run(discotex_run))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert labelled([a])[0] == a and a.only("discotex") == a
    other = api.load_run(finished_run("run", "x", "--backend", "fake", "--n-ctx", "8192", "--data-dir",
                                      str(discotex_dir), "--tasks", "discotex", "--sample", "6", "--prompt-variant",
                                      "card"))
    assert a != other and a != a.only() and a != replace(a, record=replace(a.record, created="x"))

    def no_interval(run):  # a value recorded without its interval: a NaN of its own each time
        entry = run.record.tasks["discotex"]
        tasks = {"discotex": replace(entry, metrics={**entry.metrics, "accuracy_ci95": [float("nan")] * 2})}
        return Run(run.path, replace(run.record, tasks=tasks))

    assert no_interval(a) == no_interval(b) and no_interval(a) != a


# -- 4. the lm-eval door counts the thread-dependent decode calls, as `run` records them ---------------------------
def test_the_lm_eval_door_records_the_thread_dependent_calls_as_run_does(discotex_run):
    from abricot_local.lm_eval import requests as lm_requests
    from abricot_local.record import read_run

    opened = lm_requests.open_model({"model": "fake", "backend": "fake"})
    try:
        lm_requests.loglikelihood(opened.backend, [("Uno.\n\nDue", " tre"), ("Quattro", " cinque")])
        run_kernels = read_run(discotex_run).provenance.to_dict()["kernels"]
        assert opened.provenance["kernels"] == run_kernels  # the same keys and values: thread_dependent 0
        opened.backend.counters.thread_dependent = 3  # counted as scored: read when lm-eval asks, after scoring
        assert opened.provenance["kernels"]["thread_dependent"] == 3
        assert list(opened.provenance["kernels"])[-1] == "thread_dependent"
    finally:
        opened.backend.close()


# -- 5a, 5b. a plan's repr names its problem; an unknown option lists every keyword --------------------------------
def test_a_plans_repr_names_a_task_with_a_problem():
    args = dict(backend="fake", data={"abricot": str(FIXTURE)}, limit=2)
    fine, over = api.plan("fake", "abricot_abs", n_ctx=8192, **args), api.plan("fake", "abricot_abs", n_ctx=64, **args)
    assert "problem" not in repr(fine) and over.models[0].tasks[0].problem
    assert repr(over).startswith("Plan(fake: 2 items, ") and "a problem in abricot_abs" in repr(over)


@pytest.mark.parametrize("call", [api.plan, api.evaluate])
def test_an_unknown_option_lists_every_keyword_the_call_takes(call):
    import inspect

    with pytest.raises(UsageError, match=r"Did you mean: sample\?") as err:
        call("fake", "abricot_abs", backend="fake", sampel=3)
    listed = " ".join(str(err.value).split())
    own = [p for p in inspect.signature(call).parameters if p != "options"]
    assert all(re.search(rf"\b{p}\b", listed) for p in [*own, "threads", "n_ctx", "data_dir"]), listed


# -- 5d. one rule: an on/off option takes True/False, as "on"/"off"; no other text option takes a bool ---------------
def test_an_on_off_option_takes_a_bool_by_one_rule():
    from abricot_local.api.arguments import fits, option_hints
    from abricot_local.backends import option_specs
    from abricot_local.option_fields import parse

    specs = {s.name: s for s, _ in option_specs() if s.kind is not None}
    assert {n for n, s in specs.items() if s.switch} >= {"flash_attn", "extra_bufts"}
    for name, spec in specs.items():
        takes = spec.kind is bool or spec.switch
        assert fits(True, option_hints()[name]) == takes, name
        if spec.switch:
            assert (parse(spec, True), parse(spec, False)) == ("on", "off")
    with pytest.raises(UsageError, match=r"flash_attn must be 'auto', 'on', 'off', or True/False \('on'/'off'\), "
                                         r"got 3 \(int\)"):
        api.plan("gemma-3-270m", "abricot_abs", flash_attn=3)


def test_lm_eval_model_dir_typed_as_a_number_by_lm_eval_is_a_folder_name():
    """lm-eval's model_args parser makes `model_dir=2024` an int: it is a folder's name all the same."""
    from abricot_local.lm_eval.requests import request_of

    assert request_of({"model": "fake", "backend": "fake", "model_dir": 2024}).model_dirs == ("2024",)
