"""A time prediction from a registry entry's facts (no file yet) states the band those facts can
promise (issue 39 item 4): the width a parameter count allows moves the prediction by up to 2x on
small models; from a GGUF header, the scaled error alone."""

from __future__ import annotations

from abricot_local.run.cost import SCALED_ERROR, Measured, Work, speed_from
from abricot_local.run.model_facts import ESTIMATED_WIDTH, HEADER_BASIS, ModelFacts, estimated_facts, widened

PROMPT = Work(1, 512, 1, 1, 512 * 511 // 2)
GEMMA = ModelFacts(params=1.0e8, attention=18 * 4 * 256, width=640, n_vocab=262144, bytes=253_000_000,
                   basis=HEADER_BASIS, total_params=2.68e8)  # Gemma 3 270M's header, as calibrated
MEASURED = Measured(token_s=0.03, prompt_tokens=512, call_s=0.05, row_s=0.01, load_s=1.0)


def speed_of(facts):
    return speed_from(MEASURED, GEMMA, facts, same=False, reference="gemma", when="now")


def test_registry_facts_widen_the_band_to_cover_every_width_their_parameter_count_allows():
    guess = estimated_facts(1.35e8, 270_000_000, 49152, "its registry entry (135M)")
    assert guess.width > 800  # the fit's width; SmolLM2-135M's header says 576
    speed = widened(speed_of, guess)
    assert speed.error > 1.0 and "the width is not known until its file is here" in speed.how
    # lopsided: a narrower model is much slower, a wider one barely faster; below, never the whole time
    assert SCALED_ERROR <= speed.below < 0.5 < 1.0 < speed.error
    predicted = speed.seconds(PROMPT)
    for width in (576, guess.width * ESTIMATED_WIDTH[0], guess.width * ESTIMATED_WIDTH[1]):
        at = speed_of(estimated_facts(1.35e8, 270_000_000, 49152, "x", width=width)).seconds(PROMPT)
        assert 1 - speed.below <= at / predicted <= 1 + speed.error, width
    assert abs(speed_of(guess).seconds(PROMPT) / predicted - 1) < 1e-12  # the central value is unchanged
    assert speed.to_json()["error_below"] == speed.below


def test_the_plan_shows_a_lopsided_bar_side_by_side():
    from abricot_local.console.plan import error_bar

    assert (error_bar(0.25), error_bar(0.25, 0.25), error_bar(0.0)) == (" ±25%", " ±25%", "")
    assert error_bar(1.43, 0.29) == " +143% / -29%"  # was " ±143%": a time below 0


def test_header_facts_keep_the_scaled_error():
    header = ModelFacts(params=1.0e8, attention=30 * 9 * 64, width=576, n_vocab=49152, bytes=105_000_000,
                        basis=HEADER_BASIS, total_params=1.35e8)
    kept = widened(speed_of, header)
    assert kept.error == kept.below == SCALED_ERROR and kept.error_below is None
