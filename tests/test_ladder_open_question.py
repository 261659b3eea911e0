"""A rung that cannot tell yet is said in the quant ladder's "which quant to keep" line as the open question it is
(``whether within 0.02: not settled over 20 items``), never as if it were within the margin (``within 0.02 over 20
items`` read as a finding of a rung at -0.200 [-0.411, +0.018]); the text and markdown lines, the JSON's ``line`` and
the HTML page's data are one wording. Rungs made by hand (no run)."""

from __future__ import annotations

from abricot_local.analysis.equivalence import UNSETTLED, Equivalence
from abricot_local.analysis.ladder import Rung, choices
from abricot_local.report import ladder as rows


def _rungs(margin: float) -> list[Rung]:
    worse_looking = Equivalence("Q4_0", "F16", "discotex", "accuracy", margin, 20, -0.2, (-0.411, 0.018), UNSETTLED,
                                items=55, total=600)
    return [Rung("b", "discotex", "f16", "F16", "", None, None, n=20),
            Rung("b", "discotex", "q4_0", "Q4_0", "f16", None, None, n=20, verdict=worse_looking)]


def test_a_rung_that_cannot_tell_yet_is_the_open_question_in_every_format():
    for margin in (0.02, 0.25):
        rungs = _rungs(margin)
        line = rows.choice_text(choices(rungs)[0])
        said = f"Q4_0 (whether within {margin:g}: not settled over 20 items; ~55 items would settle it)"
        assert f"cannot tell yet: {said}" in line, line
        assert f"(within {margin:g} over" not in line
        assert rows.choice_lines(rungs) == (line,)  # the text and markdown reports' line
        (j,) = [d["choice"] for d in rows.records(rungs) if "choice" in d]  # JSON
        (h,) = [d["choice"] for d in rows.page_records(rungs) if "choice" in d]  # the HTML page's data
        assert j["line"] == h["line"] == line
