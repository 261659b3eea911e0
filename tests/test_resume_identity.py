"""A resume's refusal and a verdict's advice say what is so (record/io.py, analysis/reproduction.py): the same
model file called by a path instead of its alias is no difference (its SHA-256 is its identity), the refusal's
last words name what differs; a run made --until-settled is told to give --max-items; a correlation that cannot
tell under the 10-answer rule says about how many items would hold 10 answers off the most common one."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from abricot_local import record as rec
from abricot_local.analysis import baselines
from abricot_local.analysis import reproduction as rp
from abricot_local.analysis.correlation_ci import too_few_off
from abricot_local.errors import recorded_words, render
from abricot_local.tasks.base import MetricInput

SHA = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def manifest(model: str, sha, *, n_ctx: int = 4096, sample: int | None = 20) -> rec.Manifest:
    return rec.Manifest.from_dict({
        "config": {"model": model, "backend": "llama.cpp", "tasks": ["discotex"], "limit": None, "sample": sample,
                   "seed": 1234, "n_ctx": n_ctx},
        "model_sha256": sha, "data_sha256": {"discotex": ["ab" * 32]}, "task_versions": {"discotex": "1"}})


ALIAS, PATH = "gemma-3-270m", "/models/gemma-3-270m-q4_k_m.gguf"


def test_the_same_file_by_its_path_is_the_same_model():
    alias = manifest(ALIAS, SHA)
    assert rec.resume_refusal("OUT", alias, manifest(PATH, SHA)) is None  # the same run
    assert rec.growth(alias, manifest(PATH, SHA, sample=30)) == (20, 30)  # and it grows by its path
    text = render(rec.resume_refusal("OUT", alias, manifest(PATH, SHA, n_ctx=2048)))
    assert "n_ctx: recorded 4096, given 2048" in text, text  # what really differs stays
    assert "the model" not in text and "model file" not in text, text  # no claim that another file is needed
    assert text.endswith("; the same options are needed"), text


@pytest.mark.parametrize("sha", [None, "synthetic:fake"])
def test_a_synthetic_model_keeps_comparing_names(sha):
    text = render(rec.resume_refusal("OUT", manifest(ALIAS, sha), manifest(PATH, sha)))
    assert f"the model: recorded {ALIAS}, given {PATH}" in text, text
    assert text.endswith("the same model is needed"), text


def test_the_tail_names_what_differs():
    other = manifest(PATH, "cd" * 32, n_ctx=2048)
    text = render(rec.resume_refusal("OUT", manifest(ALIAS, SHA), other))
    assert "its config and model file differ" in text, text
    assert text.endswith("the same model, options and model file are needed"), text
    data = replace(manifest(ALIAS, SHA), data_sha256={"discotex": ("ef" * 32,)})
    assert render(rec.resume_refusal("OUT", manifest(ALIAS, SHA), data)).endswith("; the same data is needed")


def write_run(folder, m: rec.Manifest, **config) -> None:
    """A finished run's results.json in ``folder``: ``m`` its manifest, its config with ``config`` over it."""
    folder.mkdir()
    doc = {"schema_version": rec.SCHEMA_VERSION, "model": {"name": m.config.model}, "tasks": {},
           "config": {**m.config.to_dict(), **config}, "manifest": m.to_dict()}
    rec.write_record(folder / rec.RESULTS, rec.Record.from_dict(doc))


def test_a_run_until_settled_is_told_to_give_max_items(tmp_path):
    m = manifest(ALIAS, SHA, sample=5)
    smaller = replace(m, config=replace(m.config, sample=3))
    write_run(tmp_path / "plain", m)
    plain = render(rec.resume_refusal(tmp_path / "plain", m, smaller))
    assert "give sample=5 or more" in plain and "max_items" not in plain, plain  # a --sample run: sample
    folder = tmp_path / "settled"  # the same run, made --until-settled and bounded at 5
    write_run(folder, m, until_settled=True, max_items=5)
    text = render(rec.resume_refusal(folder, m, smaller))
    assert f"cannot resume {folder} with max_items=3" in text and "give max_items=5 or more" in text, text
    assert "sample=" not in text, text
    worded = render(rec.resume_refusal(folder, m, smaller), recorded_words)  # the command line's words
    assert "--max-items 5 or more" in worded and "--until-settled" in worded, worded
    other = replace(m, config=replace(m.config, sample=9, seed=7))  # a larger bound, and another seed
    assert "(max_items=9 with nothing else changed would have grown it)" in render(
        rec.resume_refusal(folder, m, other))


WHY = "fewer than 10 items away from a vector's most common value (5): a correlation's interval is not read yet"


def judge(off, n=10, total=127, **kw):
    return rp.judge(0.319, (-0.2, 0.7), 0.30, 0.05, n=n, total=total, correlation=True, why=WHY, off=off, **kw)


def test_the_ten_answer_rule_estimates_the_items_that_would_hold_ten():
    v = judge(5)  # 5 of 10 off the most common answer: about 20 would hold 10
    assert v.kind == rp.UNDEFINED and v.items == math.ceil(10 * 10 / 5) == 20
    assert v.line.endswith("about 20 items would give 10 such answers at this run's rate"), v.line
    assert judge(3, n=13).items == math.ceil(130 / 3)
    capped = judge(1, n=80)  # 800 at this rate: the task's 127 give its exact value
    assert capped.items == 127 and "about 800 items" in capped.line and "all 127" in capped.line, capped.line
    none = judge(0)
    assert none.items is None and "no estimate" in none.line, none.line
    assert judge(None).items is None and judge(None).line == f"cannot tell: {WHY}"  # no count given: as before
    advice = rp.grow_advice(SimpleNamespace(checks=[SimpleNamespace(verdict=v.kind, items_to_settle=v.items)]),
                            SimpleNamespace(sample=10, limit=None), lambda m: f"grow to {m}")
    assert "about 20 items" in advice and "grow to 20" in advice, advice
    limited = judge(5, drawn=False)  # a --limit run: still told its items are no draw, with the estimate
    assert limited.items == 20 and "no draw of its 127" in render(limited.line)


def test_the_count_reaches_the_verdict_typed():
    x = np.array([1.0] * 5 + [2.0, 3.0, 2.0, 3.0, 4.0])  # 5 of 10 off the most common answer
    y = np.arange(10, dtype=float)
    assert too_few_off("pearson", [x, y]) == 5 and too_few_off("pearson", [np.arange(12.0)] * 2) is None
    task = SimpleNamespace(metric_inputs=lambda s: [MetricInput("pearson", "pearson", x, y)],
                           options=SimpleNamespace(seed=1234), margin=lambda name: 0.05)
    ev = baselines.evidence(task, [None] * 10, 127)
    assert ev.off == {"pearson": 5} and "pearson" not in ev.within
