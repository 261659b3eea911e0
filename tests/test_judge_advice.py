"""The grow advice says what its items are for (analysis/reproduction.grow_advice): a verdict that cannot tell yet
is settled by them; one that cannot tell at all (a correlation short of 10 answers off its most common value, in a
--sample run) is only judged on them, never promised settled."""

from __future__ import annotations

from types import SimpleNamespace as NS

from abricot_local.analysis.reproduction import UNDEFINED, UNSETTLED, grow_advice


def advice(*checks, sample=12, limit=None):
    published = NS(checks=[NS(verdict=v, items_to_settle=m, reasons=()) for v, m in checks])
    return grow_advice(published, NS(sample=sample, limit=limit), lambda m: f"grow to {m}")


def test_items_that_only_give_a_correlation_its_interval_are_not_said_to_settle_it():
    said = advice((UNDEFINED, 18))
    assert said.startswith("to judge what cannot tell: about 18 items (the fewest it is judged on at all, not what "
                           "settles it)") and "to settle" not in said and said.endswith("grow to 18")


def test_items_that_would_settle_it_are_said_so_and_the_larger_figure_speaks():
    assert advice((UNSETTLED, 40)).startswith("to settle what cannot tell yet: about 40 items;")
    assert advice((UNSETTLED, 40), (UNDEFINED, 18)).startswith("to settle what cannot tell yet: about 40 items;")
    assert advice((UNSETTLED, 18), (UNDEFINED, 60)).startswith("to judge what cannot tell: about 60 items")


def test_a_limit_runs_items_are_drawn_anew_as_before():
    said = advice((UNDEFINED, 30), sample=None, limit=20)
    assert said.startswith("to settle what cannot tell yet: about 30 items;") and "in a new run" in said
