"""A published verdict claims only what its items allow (a researcher's review, issue FQ): a constant model's fixed-n
verdict says what more items can do (only where the constant side varies; all N give the exact value) and offers the
command that scores the whole task in each door's words, as the near-constant branch offers its estimate; a margin
that covers every value the metric takes from the published one (metrics.BOUNDS) is never "reproduced" (cannot tell,
and --until-settled refuses to wait for it); the 10-answer rule's warning says a side whose values all differ is
that, not near-constant, the rule unchanged. Fake backend, in-process."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from abricot_local.analysis import reproduction as rp
from abricot_local.cli import cli
from abricot_local.errors import render
import test_constant_answers

ROW = test_constant_answers.ROW
registry, one_answer = test_constant_answers.registry, test_constant_answers.one_answer  # its fixtures
WHOLE = "more items help only if the constant side varies over them: all 127 of the task's items give its exact value"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_a_constant_models_fixed_n_verdict_offers_the_whole_task_in_each_doors_words(tmp_path, registry,
                                                                                      abricot_file, one_answer):
    from abricot_local.api.calls import _grow_hint
    from abricot_local.record import read_run

    out = tmp_path / "o"
    r = invoke("run", "fake-as-llama", "--models", registry, "--tasks", "abricot_inc", "--protocol", "calamita",
               "--data", f"abricot={abricot_file}", "--sample", 20, "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "results.json").read_text())
    check = next(c for c in doc["published"]["checks"] if c["metric"] == "pearson")
    assert check["verdict"] == "cannot tell" and check["value"] != check["value"]  # NaN: every answer the same
    assert check["items_to_settle"] == 127 and check["reasons"][0].endswith(WHOLE), check
    assert doc["published"]["method"] == rp.METHOD == 8
    said = " ".join(r.output.split())
    assert "to judge what cannot tell: all 127 items of the task (its exact value); the run grows to --sample 127" \
        in said and "about 127" not in said, r.output
    assert f"--sample 127 --tasks abricot_inc --out {out} --resume" in said, r.output  # (argv: pytest's, in-process)
    record = read_run(out)  # the API's door: its own call, the same rule
    advice = rp.grow_advice(record.published, record.config, lambda m: _grow_hint(out, m, record.config))
    assert advice.startswith("to judge what cannot tell: all 127 items of the task") and \
        advice.endswith("resume=True, sample=127)"), advice


def test_a_nan_metric_below_n_offers_every_item_a_limit_run_too_and_none_at_n():
    why = "the model gave the same answer, '1', to every item"
    v = rp.judge(math.nan, None, 0.18, 0.05, n=20, total=127, correlation=True, why=why)
    assert v.kind == rp.UNDEFINED and v.items == 127 and v.line.endswith(WHOLE)
    limited = rp.judge(math.nan, None, 0.18, 0.05, n=20, total=127, correlation=True, why=why, drawn=False)
    assert limited.items == 127 and rp.DRAWN_CANNOT_TELL + "the run's metric is undefined" in limited.line
    assert "no draw of its 127" in render(limited.line) and limited.line.endswith(WHOLE)
    exact = rp.judge(math.nan, None, 0.18, 0.05, n=127, total=127, correlation=True, why=why)
    assert exact.items is None and "more items" not in exact.line  # the whole task scored: nothing more to offer


@pytest.mark.parametrize("published, bounds, reach", [(0.30, (-1.0, 1.0), 1.3), (-0.6, (-1.0, 1.0), 1.6),
                                                      (0.25, (0.0, 1.0), 0.75)])
def test_a_margin_covering_every_value_from_the_published_one_is_never_reproduced(published, bounds, reach):
    for margin in (reach + 1e-9, reach + 0.2, 10.0):
        v = rp.judge(published + 0.01, (published - 0.02, published + 0.04), published, margin, n=40, total=127,
                     correlation=bounds[0] < 0, bounds=bounds)
        assert v.kind == rp.UNDEFINED and "covers every value the metric takes" in v.line, (margin, v.line)
        assert f"a margin of {reach:.3g} or under can fail" in render(v.line) and v.items is None
    below = rp.judge(published + 0.01, (published - 0.02, published + 0.04), published, reach - 0.01, n=40,
                     total=127, correlation=bounds[0] < 0, bounds=bounds)
    assert below.kind == rp.REPRODUCED  # it could have failed: a value far enough away differs
    assert rp.covered(published, reach, bounds) == "" and rp.covered(published, 99.0, None) == ""


def test_run_margin_that_cannot_fail_is_cannot_tell_and_until_settled_refuses_it(tmp_path, claims, abricot_file):
    base = ("run", "fake-as-llama", "--models", claims, "--data", f"abricot={abricot_file}", "--backend", "fake",
            "--n-ctx", "8192", "--tasks", "abricot_abs", "--margin", "1.5")
    r = invoke(*base, "--sample", 12, "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    (check,) = json.loads((tmp_path / "o" / "results.json").read_text())["published"]["checks"]
    assert check["verdict"] == "cannot tell" and "reproduced within" not in r.output
    assert "the margin +-1.5 covers every value the metric takes ([-1, 1]) from the published 0.3" in \
        check["reasons"][0] and "a margin of 1.3 or under can fail (--margin M)" in check["reasons"][0]
    r = invoke(*base, "--until-settled", "--max-items", 20, "--out", tmp_path / "u")
    assert r.exit_code != 0 and "--until-settled waits for no verdict that cannot fail" in r.output, r.output
    assert not (tmp_path / "u").exists()


def test_a_side_whose_values_all_differ_is_said_so_the_rule_unchanged():
    from abricot_local.metrics import MIN_CORRELATION_ITEMS, few_words, interval_read
    from abricot_local.tasks.base import MetricInput

    gold = np.array([0, 1, 2, 3, 4, 0, 1, 2, 3, 4], float)
    words = few_words(MetricInput("pearson_expected", "pearson", np.linspace(0.1, 0.9, 10), gold))
    assert words == ("pearson_expected rests on 10 items whose values of pearson_expected's model side all differ "
                     "(9 off any one; 10 off one need 11 items) and 8 items off the most common value of "
                     "pearson_expected's gold side (2 of 10 the same): its value is shown, its interval is not read "
                     "below 10 items off each side's most common value"), words
    near = few_words(MetricInput("r", "pearson", np.array([1.0] * 8 + [2.0, 3.0]), gold))
    assert "2 items off the most common value of r's model side (8 of 10 the same)" in near  # near-constant: as before
    distinct = np.linspace(0.1, 0.9, MIN_CORRELATION_ITEMS + 1)
    spread = np.arange(MIN_CORRELATION_ITEMS + 1, dtype=float)
    assert not interval_read("pearson", distinct[:-1], spread[:-1]) and interval_read("pearson", distinct, spread)
