"""A senior review's small findings, each fixed at its rule:

1. the lm-eval door's "no few-shot pool" warning named ``--num_fewshot 1``, the loader's own probe, a value no user
   gave (lm-eval's num_fewshot never reaches the loaders): it names the shots without a value (lm_eval/tasks/loaders);
2. `runs` advised a sharded sweep's models' merges all into one folder (``sws1/merged``: the second merge refused):
   each model's into its own, by `merge`'s rule for a sweep's folder (run.merge_advice.merged_folder);
3. an export's recorded data won over ``--data abricot_abs=FILE`` (a recorded ``abricot`` pair looked up first):
   the data given wins for each task it names (analysis.lm_eval_input.given_wins);
4. the HTML forest plot drew no whisker for a withheld interval and never said why: its caption says it, as the PNG
   figures and tables do (frames.no_interval_words);
5. ``tables.render(rep, 'csv', table='prompts')`` said ``which=prompts``, no parameter of render's;
6. reproduction.judge's docstring cited baselines.undefined (now metrics.undefined);
7. ``--shot-sampler`` at 0 shots was accepted and recorded where ``--shot-seed`` is refused: both follow one rule.
"""

from __future__ import annotations

import logging
import math
import shutil
from dataclasses import replace
from types import SimpleNamespace

import pytest
from conftest import FIXTURE

from abricot_local.errors import DataError, UsageError, opt

# the fake run test_lm_eval_readback_same.py makes (finished_run makes it once a session)
FAKE = ("run", "fake", "--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192",
        "--limit", "4")


def test_the_pool_warning_names_no_shots_the_user_did_not_give(monkeypatch, caplog):
    import abricot_local.tasks as tasks
    from abricot_local.lm_eval.tasks import loaders

    class NoPool:
        def __init__(self, shots):
            self.shots = shots

        def rows_and_pool(self):
            if self.shots:
                raise DataError(f"{opt('shots', self.shots)} draws shots from the train file; or use {opt('shots', 0)}")
            return [], []

    loaders._door()  # its modules imported before make_task is replaced (one binding it would keep the stand-in)
    monkeypatch.setattr(tasks, "make_task", lambda name, options: NoPool(options.shots))
    monkeypatch.setattr(loaders, "_warn", lambda task: None)
    monkeypatch.setattr(loaders, "_dataset", lambda splits: splits)
    loaders._discotex.cache_clear()
    with caplog.at_level(logging.WARNING, logger="abricot_local.lm_eval"):
        loaders.discotex(data_dir="/nowhere")
    loaders._discotex.cache_clear()
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.startswith("discotex: no few-shot pool (--num_fewshot (simple_evaluate's num_fewshot) draws shots")
    assert "num_fewshot 1" not in said and "num_fewshot=1" not in said
    assert "use --num_fewshot 0 (simple_evaluate's num_fewshot=0)" in said  # advice keeps its value


def test_runs_advises_each_model_of_a_sharded_sweep_its_own_merged_folder(finished_run, tmp_path, monkeypatch):
    from abricot_local.record import read_record
    from abricot_local.run import shards_listed

    made = finished_run(*FAKE)
    base = read_record(made / "results.json").manifest

    def shard(model: str, k: int):
        return replace(base, config=replace(base.config, model=model, shard=f"{k}/2"))

    found = {tmp_path / folder / model: shard(model, k) for k, folder in ((1, "sws1"), (2, "shard-2-of-2"))
             for model in ("fake-as-llama", "fake2")}  # two sweeps, each of a shard: a folder per model
    monkeypatch.setattr(shards_listed, "recorded", found.get)
    said = shards_listed.listed([SimpleNamespace(path=p, complete=True) for p in found],
                                lambda folders, out: f"merge {' '.join(map(str, folders))} --out {out}")
    outs = [line.rsplit("--out ", 1)[1] for text in said for line in text.splitlines() if "--out " in line]
    root = tmp_path / "sws1" / "merged"
    assert outs == [str(root / "fake-as-llama"), str(root / "fake2")]  # merge's rule for a sweep's: OUT/MODEL


def test_the_data_given_wins_over_an_export_s_recorded_data_by_task_name(finished_run, tmp_path):
    import abricot_local

    run = abricot_local.load_run(finished_run(*FAKE))
    where = run.to_lm_eval(tmp_path / "exp")
    other = tmp_path / "other.csv"
    shutil.copyfile(FIXTURE, other)
    back = abricot_local.load_run(where, data={"abricot_abs": str(other)})
    assert back.record.tasks["abricot_abs"].data[0].path == str(other)  # given: wins over the recorded `abricot`
    assert back.record.tasks["abricot_inc"].data[0].path == str(FIXTURE)  # not given: the recorded file


def test_the_forest_plot_says_a_withheld_interval_and_why():
    from abricot_local.report import forest

    key = "abricot_abs.pearson"
    column = {"key": key, "task": "abricot_abs", "metric": "pearson", "chance": 0.0}
    rows = [{"label": "m-q4", "kind": "run", "cells": {key: [0.3, math.nan, math.nan, "pearson rests on 3 answers"]}},
            {"label": "m-q8", "kind": "run", "cells": {key: [0.4, 0.2, 0.6]}}]
    fig = forest.figure(column, rows)
    assert "; m-q4: no interval: pearson rests on 3 answers, no whisker" in fig["caption"]
    assert "m-q8" not in fig["caption"]
    assert len([s for s in fig["shapes"] if s[1].get("class") == "whisker"]) == 1  # m-q8's only


def test_render_names_its_own_parameters():
    from abricot_local.report import sample_table, tables

    with pytest.raises(UsageError) as err:
        tables.render(None, "csv", table="prompts")
    assert "table=" in str(err.value) and "fmt=" in str(err.value) and "which" not in str(err.value)
    with pytest.raises(UsageError) as err:
        sample_table.render(None, "table")
    assert str(err.value).startswith("the samples table is written as csv or json") and "which" not in str(err.value)


def test_judge_cites_metrics_undefined():
    from abricot_local import metrics
    from abricot_local.analysis import reproduction

    assert "metrics.undefined" in reproduction.judge.__doc__ and "baselines.undefined" not in reproduction.judge.__doc__
    assert callable(metrics.undefined)


@pytest.mark.parametrize("shots,protocol", [(0, None), (None, "calamita")])
def test_shot_sampler_at_0_shots_follows_shot_seed_s_rule(shots, protocol):
    from abricot_local.tasks import task_class, uses
    from abricot_local.tasks.options import TaskOptions

    cls = task_class("abricot_abs")
    for option in ({"shot_sampler": "shared"}, {"shot_seed": 7}):
        given = TaskOptions(shots=shots, protocol=protocol, **option)
        (unused,) = uses.unused_by(cls, given)
        assert "draws no shots" in unused[1]
        with pytest.raises(UsageError, match="is used by no task of this run"):
            uses.refuse_unused([cls], given)
    assert uses.unused_by(cls, TaskOptions(shots=3, shot_sampler="shared")) == []  # drawn: used
