"""A correlation made by a handful of items (a real Gemma Q4_K_M run gave '1' to 19 of 20 ABRICOT items: its
Pearson r of 0.21 was one item's) is recorded with its value and no interval, and a warning that says what it rests
on: metrics.with_ci, the run's table, results.json and `check` follow the rule correlation_ci reads for verdicts
(metrics.interval_read: each vector MIN_CORRELATION_ITEMS items off its most common value). Fake backend, its
answers forced: the first choice ahead on every item but the first k scored, which get the last choice."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from abricot_local import metrics
from abricot_local.cli import cli

MIN = metrics.MIN_CORRELATION_ITEMS


def near_constant(off: int, n: int = 30, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A prediction vector with ``off`` items away from its commonest value (1), and a varied gold one."""
    rng = np.random.default_rng(seed)
    x = np.ones(n)
    x[:off] = rng.integers(2, 6, off)
    return x, x + rng.normal(0.0, 1.5, n)


def test_the_threshold_is_the_verdicts_one():
    from abricot_local.analysis import stats

    assert metrics.MIN_CORRELATION_ITEMS == stats.MIN_CORRELATION_ITEMS


@pytest.mark.parametrize("stat", ["pearson", "spearman"])
def test_with_ci_keeps_the_value_and_withholds_the_interval_below_the_rule(stat):
    for off in (1, MIN - 1, MIN, MIN + 5):
        x, y = near_constant(off)
        assert metrics.off_mode(x) == off
        value, ci = metrics.with_ci(stat, x, y, seed=3)
        assert value == getattr(metrics, stat)(x, y) and math.isfinite(value)  # the formula's value, kept
        if off < MIN:
            assert all(math.isnan(c) for c in ci), (off, ci)
        else:
            assert ci == metrics.bootstrap_ci(stat, x, y, seed=3) and all(math.isfinite(c) for c in ci), (off, ci)
    # the gold side near-constant withholds it too; an accuracy is never withheld
    gold, varied = near_constant(MIN - 1)
    assert metrics.off_mode(varied) >= MIN
    assert all(math.isnan(c) for c in metrics.with_ci(stat, varied, gold, seed=3)[1])
    assert all(math.isfinite(c) for c in metrics.with_ci("accuracy", gold, np.ones(len(gold)), seed=3)[1])


def test_the_run_s_rule_is_the_verdict_s_rule():
    """correlation_ci (the published verdict's, --until-settled's) reads an interval exactly where the run records
    one."""
    from abricot_local.analysis.correlation_ci import correlation_ci

    for off in range(1, MIN + 4):
        x, y = near_constant(off, seed=off)
        _, ci, why = correlation_ci("pearson", [x, y], len(x), 127, 0.90, 1234)
        recorded = metrics.with_ci("pearson", x, y, seed=1234)[1]
        assert (ci is None) == any(math.isnan(c) for c in recorded) == (off < MIN), (off, why)
        assert (f"({off})" in why) == (off < MIN)


def test_few_words_say_what_the_value_rests_on():
    from abricot_local.record import Sample
    from abricot_local.tasks.base import MetricInput

    x, y = near_constant(1, n=20)
    samples = [Sample(id=f"i{k}", logprobs=(-1.0,) * 5, pred=int(p) - 1, gold=int(g) % 5)
               for k, (p, g) in enumerate(zip(x, np.arange(20)))]
    words = metrics.few_words(MetricInput("pearson", "pearson", x, np.arange(20.0) % 5), samples)
    assert words == (f"pearson rests on 1 answer off the model's most common one (19 of 20 the same): its value is "
                     f"shown, its interval is not read below {MIN} such answers")
    # a side that is not the answers (a score read from the probabilities) is named as the metric's side
    words = metrics.few_words(MetricInput("pearson_expected", "pearson", x * 0.5, np.arange(20.0)), [])
    assert words.startswith("pearson_expected rests on 1 item off the most common value of pearson_expected's "
                            "model side (19 of 20 the same)")
    # read, undefined (constant: constant_words says it) or an accuracy: nothing to say
    assert metrics.few_words(MetricInput("r", "pearson", *near_constant(MIN)), []) == ""
    assert metrics.few_words(MetricInput("r", "pearson", np.ones(20), np.arange(20.0)), []) == ""
    assert metrics.few_words(MetricInput("a", "accuracy", x, x), []) == ""


@pytest.fixture
def some_answers(monkeypatch):
    """The fake backend with its first choice ahead on every item but the first ``k[0]`` it scores, whose last
    choice is (the others' scores kept: the probability-weighted score still varies)."""
    from abricot_local.backends import fake

    k, seen = [1], []
    score_many = fake.FakeBackend.score_many

    def forced(self, requests):
        out = []
        for r, s in zip(requests, score_many(self, requests)):
            seen.append(r.label) if r.label not in seen else None
            pick = len(s.logprobs) - 1 if seen.index(r.label) < k[0] else 0
            out.append(replace(s, logprobs=tuple(max(s.logprobs) + 0.5 if j == pick else v
                                                 for j, v in enumerate(s.logprobs))))
        return out

    monkeypatch.setattr(fake.FakeBackend, "score_many", forced)
    return k


def run(tmp_path, data, out, *more):
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nn_ctx = 8192\n', encoding="utf-8")
    r = CliRunner().invoke(cli, [str(a) for a in (
        "run", "fake-as-llama", "--models", models, "--tasks", "abricot_abs", "--protocol", "calamita",
        "--data", f"abricot={data}", "--out", out, "--sample", 20, *more)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


def test_a_run_of_one_answer_off_records_no_interval_and_says_why(tmp_path, abricot_file, some_answers):
    from abricot_local.record import entry_samples, read_run
    from abricot_local.tasks import make_task
    from abricot_local.tasks.base import TaskOptions

    r = run(tmp_path, abricot_file, tmp_path / "o")
    key = "abricot_abs@calamita"
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    entry = doc["tasks"][key]
    m = entry["metrics"]
    record = read_run(tmp_path / "o")
    samples = entry_samples(tmp_path / "o", record.tasks[key], key)
    assert sorted(s.pred for s in samples) == [0] * 19 + [4]
    task = make_task("abricot_abs", TaskOptions.from_config(record.task_config(key)))
    for inp in task.metric_inputs(samples):
        ci = m[f"{inp.name}_ci95"]
        assert m[inp.name] == m[inp.name], inp.name  # every value defined: one answer differs
        read = metrics.interval_read(inp.stat, inp.x, inp.y)
        assert read == (inp.name in ("pearson_expected", "accuracy")), inp.name
        assert all(math.isfinite(c) for c in ci) if read else all(c != c for c in ci), (inp.name, ci)
        said = (f"{inp.name} rests on 1 answer off the model's most common one (19 of 20 the same): its value is "
                f"shown, its interval is not read below {MIN} such answers")
        assert (said in entry["warnings"]) == (not read) and (said in r.stdout) == (not read)
        line = next(x for x in r.stdout.splitlines() if x.split()[:2] == [key, inp.name])
        assert ("no interval" in line) == (not read) and "nan" not in line, line
    # every number recomputable from the samples: `check` re-scores and recomputes through the same function
    c = CliRunner().invoke(cli, ["check", str(tmp_path / "o")], catch_exceptions=False)
    assert c.exit_code == 0, c.output


def test_ten_answers_off_get_their_interval(tmp_path, abricot_file, some_answers):
    some_answers[0] = MIN
    run(tmp_path, abricot_file, tmp_path / "o")
    entry = json.loads((tmp_path / "o" / "results.json").read_text())["tasks"]["abricot_abs@calamita"]
    golds = [json.loads(x)["gold"] for x in (tmp_path / "o" / entry["samples_file"]).read_text().splitlines()]
    assert metrics.off_mode(golds) >= MIN  # the drawn items' gold side is varied enough: only the answers decide
    assert all(math.isfinite(c) for c in entry["metrics"]["pearson_ci95"])
    assert not any("rests on" in w for w in entry["warnings"])
