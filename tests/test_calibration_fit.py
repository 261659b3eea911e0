"""A calibration's fit (run/calibration.py): the three timings solved for the costs of a token, a decode call and
an output row, fed as numbers (no clock); a row's cost fitted to 0 is a degenerate fit, said in the plan, and
neither replaces the calibration before it nor scales another model's speed."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from abricot_local.backends.fake import FakeBackend
from abricot_local.backends.options import ScoringOptions
from abricot_local.cli import cli
from abricot_local.run import calibration
from abricot_local.run.cost import Measured, ModelFacts
from conftest import FIXTURE

N, PART, ROWS, N_BATCH = 256, 32, 32, 512  # one call for the prompt and for the rows, 8 for the parts
X, Y, Z = 1e-3, 1e-2, 5e-4  # seconds per token, per call, per row (a row under half its call)


def timings(x=X, y=Y, z=Z, rows_seconds=None):
    """The three timings of costs x, y, z (``rows_seconds``: the third as a busy machine measured it)."""
    t_rows = ROWS * x + y + ROWS * z if rows_seconds is None else rows_seconds
    return (N * x + y + z, N * x + 8 * y, t_rows)


def test_a_fit_gives_the_costs_back_and_is_not_degenerate():
    m = calibration.fit(N, PART, ROWS, N_BATCH, timings(), load_s=1.5)
    assert (m.token_s, m.call_s, m.row_s) == pytest.approx((X, Y, Z), rel=1e-9)
    assert m.prompt_tokens == N and m.load_s == 1.5 and calibration.degenerate(m) == ""


def test_a_row_swamped_by_noise_fits_to_zero_and_is_degenerate():
    # the rows' timing shorter than their tokens and call alone: a negative row cost, clipped to 0
    m = calibration.fit(N, PART, ROWS, N_BATCH, timings(rows_seconds=ROWS * X + Y - 2e-3), load_s=1.5)
    assert m.row_s == 0.0 and m.token_s > 0
    why = calibration.degenerate(m)
    assert why.startswith("measured.row_s is 0.0: a degenerate fit") and "scale" in why
    assert calibration.degenerate(Measured(X, N, Y, 1e-9, 1.0)) == ""  # small is not degenerate


FACTS = ModelFacts(params=1e8, attention=2e4, width=640.0, n_vocab=32000, bytes=200_000_000, basis="its GGUF header")
OTHER = ModelFacts(params=1e9, attention=1e5, width=2048.0, n_vocab=32000, bytes=2_000_000_000, basis="its header")
SETTINGS = FakeBackend.speed_settings(ScoringOptions())


def cal(row_s: float, when: str, facts=FACTS) -> calibration.Calibration:
    return calibration.Calibration("m", "synthetic:m", SETTINGS, calibration.host(), Measured(X, N, Y, row_s, 1.5),
                                   facts, when)


def test_a_degenerate_calibration_keeps_the_one_before_and_scales_nothing():
    calibration.store(cal(Z, "2026-01-01T00:00:00+00:00"))
    calibration.store(cal(0.0, "2026-02-01T00:00:00+00:00"))
    cache = calibration.read()
    assert [c.when for c in cache.calibrations] == ["2026-01-01T00:00:00+00:00"]  # the one before, still used
    assert len(cache.notes) == 1 and "calibration 2 ignored (measured.row_s is 0.0: a degenerate fit" in cache.notes[0]
    assert cache.notes[0].endswith("on a quiet machine measures it again")
    assert calibration.speed_for("synthetic:m", SETTINGS, FACTS).per_row == Z
    assert calibration.speed_for("synthetic:other", SETTINGS, OTHER).per_row > 0  # scaled from the one before
    calibration.store(cal(3e-3, "2026-03-01T00:00:00+00:00"))  # a usable one replaces both
    doc = json.loads(calibration.cache_file().read_text())
    assert [c["when"] for c in doc["calibrations"]] == ["2026-03-01T00:00:00+00:00"] and not calibration.read().notes


def test_with_only_a_degenerate_calibration_no_speed_is_made_of_it():
    calibration.store(cal(0.0, "2026-02-01T00:00:00+00:00"))
    assert calibration.speed_for("synthetic:m", SETTINGS, FACTS) is None
    assert calibration.speed_for("synthetic:other", SETTINGS, OTHER) is None  # no zero row cost scaled


def test_the_plan_says_the_fit_is_degenerate():
    calibration.store(cal(0.0, "2026-02-01T00:00:00+00:00", facts=None))
    r = CliRunner().invoke(cli, ["run", "m", "--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}",
                                 "--n-ctx", "8192", "--limit", "2", "--dry-run"], catch_exceptions=False)
    said = " ".join(r.stdout.split())
    assert r.exit_code == 0 and "a degenerate fit" in said, said
    assert "--calibrate on a quiet machine measures it" in said
    assert "no calibration yet" in said and "0.00 ms per output row" not in said
