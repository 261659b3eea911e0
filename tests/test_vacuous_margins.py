"""A margin no difference can exceed is no verdict (metrics.covered_difference, the sibling of the published verdict's
metrics.covered): a difference of two accuracies lies in [-1, 1], of two correlations in [-2, 2]. compare's
equivalence verdicts at such a margin say cannot tell, never equivalent; a ladder's keep line shows no quant as good
with one (a rule's recorded verdict too); ``run --quants --until-settled`` refuses one before any item is scored. A
margin up to the width is judged as before (at the width two runs at either end still differ by M). Fake backend,
in-process; 20 invented DISCOTEX items."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from abricot_local import metrics
from abricot_local.analysis import equivalence as eq
from abricot_local.cli import cli
from abricot_local.errors import UsageError
from conftest import rewrite_run
from invented_data import write_discotex

FAKE = ("--backend", "fake", "--tasks", "discotex", "--n-ctx", "4096")
MODELS = ('[fake-q8]\nbackend = "fake"\nbase = "fakebase"\nquant = "Q8_0"\n\n'
          '[fake-q2]\nbackend = "fake"\nbase = "fakebase"\nquant = "Q2_K"\n')
COVERS = "covers every value the difference takes"


def invoke(*args, code: int = 0):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == code, r.output
    return r


def test_a_difference_is_covered_only_above_its_width():
    acc, r = metrics.BOUNDS["accuracy"], metrics.BOUNDS["pearson"]
    width = acc[1] - acc[0]
    assert metrics.covered_difference(1.5, acc) and metrics.covered_difference(width + 1e-9, acc)
    assert not metrics.covered_difference(width, acc) and not metrics.covered_difference(0.02, acc)
    assert metrics.covered_difference(2.5, r) and not metrics.covered_difference(1.5, r)
    assert not metrics.covered_difference(2.0, r)
    assert not metrics.covered_difference(1e9, None)  # bounds not known: never covered
    assert "[-1, 1]" in metrics.covered_difference(1.5, acc) and "[-2, 2]" in metrics.covered_difference(2.5, r)


def row(stat: str, diff: float, ci90=(0.0, 0.0), changed: int = 20):
    """A compare.py MetricComparison row (duck-typed) of 40 items, a - b = ``diff``."""
    b = round(diff * 40)
    detail = {"a_only": max(b, 0) + 3, "b_only": max(-b, 0) + 3, "changed": changed}
    return SimpleNamespace(a="q2", b="q8", diff=diff, ci90=ci90, stat=stat, n=40, task="t", metric=stat, note="",
                           detail=detail)


@pytest.mark.parametrize("stat,diff,ci90,width", [("accuracy", 0.05, (0.0, 0.0), 1.0),
                                                    ("pearson", 0.01, (-0.05, 0.07), 2.0)])
def test_compares_verdict_at_a_covering_margin_cannot_tell_and_under_it_is_as_before(stat, diff, ci90, width):
    m = row(stat, diff, ci90)
    (e,) = eq.judge([m], [("q2", "q8")], {}, width + 0.5)
    assert e.kind == eq.UNDEFINED and COVERS in e.line and "equivalent within" not in e.line and not e.like_line
    (at,) = eq.judge([m], [("q2", "q8")], {}, width)  # at the width the verdict can still fail: judged as before
    assert at.kind == eq.classify(at.diff, at.ci90, width) == eq.EQUIVALENT and COVERS not in at.line


def test_a_ladders_keep_line_shows_no_quant_as_good_at_a_covering_margin():
    from abricot_local.analysis.ladder import Rung, choices
    from abricot_local.report.ladder import choice_text

    def ladder(margin: float):
        (e,) = eq.judge([row("accuracy", 0.0)], [("q2", "q8")], {}, margin)
        look = SimpleNamespace(verdict=eq.EQUIVALENT, words=eq.words(eq.EQUIVALENT, margin), margin=margin, n=40, k=1,
                               note="", exact=False)  # a rule's verdict, recorded before such a margin was refused
        rule = SimpleNamespace(look=look, looks=2, next_look=None, max_items=None, reach=None)
        return choices([Rung("b", "t", "q8", "Q8_0", "", None, None, n=40),
                        Rung("b", "t", "q2", "Q2_K", "q8", None, None, n=40, verdict=e, settled=rule)])[0]

    vacuous, kept = ladder(1.5), ladder(0.5)
    assert vacuous.kept is None and vacuous.rungs[0].kind == eq.UNDEFINED
    assert choice_text(vacuous).startswith("No quant is shown as good as Q8_0") and COVERS in choice_text(vacuous)
    assert kept.kept is not None and kept.kept.by_rule and kept.kept.words == "equivalent within 0.5"


def plan(stat: str, margin: float | None):
    task = SimpleNamespace(key="t", primary_metric=stat, margin=lambda metric: 0.05,
                           metric_inputs=lambda samples: [SimpleNamespace(name=stat, stat=stat)])
    return SimpleNamespace(runs=[SimpleNamespace(task=task)], margin=margin, model_label="q2")


def test_a_rungs_question_at_a_covering_margin_is_refused_and_under_it_asked():
    from abricot_local.analysis.questions import pair_questions

    with pytest.raises(UsageError, match="waits for no verdict that cannot fail: q2 vs q8 t.pearson: .*"
                       r"\[-2, 2\]"):
        pair_questions(plan("pearson", 2.5), "q8")
    (q, metric), = pair_questions(plan("pearson", 2.0), "q8")["t"]
    assert (q.margin, metric, q.paired) == (2.0, "pearson", True)
    assert pair_questions(plan("accuracy", None), "q8")["t"][0][0].margin == 0.05


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """20 invented items, the fake q8's run and a copy with 3 answers changed."""
    tmp = tmp_path_factory.mktemp("vacuous")
    data = write_discotex(tmp / "discotex", per_source=10)
    models = tmp / "models.toml"
    models.write_text(MODELS, encoding="utf-8")
    ref = tmp / "q8"
    invoke("run", "fake-q8", "--models", models, *FAKE, "--data-dir", data, "--out", ref)
    seen = []

    def change(task, s):
        seen.append(s["id"])
        if len(seen) > 3:
            return s
        lp = s["logprobs"]  # answered by its runner-up, put 0.1 nats ahead
        top, second = sorted(lp, reverse=True)[:2]
        k = lp.index(second)
        return {**s, "pred": k, "logprobs": [v + (top - second + 0.1 if j == k else 0) for j, v in enumerate(lp)]}

    other = rewrite_run(ref, tmp / "q2", "fake-q2", change)
    return tmp, data, models, ref, other


def test_compare_says_cannot_tell_at_a_covering_margin_and_judges_under_it(made):
    _, _, _, ref, other = made
    out = invoke("compare", other, ref, "--margin", 1.5).output
    assert COVERS in " ".join(out.split()) and "equivalent within 1.5" not in out
    doc = json.loads(invoke("compare", other, ref, "--margin", 1, "--format", "json").output)
    assert doc["equivalence"]
    for e in doc["equivalence"]:
        assert e["kind"] == eq.classify(e["diff"], tuple(e["ci90"]), 1.0) != eq.UNDEFINED, e["line"]


def test_a_ladder_until_settled_refuses_a_covering_margin_before_any_item(made):
    tmp, data, models, _, _ = made
    out = tmp / "ladder"
    r = invoke("run", "fake-q2", "--quants", "Q2_K,Q8_0", "--models", models, *FAKE, "--data-dir", data,
               "--until-settled", "--margin", 1.5, "--max-items", 20, "--out", out, code=2)
    words = " ".join(r.output.split())
    assert "--until-settled waits for no verdict that cannot fail: fake-q2 vs fake-q8 discotex.accuracy" in words
    assert "a margin of 1 or under can fail" in words and not out.exists()
