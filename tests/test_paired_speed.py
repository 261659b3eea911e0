"""The restricted paired interval near N decides most D from a window of each row's outcomes
(analysis/paired_exact._windowed: bounds, a D within MARGIN of its tail summed in full); the intervals are the very
ones summing every outcome of every row gives (the construction as it was: SUMMED above every size), bit for bit."""

from __future__ import annotations

import pytest

from abricot_local.analysis import paired_exact
from abricot_local.analysis.paired_exact import restricted_paired_set_ci

CELLS = [(45, 45, 380, 400, 0.9), (0, 60, 370, 400, 0.95), (40, 20, 560, 600, 0.8), (60, 0, 1450, 1500, 0.9),
         (45, 45, 1590, 1600, 0.99)]


def summed_in_full(monkeypatch, *cell, scan=False):
    """The slow reference: every D tested by summing every outcome of every row (no window)."""
    with monkeypatch.context() as m:
        m.setattr(paired_exact, "SUMMED", 10 ** 12)
        m.setattr(paired_exact, "_windowed", lambda *a: pytest.fail("the window was read"))
        return restricted_paired_set_ci(*cell, scan=scan)


@pytest.mark.parametrize("cell", CELLS)
def test_the_window_gives_the_interval_summing_every_outcome_gives(monkeypatch, cell):
    decided = []
    window = paired_exact._windowed
    monkeypatch.setattr(paired_exact, "_windowed", lambda *a: decided.append(window(*a)) or decided[-1])
    assert restricted_paired_set_ci(*cell) == summed_in_full(monkeypatch, *cell)  # the sizes as they are
    decided.clear()
    monkeypatch.setattr(paired_exact, "SUMMED", 0)  # the window wherever it can decide, small cells too
    got = restricted_paired_set_ci(*cell)
    assert any(d is not None for d in decided)  # the window decided some D
    assert got == summed_in_full(monkeypatch, *cell)  # floats compared exactly


def test_every_d_the_window_decides_is_decided_as_in_full(monkeypatch):
    cell = (45, 45, 380, 400, 0.9)
    monkeypatch.setattr(paired_exact, "SUMMED", 0)  # the window wherever it can decide
    assert restricted_paired_set_ci(*cell, scan=True) == summed_in_full(monkeypatch, *cell, scan=True)
