"""The quant ladder's fixed-n verdict beside an --until-settled rule's is judged at the rule's margin (the run's
--margin), and says so; a rung without a rule keeps the task's margin. The ladder's answers changed say how many of
the reference's near ties and decisive answers each rung flipped (its flip rate), in text, JSON and the HTML page's
data alike. Fake backend, in-process; 40 invented DISCOTEX items, 20 scored."""

from __future__ import annotations

import json

import pytest

from conftest import FAKE_DISCOTEX as FAKE, fake_quants, invoke_ok as invoke, rewrite_run
from invented_data import write_discotex


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The two fake quants (every answer alike) swept --until-settled at a margin of 0.2, and run plainly."""
    tmp = tmp_path_factory.mktemp("margin_ties")
    data = write_discotex(tmp / "discotex", per_source=20)
    models = fake_quants(tmp / "models.toml", {"fake-q8": "Q8_0", "fake-q2": "Q2_K"})
    sweep, plain = tmp / "sweep", tmp / "plain"
    invoke("run", "fake-q2", "--quants", "Q2_K,Q8_0", "--models", models, *FAKE, "--data-dir", data,
           "--until-settled", "--margin", 0.2, "--looks", "10,20", "--max-items", 20, "--out", sweep)
    invoke("run", "fake-q2", "--quants", "Q2_K,Q8_0", "--models", models, *FAKE, "--data-dir", data,
           "--sample", 20, "--out", plain)
    return tmp, sweep, plain


def build(*folders):
    from abricot_local.report import tables

    return tables.build([str(f) for f in folders])


def rung(report):
    from abricot_local.analysis.ladder import ladders

    (r,) = [r for r in ladders(report.runs, given=report.given) if not r.is_reference]
    return r


def margin(s) -> float:
    lp = sorted(s["logprobs"], reverse=True)
    return lp[0] - lp[1]


def runner_up(s) -> dict:
    """``s`` answered by its runner-up, put 0.1 nats ahead."""
    lp = s["logprobs"]
    second = lp.index(sorted(lp, reverse=True)[1])
    return {**s, "pred": second, "logprobs": [v + (margin(s) + 0.1 if k == second else 0) for k, v in enumerate(lp)]}


def flipped(n_ties: int, n_decisive: int):
    """A rewrite moving the first ``n_ties`` near ties and ``n_decisive`` decisive answers (the reference's margin:
    under / at least 0.5 nats) to their runner-up; the ids it moved, by kind."""
    moved = {"tie": [], "decisive": []}

    def change(task, s):
        kind = "tie" if margin(s) < 0.5 else "decisive"
        if len(moved[kind]) >= (n_ties if kind == "tie" else n_decisive):
            return s
        moved[kind].append(s["id"])
        return runner_up(s)

    return change, moved


def samples(folder):
    return [json.loads(x) for x in (folder / "samples-discotex.jsonl").read_text(encoding="utf-8").splitlines()]


def test_the_fixed_n_verdict_beside_a_rule_is_judged_at_the_rules_margin_and_says_so(made):
    from abricot_local.analysis.compare import compare
    from abricot_local.analysis.equivalence import EQUIVALENT, UNSETTLED
    from abricot_local.analysis.settled import FIXED_N
    from abricot_local.report import html, ladder as rows, tables

    _, sweep, plain = made
    doc = json.loads((sweep / "fake-q2" / "results.json").read_text(encoding="utf-8"))
    rule_margin = doc["tasks"]["discotex"]["sequential"]["looks"][-1]["margin"]
    assert rule_margin == 0.2
    report = build(sweep / "fake-q8", sweep / "fake-q2")
    r = rung(report)
    assert r.settled is not None and r.settled.look.margin == rule_margin
    at_rule = {e.metric: e for e in compare(list(report.runs), margin=rule_margin).equivalence}[r.verdict.metric]
    at_task = {e.metric: e for e in compare(list(report.runs)).equivalence}[r.verdict.metric]
    assert at_task.margin < rule_margin and at_task.kind == UNSETTLED  # what the ladder showed before
    assert (r.verdict.margin, r.verdict.kind, r.verdict.ci90) == (rule_margin, at_rule.kind, at_rule.ci90)
    assert r.verdict.kind == EQUIVALENT and rows.fixed_n_text(r) == "identical; equivalent within 0.2"

    assert "rule's margin" in rows.FIXED_N_COLUMN and "rule's margin" in FIXED_N and "rule's margin" in rows.TITLE
    md = tables.render(report, "markdown", table="quant")
    assert f"| {rows.FIXED_N_COLUMN} |" in md and "| identical; equivalent within 0.2 (accuracy) |" in md
    j = next(x for x in json.loads(tables.render(report, "json", table="quant"))["quant_ladder"] if x["reference"])
    assert j["fixed_n"]["margin"] == j["verdict"]["margin"] == rule_margin and j["fixed_n"]["about"] == FIXED_N
    page = next(x for x in html.report_data(report, figures=False)["ladder"] if x["reference"])
    assert page["verdict_text"].endswith(f"{FIXED_N}: identical; equivalent within 0.2")

    plain_rung = rung(build(plain / "fake-q8", plain / "fake-q2"))  # no rule: the task's margin, today's words
    assert plain_rung.settled is None and plain_rung.verdict.margin == at_task.margin
    assert rows.verdict_text(plain_rung) == f"identical; cannot tell yet (~{plain_rung.verdict.items:,} items)"


def test_an_unsettled_fixed_n_verdict_beside_a_rule_names_the_rules_margin(made, tmp_path):
    from abricot_local.analysis.equivalence import UNSETTLED
    from abricot_local.report import ladder as rows

    _, sweep, _ = made
    right = [s["id"] for s in samples(sweep / "fake-q8") if s["pred"] == s["gold"]][:3]
    assert len(right) == 3  # three right answers broken: -0.15 of 20 items, its interval across -0.2
    moved = rewrite_run(sweep / "fake-q2", tmp_path / "fake-q2", "fake-q2",
                        lambda task, s: runner_up(s) if s["id"] in right else s)
    r = rung(build(sweep / "fake-q8", moved))
    assert r.settled is not None and r.verdict.margin == 0.2 and r.verdict.kind == UNSETTLED
    assert r.verdict.diff == -0.15 and r.verdict.ci90[0] < -0.2 < r.verdict.ci90[1]
    assert rows.fixed_n_text(r) == f"cannot tell yet within 0.2 (~{r.verdict.items:,} items)"


def test_the_ladder_says_how_many_of_the_reference_s_near_ties_and_decisive_answers_flipped(made, tmp_path):
    from abricot_local.report import html, ladder as rows, tables

    _, sweep, plain = made
    ref = samples(plain / "fake-q8")
    ties = sum(margin(s) < 0.5 for s in ref)
    assert 2 < ties < len(ref) - 1  # the fake backend's margins: both kinds, each more than is flipped below
    change, moved = flipped(2, 1)
    report = build(plain / "fake-q8", rewrite_run(plain / "fake-q2", tmp_path / "fake-q2", "fake-q2", change))
    r = rung(report)
    assert (len(moved["tie"]), len(moved["decisive"])) == (2, 1)
    assert (r.ref_near_ties, r.ref_decisive) == (ties, len(ref) - ties)
    assert {c.id for c in r.changes.near_ties} == set(moved["tie"])
    line = rows.changes_text(r)
    assert line.startswith("3 answers changed: ") and line.endswith(
        f"; 2 of {ties} near ties flipped, 1 of {len(ref) - ties} decisive")

    text = " ".join(tables.render(report, "table", table="quant").split())
    assert " ".join(line.split()[:4]) in text and "near ties (its top two choices closer than 0.5 nats" in text
    assert f"| {line} |" in tables.render(report, "markdown", table="quant")
    j = next(x for x in json.loads(tables.render(report, "json", table="quant"))["quant_ladder"] if x["reference"])
    assert j["changed"]["line"] == line and j["changed"]["near_ties"] == 2 and len(j["changed"]["decisive"]) == 1
    assert (j["changed"]["reference_near_ties"], j["changed"]["reference_decisive"]) == (ties, len(ref) - ties)
    page = next(x for x in html.report_data(report, figures=False)["ladder"] if x["reference"])
    assert page["changed"] == j["changed"]  # the page's cell shows changed.line

    same = rung(build(sweep / "fake-q8", sweep / "fake-q2"))  # nothing moved: what it could have flipped
    n = len(samples(sweep / "fake-q8"))
    swept = sum(margin(s) < 0.5 for s in samples(sweep / "fake-q8"))
    assert rows.changes_text(same) == f"no answer changed (of {n}: {swept} near ties, {n - swept} decisive)"
