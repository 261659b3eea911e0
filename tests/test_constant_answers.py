"""A model that gives every item one answer (a real Gemma 0-shot run gave '1' to all 20): its Pearson r is undefined.
The published verdict's note names the side that is constant (metrics.constant_words through baselines.undefined) and
the task's correlations still defined over the items (read from its metric list); `--until-settled`'s advice says how
many items are off the commonest value (the look's own note) rather than only planning the next look. Fake backend,
its answers forced (the first choice far ahead) or its samples rewritten (conftest.rewrite_run)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import rewrite_run

ROW = "CALAMITA leaderboard: Llama-3.1-8B-Instruct"


@pytest.fixture
def registry(tmp_path):
    models = tmp_path / "models.toml"
    models.write_text(f'[fake-as-llama]\nbackend = "fake"\nn_ctx = 8192\nreproduces = "{ROW}"\n', encoding="utf-8")
    return models


@pytest.fixture
def one_answer(monkeypatch):
    """The fake backend with its first choice ahead of the others on every item (the others' scores kept: the
    probability-weighted score still varies)."""
    from abricot_local.backends import fake

    score_many = fake.FakeBackend.score_many
    monkeypatch.setattr(fake.FakeBackend, "score_many", lambda self, requests: [
        replace(s, logprobs=(max(s.logprobs) + 0.5, *s.logprobs[1:])) for s in score_many(self, requests)])


def run(models, data, out, *more):
    r = CliRunner().invoke(cli, [str(a) for a in (
        "run", "fake-as-llama", "--models", models, "--tasks", "abricot_inc", "--protocol", "calamita",
        "--data", f"abricot={data}", "--out", out, *more)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


def test_constant_words_name_the_side_that_is_constant():
    from abricot_local.metrics import constant_words
    from abricot_local.tasks.base import MetricInput

    def sample(pred, gold):
        return type("S", (), {"pred": pred, "pred_label": str(pred + 1), "gold": gold, "gold_label": str(gold + 1),
                              "choices": ()})()

    same_answer = [sample(1, g) for g in (0, 1, 2, 3)]
    x, y = np.array([s.pred for s in same_answer], float), np.array([s.gold for s in same_answer], float)
    assert constant_words(MetricInput("r", "pearson", x, y), same_answer) == \
        "the model gave the same answer, '2', to every item"
    same_gold = [sample(p, 4) for p in (0, 1, 2, 3)]
    x, y = np.array([s.pred for s in same_gold], float), np.array([s.gold for s in same_gold], float)
    assert constant_words(MetricInput("r", "pearson", x, y), same_gold) == "the gold labels are constant ('5')"
    both = [sample(0, 0)] * 3
    words = constant_words(MetricInput("r", "pearson", np.zeros(3), np.zeros(3)), both)
    assert words == "the model gave the same answer, '1', to every item and the gold labels are constant ('1')"
    # a side constant while the answers vary (a score, not the answer): named as that side of the metric
    assert constant_words(MetricInput("r_expected", "pearson", np.ones(4), np.arange(4.0)), same_gold) == \
        "the model's side of r_expected is the same (1) for every item"
    assert constant_words(MetricInput("r", "pearson", x, y + np.arange(4)), same_gold) == ""
    assert "a correlation needs 2" in constant_words(MetricInput("r", "pearson", x[:1], y[:1]), same_gold[:1])


def test_the_verdict_names_the_model_s_one_answer_and_the_correlation_still_defined(tmp_path, registry, abricot_file,
                                                                                    one_answer):
    r = run(registry, abricot_file, tmp_path / "o", "--sample", 20)
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    metrics = doc["tasks"]["abricot_inc@calamita"]["metrics"]
    lines = [json.loads(x) for x in (tmp_path / "o" / doc["tasks"]["abricot_inc@calamita"]["samples_file"])
             .read_text().splitlines()]
    answers = {s["pred_label"] for s in lines}
    assert len(answers) == 1 and metrics["pearson"] != metrics["pearson"]  # NaN
    check = next(c for c in doc["published"]["checks"]
                 if c["task"] == "abricot_inc@calamita" and c["metric"] == "pearson")
    assert check["verdict"] == "cannot tell"
    said = f"the model gave the same answer, {answers.pop()!r}, to every item"
    expected = metrics["pearson_expected"]  # the task declares it: read from its metric list, defined here
    assert expected is not None and expected == expected
    assert check["reasons"][0] == (f"cannot tell: the run's metric is undefined (NaN): {said}; the task's "
                                   f"pearson_expected ({expected:+.3f}) is defined over the same items (neither side "
                                   "constant); more items help only if the constant side varies over them: all 127 of "
                                   "the task's items give its exact value")
    assert said in r.stdout and "NaN: a constant vector" not in r.stdout


def test_a_rewritten_run_s_verdict_names_the_constant_side(tmp_path, registry, abricot_file):
    """The verdict's evidence over a run's samples rewritten: every answer the same, then every gold the same."""
    from abricot_local.analysis import baselines
    from abricot_local.record import read_run, read_samples
    from abricot_local.tasks import make_task
    from abricot_local.tasks.base import TaskOptions

    run(registry, abricot_file, tmp_path / "o", "--sample", 20)
    ref = next(r for r in baselines.find("CALAMITA leaderboard", "Llama-3.1-8B-Instruct")
               if r.task == "abricot_inc" and r.metric == "pearson")
    for name, change, said in (
            ("answers", lambda t, s: {**s, "pred": 2, "pred_label": "3", "logprobs": [
                max(s["logprobs"]) + 0.5 if k == 2 else x for k, x in enumerate(s["logprobs"])]},
             "the model gave the same answer, '3', to"),
            ("golds", lambda t, s: {**s, "gold": 0, "gold_label": "1"}, "the gold labels are constant ('1')")):
        folder = rewrite_run(tmp_path / "o", tmp_path / name, "fake-as-llama", change)
        record = read_run(folder)
        key, entry = next(iter(record.tasks.items()))
        task = make_task("abricot_inc", TaskOptions.from_config(record.task_config(key)))
        samples = read_samples(folder / entry.samples_file)
        check = baselines.check(ref, entry, key, baselines.evidence(task, samples, 127))
        assert check.verdict.kind == "cannot tell" and said in check.verdict.line, (name, check.verdict.line)
        # the task's other correlations (its metric list) defined over these items, each with its value
        values = {inp.name: entry.metrics[inp.name] for inp in task.metric_inputs([]) if inp.stat != "accuracy"}
        defined = [f"{k} ({v:+.3f})" for k, v in values.items() if v is not None and v == v]
        assert defined and f"the task's {', '.join(defined)} {'is' if len(defined) == 1 else 'are'} defined over " \
            "the same items (neither side constant)" in check.verdict.line
        assert ("pearson_continuous (" in check.verdict.line) == (name == "golds")  # the answers': undefined too


def test_until_settled_says_how_few_items_are_off_the_commonest_answer(tmp_path, registry, abricot_file, one_answer):
    from abricot_local.record import read_run
    from abricot_local.run import settle_record

    r = run(registry, abricot_file, tmp_path / "o", "--until-settled", "--max-items", 40)
    last = read_run(tmp_path / "o").tasks["abricot_inc@calamita"].sequential.to_dict()["looks"][-1]
    assert last["interval"] is None and "constant" in last["note"], last
    assert (f"not settled by --max-items 40, its last look: {ROW} abricot_inc@calamita.pearson: no interval at 40 "
            f"items ({last['note']}): more items help only if the answers vary; --max-items 80 plans a look at 80 "
            "items") in r.stdout
    # the API's advice is the same text (its own command)
    advice = settle_record.advice(read_run(tmp_path / "o"), lambda m: f"grow to {m}")
    assert f"no interval at 40 items ({last['note']})" in advice and advice.endswith("\n  grow to 80")
