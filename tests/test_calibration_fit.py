"""A calibration's fit (run/calibration.py): the two pairs of timings solved for the costs of a token, a decode
call and an output row, fed as numbers or through a clock the fake session advances (never the machine's own
speed). A row the pairs' spread does not resolve (a busy machine) is estimated from the token's cost and the
output head's FLOPs, said in the speed line; a degenerate fit (a row of 0) is never stored; a ladder's rungs
calibrated in turn are all kept; an entry an earlier version stored degenerate is one line in the plan."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from abricot_local.backends.fake import FakeBackend
from abricot_local.backends.options import ScoringOptions
from abricot_local.cli import cli
from abricot_local.errors import AbricotError, render
from abricot_local.run import calibration
from abricot_local.run.cost import Measured
from abricot_local.run.model_facts import ModelFacts
from conftest import FIXTURE

N, ROWS = 256, 32
CALLS, PART_CALLS = 1, 8  # the prompt whole in one call (n_batch 512), in 8 parts
X, Y, Z = 1e-3, 1e-2, 5e-4  # seconds per token, per call, per row


def timings(x=X, y=Y, z=Z, *, repeats=3, row_noise=(0.0, 0.0, 0.0), spells=(0.0, 0.0, 0.0)) -> calibration.Timings:
    """The timings of costs x, y, z; ``row_noise[k]``: seconds added to the k-th all-rows timing (a slow spell
    on one side of the pair), ``spells[k]``: seconds added to both sides of the k-th row pair."""
    whole = N * x + CALLS * y + z
    parts = N * x + PART_CALLS * y + z
    one = ROWS * x + y + z
    every = ROWS * x + y + ROWS * z
    return calibration.Timings(N, CALLS, PART_CALLS, ROWS, (whole,) * repeats, (parts,) * repeats,
                               tuple(one + spells[k] for k in range(repeats)),
                               tuple(every + spells[k] + row_noise[k] for k in range(repeats)))


GEMMA = ModelFacts(params=100326016, attention=18432.0, width=640.0, n_vocab=262144, bytes=253113024,
                   basis="its GGUF header")  # gemma-3-270m's header (cost.gguf_facts)


def test_a_fit_gives_the_costs_back_and_is_not_degenerate():
    made = calibration.fit(timings(), load_s=1.5)
    m = made.measured
    assert (m.token_s, m.call_s, m.row_s) == pytest.approx((X, Y, Z), rel=1e-9)
    assert m.prompt_tokens == N and m.load_s == 1.5 and made.row == "" and calibration.degenerate(m) == ""


def test_slow_spells_on_both_sides_of_a_pair_cancel_and_one_outlier_does_not_move_the_median():
    made = calibration.fit(timings(spells=(0.4, 0.0, 2.0), row_noise=(0.0, 0.3, 0.0)), load_s=1.5)
    assert made.measured.row_s == pytest.approx(Z, rel=1e-9) and made.row == ""


def test_resolved_is_a_median_clear_of_its_spread():
    assert calibration.resolved([3e-3, 3.1e-3, 2.9e-3]) == pytest.approx(3e-3)
    assert calibration.resolved([2e-3, 2e-3, 2e-3]) == 2e-3  # no spread at all: resolved
    # per row, 9 pairs on gemma-3-270m with a load average of 4.6 on 2 cores
    busy = [-21.8e-3, -13.8e-3, 37.6e-3, 68.3e-3, 15.3e-3, 106.4e-3, -41.4e-3, -8.8e-3, 11.6e-3]
    assert calibration.resolved(busy) is None  # median 11.6 ms, robust standard error 12.9 ms
    assert calibration.resolved([-1e-3, -2e-3, -1.5e-3]) is None


# a busy machine's rows: per row -39.5, 60.5 and 15.5 ms, their median above 0 but not resolved
BUSY = dict(repeats=3, row_noise=tuple(d * (ROWS - 1) for d in (-40e-3, 60e-3, 15e-3)))


def test_a_row_lost_in_noise_is_estimated_from_the_token_and_the_output_heads_flops():
    made = calibration.fit(timings(**BUSY), load_s=1.5, facts=GEMMA)
    m = made.measured
    ratio = GEMMA.row_flops / GEMMA.flops((N - 1) / 2)
    assert 1.5 < ratio < 1.7  # gemma-3-270m: a row (640 x 262,144) costs 1.6 of its tokens
    assert m.row_s == pytest.approx(ratio * m.token_s, rel=1e-12) and m.row_s > 0 and not calibration.degenerate(m)
    # the whole prompt is still what the costs add up to (its one row at the estimated cost)
    whole = N * X + CALLS * Y + Z
    assert N * m.token_s + CALLS * m.call_s + m.row_s == pytest.approx(whole, rel=1e-12)
    assert m.call_s == pytest.approx(Y, rel=1e-9)
    assert made.row.startswith(f"an output row estimated as {ratio:.3g} tokens") and "noise" in made.row


def test_without_facts_a_negative_row_is_degenerate_and_a_positive_one_kept():
    low = calibration.fit(timings(row_noise=(-1.0, -1.0, -1.0)), load_s=1.5)
    assert low.measured.row_s == 0.0 and low.measured.token_s > 0
    assert calibration.degenerate(low.measured).startswith("measured.row_s is 0.0, a degenerate fit")
    noisy = calibration.fit(timings(**BUSY), load_s=1.5)  # its median is above 0: the best there is
    assert noisy.measured.row_s > 0 and noisy.row == ""
    assert calibration.degenerate(Measured(X, N, Y, 1e-9, 1.0)) == ""  # small is not degenerate


def test_the_engine_is_timed_in_pairs_and_a_slow_spell_on_one_rows_timing_does_not_move_the_fit(monkeypatch):
    """The fake session advances a clock by known costs; the second all-rows decode also by a slow spell."""
    from abricot_local.backends import fake

    clock, seen = [0.0], [0]
    x, y, z = 3e-3, 20e-3, 1.5e-3
    decode = fake.FakeSession.decode

    def timed_decode(self, entries):
        rows = sum(e[3] for e in entries)
        clock[0] += len(entries) * x + y + rows * z
        if rows == ROWS:
            seen[0] += 1
            clock[0] += 0.5 if seen[0] == 2 else 0.0
        return decode(self, entries)

    monkeypatch.setattr(fake.FakeSession, "decode", timed_decode)
    monkeypatch.setattr(calibration.time, "perf_counter", lambda: clock[0])
    t = calibration.timings(FakeBackend("fake", ScoringOptions(n_batch=64)))
    assert len(t.one_row) == len(t.all_rows) >= calibration.MIN_REPEATS and len(t.whole) == len(t.parts) >= 1
    assert (t.calls, t.part_calls, t.rows, t.tokens) == (4, 8, ROWS, calibration.PROMPT_TOKENS)
    m = calibration.fit(t, load_s=0.5).measured
    assert (m.token_s, m.call_s, m.row_s) == pytest.approx((x, y, z), rel=1e-6)


FACTS = ModelFacts(params=1e8, attention=2e4, width=640.0, n_vocab=32000, bytes=200_000_000, basis="its GGUF header")
OTHER = ModelFacts(params=1e9, attention=1e5, width=2048.0, n_vocab=32000, bytes=2_000_000_000, basis="its header")
SETTINGS = FakeBackend.speed_settings(ScoringOptions())


def cal(row_s: float, when: str, facts=FACTS, sha="synthetic:m", row="") -> calibration.Calibration:
    return calibration.Calibration("m", sha, SETTINGS, calibration.host(), Measured(X, N, Y, row_s, 1.5),
                                   facts, when, row)


def legacy(row_s: float, sha: str) -> dict:
    """An entry as an earlier version stored it (no ``row``): a degenerate fit among them."""
    d = cal(row_s, "2026-02-01T00:00:00+00:00", sha=sha).to_json()
    del d["row"]
    return d


def test_a_degenerate_fit_is_never_stored():
    calibration.store(cal(Z, "2026-01-01T00:00:00+00:00"))
    before = calibration.cache_file().read_text()
    with pytest.raises(ValueError, match="a degenerate fit"):
        calibration.store(cal(0.0, "2026-02-01T00:00:00+00:00"))
    assert calibration.cache_file().read_text() == before  # the one before, untouched and used
    assert calibration.speed_for("synthetic:m", SETTINGS, FACTS).per_row == Z


def test_a_ladders_rungs_calibrated_in_turn_on_a_busy_machine_are_all_kept_and_used(monkeypatch):
    """Issue: of three rungs calibrated in turn on a busy machine only the last was left, and not used: each fit
    was degenerate, written beside the others, then dropped by the next store, which rewrote the file from the
    entries read() can use. Now each rung's row is estimated, each calibration stored and used."""
    import abricot_local.models.given as given

    path = calibration.cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "calibrations": [legacy(0.0, "2" * 64)]}))  # a rung's, degenerate
    monkeypatch.setattr(given, "load", lambda ref, options, force: FakeBackend("m", options))
    rungs = {"0" * 64: 1.0, "1" * 64: 1.2, "2" * 64: 1.4}  # each rung's speed, relative
    for sha, f in rungs.items():
        monkeypatch.setattr(calibration, "timings", lambda backend, f=f: timings(X * f, Y * f, Z * f, **BUSY))
        calibration.calibrate(SimpleNamespace(label=f"rung-{sha[0]}", sha256=sha), ScoringOptions(), SETTINGS, GEMMA)
    cache = calibration.read()
    assert sorted(c.sha256 for c in cache.calibrations) == sorted(rungs) and not cache.notes
    speeds = [calibration.speed_for(sha, SETTINGS, GEMMA) for sha in rungs]
    assert all(s.source == "calibrated" and s.per_row > 0 and s.how for s in speeds)
    assert speeds[0].per_token < speeds[1].per_token < speeds[2].per_token  # each rung its own


def test_an_old_degenerate_entry_is_one_line_used_for_nothing():
    path = calibration.cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "calibrations": [legacy(0.0, "synthetic:m")]}))
    (note,) = calibration.read().notes
    assert "\n" not in note and "calibration 1 ignored (measured.row_s is 0.0, a degenerate fit" in note
    assert render(note).endswith("); calibrate=True measures it again")  # the Python door's words
    assert calibration.speed_for("synthetic:m", SETTINGS, FACTS) is None
    assert calibration.speed_for("synthetic:other", SETTINGS, OTHER) is None  # no zero row cost scaled


def run_dry(*args):
    return CliRunner().invoke(cli, ["run", "m", "--backend", "fake", "--tasks", "abricot", "--data",
                                    f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "2", "--dry-run", *args],
                              catch_exceptions=False)


def test_the_plan_says_an_old_fit_is_degenerate():
    path = calibration.cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "calibrations": [{**legacy(0.0, "synthetic:m"), "facts": None}]}))
    r = run_dry()
    said = " ".join(r.stdout.split())
    assert r.exit_code == 0 and "a degenerate fit" in said and "--calibrate measures it again" in said, said
    assert "no calibration yet" in said and "0.00 ms per output row" not in said


def test_an_estimated_row_is_kept_and_said_in_the_speed_line():
    row = "an output row estimated as 1.6 tokens, the output head's FLOPs over a token's: this machine's noise hid"
    calibration.store(cal(Z, "2026-01-01T00:00:00+00:00", facts=None, row=row))
    assert json.loads(calibration.cache_file().read_text())["calibrations"][0]["row"] == row
    assert calibration.speed_for("synthetic:m", SETTINGS, None).how == row
    said = " ".join(run_dry().stdout.split())
    assert f"calibrated on this machine 2026-01-01T00:00:00+00:00 ({row})" in said, said
    assert "(an output row" not in " ".join(run_dry("--n-batch", "64").stdout.split())  # other settings: no speed


def test_calibrate_refuses_a_degenerate_fit_in_one_line_and_stores_nothing(monkeypatch):
    import abricot_local.models.given as given

    calibration.store(cal(Z, "2026-01-01T00:00:00+00:00"))
    before = calibration.cache_file().read_text()
    monkeypatch.setattr(given, "load", lambda ref, options, force: FakeBackend("m", options))
    monkeypatch.setattr(calibration, "timings", lambda backend: timings(row_noise=(-1.0, -1.0, -1.0)))
    ref = SimpleNamespace(label="m", sha256=None)
    with pytest.raises(AbricotError) as err:
        calibration.calibrate(ref, ScoringOptions(), SETTINGS, None)
    assert "\n" not in str(err.value) and "nothing stored: calibrate=True again" in str(err.value)
    assert calibration.cache_file().read_text() == before
    monkeypatch.setattr(calibration, "timings", lambda backend: timings(**BUSY))
    made = calibration.calibrate(ref, ScoringOptions(), SETTINGS, GEMMA)  # with facts: estimated, stored, used
    assert made.row and calibration.speed_for("synthetic:m", SETTINGS, GEMMA).per_row == made.measured.row_s > 0
