"""Non-finite log-probs are errors, never metrics (issue 16)."""

from __future__ import annotations

import json

import pytest

from abricot_local.errors import AbricotError, ModelError, NonFiniteError, ResultsError
from abricot_local.metrics import require_finite


def sample(i, logprobs):
    return {"id": f"item_{i}", "logprobs": logprobs, "pred": 0, "gold": 0}


def test_finite_samples_pass():
    require_finite([sample(i, [-1.5, -0.25, -3.0]) for i in range(4)], "discotex")
    require_finite([sample(0, [0, -2])], "abricot_abs")  # ints are finite numbers too


@pytest.mark.parametrize("bad", [
    [float("nan"), -1.0], [-1.0, float("-inf")], [float("inf")], None, [], [-1.0, None], "NaN",
], ids=["nan", "-inf", "inf", "null", "empty", "null_value", "string"])
def test_missing_or_non_finite_logprobs_are_an_error_naming_the_items(bad):
    samples = [sample(0, [-1.0, -2.0]), sample(1, bad), sample(2, [-0.5, -0.7]), sample(3, bad)]
    with pytest.raises(ResultsError) as err:
        require_finite(samples, "discotex")
    text = str(err.value)
    assert "task discotex" in text and "item_1, item_3" in text and "item_0" not in text and "\n" not in text


def test_samples_read_back_from_jsonl_with_nan_are_refused(tmp_path):
    """What `report --verify` / `check` read: json writes NaN as a bare NaN token and reads it back."""
    path = tmp_path / "samples-discotex.jsonl"
    path.write_text("".join(json.dumps(sample(i, [float("nan")] * 5)) + "\n" for i in range(12)))
    samples = [json.loads(line) for line in path.read_text().splitlines()]
    with pytest.raises(ResultsError, match=r"12 of 12 samples .*item_0, item_1, item_2, item_3, item_4 and 7 more"):
        require_finite(samples, "discotex")


def test_non_finite_error_is_a_refused_model():
    assert issubclass(NonFiniteError, ModelError) and issubclass(NonFiniteError, AbricotError)
    assert NonFiniteError.exit_code == 2
