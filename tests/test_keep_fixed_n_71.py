"""The quant ladder's keep line never tells a rung its rule left open a figure "at a fixed n" that the fixed-n verdict
beside it contradicts. Where that verdict (compare's, at the rule's margin) is settled over the rung's items, the line
says so, as a verdict that does not account for the looks, and no figure; where it cannot tell yet, its figure is
that verdict's own (the one its column says); the rule's own estimate (scaled from its last look's interval:
settled.fixed_n_needed) only labelled as such. One rule in text, JSON and the HTML page (analysis.ladder.Rung,
_standing). Before: a SmolLM2 Q2_K `equivalent within 0.3` at a fixed n over 20 items was told "~34 items would settle
it at a fixed n"; here, fake quants at --margin 0.2 were told "~25 items". Fake backend, in-process; 120 invented
DISCOTEX items, and rungs made by hand."""

from __future__ import annotations

import json

import pytest

from abricot_local.analysis.equivalence import EQUIVALENT, UNDEFINED, UNSETTLED, Equivalence
from abricot_local.analysis.ladder import Rung, choices
from abricot_local.analysis.sequential import Look
from abricot_local.analysis.settled import SCALED, SettledVerdict
from abricot_local.cli.options import flags
from abricot_local.errors import render
from abricot_local.report import ladder as rows
from conftest import FAKE_DISCOTEX as FAKE, fake_quants, invoke_ok as invoke
from invented_data import write_discotex

SETTLED_AT_FIXED_N = ("settled at a fixed n over these 20 items: equivalent within 0.2, a verdict that does not "
                      "account for the looks")


@pytest.fixture(scope="module")
def ladder_dir(tmp_path_factory):
    """fake-q8 and fake-q2 (every answer alike) as a --until-settled ladder at --margin 0.2, looks at 10 and 20,
    stopped at 20: the rule open at its last look (its 97.5% interval [-0.2, 0.2]), compare's 90% one over the same
    20 items [-0.125, 0.125]: equivalent within 0.2."""
    tmp = tmp_path_factory.mktemp("keep_fixed_n")
    data = write_discotex(tmp / "discotex", per_source=60)
    models = fake_quants(tmp / "models.toml", {"fake-q8": "Q8_0", "fake-q2": "Q2_K"})
    out = tmp / "lad"
    invoke("run", "fake-q8", "--quants", "Q8_0,Q2_K", "--models", models, *FAKE, "--data-dir", data,
           "--until-settled", "--margin", 0.2, "--looks", "10,20", "--max-items", 20, "--out", out)
    return out


def test_a_rung_whose_fixed_n_verdict_is_settled_is_told_so_not_a_figure_in_every_format(ladder_dir):
    from abricot_local.analysis.ladder import ladders
    from abricot_local.report import html, tables

    report = tables.build([str(ladder_dir / "fake-q8"), str(ladder_dir / "fake-q2")])
    (ref, q2) = ladders(report.runs, given=report.given)
    assert q2.settled.look.verdict == UNSETTLED and q2.settled.look.n == 20  # the rule: open at its last look
    assert rows.fixed_n_text(q2) == "identical; equivalent within 0.2" and q2.verdict.n == 20  # beside it: settled

    text = " ".join(render(tables.render(report, "table", table="quant"), flags).split())  # as `report` says it
    line = text[text.index("No quant is shown"):]
    assert ("cannot tell yet: Q2 (whether within 0.2: not settled over 20 items, the rule's verdict at look 2 of 2; "
            "the rule's next look is at 40 items: the run grown by --resume --until-settled --max-items 40; "
            f"{SETTLED_AT_FIXED_N})") in line, line
    assert "would settle it" not in line  # before: "~25 items would settle it at a fixed n"

    (j,) = [x["choice"] for x in json.loads(tables.render(report, "json", table="quant"))["quant_ladder"]
            if "choice" in x]
    (rung,) = j["cannot_tell_yet"]
    assert rung["items_to_settle"] is None and rung["fixed_n_settled"] == {"words": "equivalent within 0.2", "n": 20}
    assert SETTLED_AT_FIXED_N in j["line"] and "would settle it" not in j["line"]
    page = [x for x in html.report_data(report, figures=False)["ladder"] if x.get("choice")]
    assert [x["choice"]["line"] for x in page] == [j["line"]]  # the HTML page's line under the table: the same


def _rung(fixed_n: Equivalence, needed: int | None, next_look: int = 40, max_items: int | None = 40) -> list[Rung]:
    """F16 and a Q2_K its rule left open at its last look (20 items of 600, margin 0.2), the rule's own estimate
    ``needed`` (scaled from its look: settled.SCALED), compare's fixed-n verdict ``fixed_n`` beside it."""
    look = Look("q", 2, 20, 600, 0.975, 0.2, UNSETTLED, 0.0, (-0.2, 0.2), (-0.2, 0.2))
    rule = SettledVerdict(look, 2, "line", next_look, max_items, needed, SCALED)
    return [Rung("fakebase", "discotex", "f16", "F16", "", None, None, n=20),
            Rung("fakebase", "discotex", "q2_k", "Q2_K", "f16", None, None, n=20, verdict=fixed_n, settled=rule)]


def _fixed_n(kind: str, items: int | None = None) -> Equivalence:
    return Equivalence("Q2_K", "F16", "discotex", "accuracy", 0.2, 20, 0.0, (-0.125, 0.125), kind, items=items,
                       total=600)


def _line_and_record(rungs: list[Rung]) -> tuple[str, dict]:
    (c,) = choices(rungs)
    (j,) = [d["choice"] for d in rows.records(rungs) if "choice" in d]
    assert j["line"] == rows.choice_text(c)
    return render(rows.choice_text(c), flags), j["cannot_tell_yet"][0]


def test_an_open_fixed_n_verdicts_figure_is_its_own_the_one_its_column_says():
    """At 0.1 the fake quants' fixed-n verdict cannot tell yet (~26 items, its column); the rule's scaled estimate
    (~60) was said beside it as the fixed-n figure. Now the figure is the fixed-n verdict's own."""
    rungs = _rung(_fixed_n(UNSETTLED, items=26), needed=60)
    line, record = _line_and_record(rungs)
    assert rows.fixed_n_text(rungs[1]) == "cannot tell yet within 0.2 (~26 items)"
    assert line.endswith("the run grown by --resume --until-settled --max-items 40; ~26 items would settle it at a "
                         "fixed n)"), line
    assert "~60" not in line and record["items_to_settle"] == 26 and record["fixed_n_settled"] is None


def test_a_settled_fixed_n_verdict_drops_the_rules_far_estimate_from_the_line_and_the_json():
    """The rule's estimate (200) far beyond its next look (40) said "~200 items would settle it at a fixed n ... the run
    grown by --max-items 200 could": with the fixed-n verdict settled over those 20 items, none of it."""
    rungs = _rung(_fixed_n(EQUIVALENT), needed=200)
    line, record = _line_and_record(rungs)
    assert line.endswith("the rule's next look is at 40 items: the run grown by --resume --until-settled --max-items "
                         f"40; {SETTLED_AT_FIXED_N})"), line
    assert "200" not in line and record["items_to_settle"] is None
    seq = next(d for d in rows.records(rungs) if d["run"] == "q2_k")["sequential"]
    assert seq["needed"] is None and seq["could_settle"] is None and seq["items_to_settle"] == 40


def test_the_rules_own_estimate_is_labelled_for_what_it_is():
    """No fixed-n figure (its verdict cannot tell: no interval): the rule's own estimate, said to be scaled from its
    look's interval and not the fixed-n verdict's."""
    line, record = _line_and_record(_rung(_fixed_n(UNDEFINED), needed=60))
    assert line.endswith(f"; ~60 items would settle it at a fixed n ({SCALED}))"), line
    assert record["items_to_settle"] == 60 and record["items_basis"] == SCALED
