"""The quant ladder says which quant to keep as far as its verdicts go, no further: the smallest quant (fewest bits)
shown as good as the reference within the margin (the smallest file where each records its size:
test_keep_smallest_file.py), with the margin and the items it rests on, or "No quant is shown
as good as F16 yet"; the rungs that cannot tell yet with the items each would need, those shown worse; the KLDs as
what they are. In text, markdown, JSON and the HTML page's data alike. compare's answers changed say how many near
ties and decisive answers the reference had, by the ladder's rule (changes.AnswerChanges.flips). Rungs made by hand
(no run), and one fake-backend pair of 12 invented DISCOTEX items, in-process."""

from __future__ import annotations

import json

import pytest

from abricot_local.analysis import stats
from abricot_local.analysis.equivalence import (BETTER, EQUIVALENT, NOT_WORSE, UNSETTLED, WORSE, Equivalence)
from abricot_local.analysis.kld import KldStats
from abricot_local.analysis.ladder import Rung, choices
from abricot_local.analysis.sequential import Look
from abricot_local.analysis.settled import SettledVerdict
from abricot_local.report import ladder as rows
from conftest import FAKE_DISCOTEX as FAKE, fake_quants, invoke_ok as invoke, rewrite_run
from invented_data import write_discotex


def verdict(quant: str, kind: str, *, margin: float = 0.02, n: int = 30, items: int | None = None) -> Equivalence:
    return Equivalence(quant, "F16", "discotex", "accuracy", margin, n, 0.0, (-0.01, 0.01), kind, items=items,
                       total=600)


def kld(mean: float) -> KldStats:
    return KldStats(900, mean, (mean / 2, mean * 2), mean, mean * 3, mean * 4, mean * 5, 0.9, n_items=3)


def ladder(*others: tuple[str, Equivalence | None] | Rung) -> list[Rung]:
    """F16's ladder of ``others`` (the most bits first), each a (quant, compare's verdict) or a rung made already."""
    out = [Rung("fakebase", "discotex", "f16", "F16", "", None, None, n=30)]
    for o in others:
        out.append(o if isinstance(o, Rung) else
                   Rung("fakebase", "discotex", o[0].lower(), o[0], "f16", None, None, n=30, verdict=o[1]))
    return out


def test_the_smallest_quant_shown_as_good_is_named_with_its_margin_and_items_beside_the_others():
    rungs = ladder(("Q8_0", verdict("Q8_0", WORSE)), ("Q6_K", verdict("Q6_K", BETTER)),
                   ("Q4_0", verdict("Q4_0", NOT_WORSE, n=24)), ("Q3_K", verdict("Q3_K", UNSETTLED, items=259)),
                   ("Q2_K", verdict("Q2_K", EQUIVALENT, margin=0.05, n=30)))
    (c,) = choices(rungs)
    assert c.kept.quant == "Q2_K" and [s.quant for s in c.having(WORSE)] == ["Q8_0"]
    line = rows.choice_text(c)
    assert line.startswith("Q2_K is the smallest quant by its name (fewest bits; no file size recorded) shown as good "
                           "as F16 (fakebase on discotex, accuracy): "
                           "equivalent within 0.05 over 30 items; also shown as good: Q6_K (better by more than 0.02 "
                           "over 30 items), Q4_0 (not worse by more than 0.02 over 24 items); ")
    assert "cannot tell yet: Q3_K (whether within 0.02: not settled over 30 items; ~259 items would settle it)" in line
    assert line.endswith("shown worse: Q8_0 (worse by more than 0.02 over 30 items)") and "KLD" not in line
    (j,) = [d["choice"] for d in rows.records(rungs) if "choice" in d]
    assert j["line"] == line and j["smallest_as_good"]["quant"] == "Q2_K" and j["smallest_as_good"]["margin"] == 0.05
    assert [s["quant"] for s in j["as_good"]] == ["Q6_K", "Q4_0", "Q2_K"]
    assert [(s["quant"], s["items_to_settle"]) for s in j["cannot_tell_yet"]] == [("Q3_K", 259)]
    assert [s["quant"] for s in j["worse"]] == ["Q8_0"]


def test_no_quant_shown_as_good_is_said_so_with_what_each_would_need_and_the_klds_as_no_verdict():
    q8 = Rung("fakebase", "discotex", "q8_0", "Q8_0", "f16", None, None, n=30,
              verdict=verdict("Q8_0", UNSETTLED, items=259), kld=kld(0.004))
    q2 = Rung("fakebase", "discotex", "q2_k", "Q2_K", "f16", None, None, n=30,
              verdict=verdict("Q2_K", UNSETTLED, items=stats.MAX_ITEMS), kld=kld(0.66))
    rungs = ladder(q8, ("Q4_0", None), q2)
    line = rows.choice_text(choices(rungs)[0])
    assert line.startswith("No quant is shown as good as F16 yet (fakebase on discotex, accuracy); cannot tell yet: "
                           "Q8_0 (whether within 0.02: not settled over 30 items; ~259 items would settle it), Q2_K (whether "
                           "within 0.02: not settled over 30 "
                           "items; no number of items settles it")
    assert "no common item: Q4_0" in line
    assert line.endswith("KLD from F16 (how far the distributions moved, not a verdict): Q8_0 0.0040, Q2_K 0.6600")
    (j,) = [d["choice"] for d in rows.records(rungs) if "choice" in d]
    assert j["smallest_as_good"] is None and j["no_common_item"] == ["Q4_0"]
    assert [k["quant"] for k in j["kld"]] == ["Q8_0", "Q2_K"]


def test_a_rung_a_rule_judged_is_read_by_its_rules_verdict_and_look():
    def settled(quant, kind, k, n, fixed_n):
        look = Look("q", k, n, 600, 0.9, 0.2, kind, 0.0, (-0.1, 0.1), (-0.1, 0.1))
        return Rung("fakebase", "discotex", quant.lower(), quant, "f16", None, None, n=n, verdict=fixed_n,
                    settled=SettledVerdict(look, 2, "line"))

    rungs = ladder(settled("Q8_0", EQUIVALENT, 1, 20, verdict("Q8_0", UNSETTLED, margin=0.2, n=20, items=70)),
                   settled("Q2_K", UNSETTLED, 2, 40, verdict("Q2_K", UNSETTLED, margin=0.2, n=40, items=101)))
    line = rows.choice_text(choices(rungs)[0])
    assert line == ("Q8_0 is the smallest quant by its name (fewest bits; no file size recorded) shown as good as F16 "
                    "(fakebase on discotex, accuracy): equivalent "
                    "within 0.2 over 20 items, the rule's verdict at look 1 of 2; cannot tell yet: Q2_K (whether within "
                    "0.2: not settled over 40 items, the rule's verdict at look 2 of 2; ~101 items would settle it at a fixed n)")


def margin(s) -> float:
    lp = sorted(s["logprobs"], reverse=True)
    return lp[0] - lp[1]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """fake-q8 and a fake-q4 whose first three answers moved to the runner-up, over 12 invented items."""
    tmp = tmp_path_factory.mktemp("ladder_choice")
    data = write_discotex(tmp / "discotex", per_source=6)
    models = fake_quants(tmp / "models.toml", {"fake-q8": "Q8_0", "fake-q4": "Q4_0"})
    invoke("run", "fake-q8", "--quants", "Q8_0,Q4_0", "--models", models, *FAKE, "--data-dir", data,
           "--sample", 12, "--out", tmp / "sweep")
    seen: list[str] = []

    def change(task, s):
        if len(seen) >= 3:
            return s
        seen.append(s["id"])
        lp = s["logprobs"]
        second = lp.index(sorted(lp, reverse=True)[1])
        return {**s, "pred": second, "logprobs": [v + (margin(s) + 0.1 if k == second else 0) for k, v in enumerate(lp)]}

    q4 = rewrite_run(tmp / "sweep" / "fake-q4", tmp / "moved" / "fake-q4", "fake-q4", change)
    return tmp / "sweep" / "fake-q8", q4


def test_the_report_and_compare_say_it_alike_in_every_format(pair):
    from abricot_local.report import html, tables

    ref, q4 = pair
    report = tables.build([str(ref), str(q4)])
    from abricot_local.analysis.ladder import ladders

    rungs = ladders(report.runs, given=report.given)
    (line,) = rows.choice_lines(rungs)
    (r,) = [r for r in rungs if not r.is_reference]
    c = choices(rungs)[0]
    assert c.reference == rungs[0].quant and [s.quant for s in c.rungs] == [r.quant]
    assert line.startswith(f"No quant is shown as good as {c.reference} yet" if c.kept is None else
                           f"{r.quant} is the smallest quant by its name (fewest bits; no file size recorded) shown "
                           f"as good as {c.reference}")
    assert "over all 12 items of the task (exact)" in line  # every item compared: the task's own difference
    assert " ".join(line.split()) in " ".join(tables.render(report, "table", table="quant").split())
    assert line in tables.render(report, "markdown", table="quant")
    j = next(x for x in json.loads(tables.render(report, "json", table="quant"))["quant_ladder"] if not x["reference"])
    assert j["choice"]["line"] == line
    page = next(x for x in html.report_data(report, figures=False)["ladder"] if not x["reference"])
    assert page["choice"] == j["choice"]

    samples = [json.loads(x) for x in (ref / "samples-discotex.jsonl").read_text(encoding="utf-8").splitlines()]
    ties = sum(margin(s) < 0.5 for s in samples)
    doc = json.loads(invoke("compare", ref, q4, "--format", "json").stdout)
    (ch,) = doc["answers_changed"]
    assert (ch["reference_near_ties"], ch["reference_decisive"]) == (ties, len(samples) - ties)
    assert ch["line"].endswith(f"{ch['near_ties']} of {ties} near tie{'s' if ties != 1 else ''} flipped, "
                               f"{len(ch['items']) - ch['near_ties']} of {len(samples) - ties} decisive")
    assert rows.changes_text(r) in ch["line"]  # one rule: the ladder's cell is compare's line
    assert "each of how many the reference had" in " ".join(invoke("compare", ref, q4).stdout.split())
