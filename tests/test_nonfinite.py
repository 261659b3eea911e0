"""Non-finite log-probs are errors, never metrics (issue 16)."""

from __future__ import annotations

import json

import pytest

from abricot_local.errors import AbricotError, ModelError, NonFiniteError, ResultsError
from abricot_local.metrics import require_finite
from abricot_local.record import Sample


def sample(i, logprobs):  # built in code, unchecked: what require_finite must catch
    return Sample(id=f"item_{i}", logprobs=tuple(logprobs) if isinstance(logprobs, list) else logprobs, pred=0, gold=0)


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
    path.write_text("".join(json.dumps(sample(i, [float("nan")] * 5).line) + "\n" for i in range(12)))
    samples = [Sample.from_dict(json.loads(line)) for line in path.read_text().splitlines()]
    with pytest.raises(ResultsError, match=r"task discotex: 12 .*item_0, item_1, item_2, item_3, item_4 and 7 more"):
        require_finite(samples, "discotex")


def test_non_finite_error_is_a_refused_model():
    assert issubclass(NonFiniteError, ModelError) and issubclass(NonFiniteError, AbricotError)
    assert NonFiniteError.exit_code == 2


@pytest.mark.parametrize("bad, found", [(float("nan"), "1 NaN, 0 infinite of 4"),
                                        (float("inf"), "0 NaN, 1 infinite of 4")])
def test_a_non_finite_logit_row_names_the_item_and_position(bad, found):
    from abricot_local.backends.llama_cpp.session import LlamaSession
    from abricot_local.cli.options import flags
    from abricot_local.core import finite_log_softmax
    from abricot_local.errors import render

    with pytest.raises(NonFiniteError) as err:
        finite_log_softmax([0.5, bad, -1.0, 2.0], label="task_1_ted_test_7", position=42)
    text = str(err.value)
    assert "task_1_ted_test_7" in text and "position 42" in text and found in text
    assert "SHA-256" in text and "flash" not in text  # no backend's advice unless its session gives it
    with pytest.raises(NonFiniteError) as err:  # the llama.cpp session's advice, in each door's words
        finite_log_softmax([0.5, bad], label="x", position=0, advice=LlamaSession.nonfinite_advice)
    assert "flash_attn=off" in str(err.value) and "n_gpu_layers=0" in str(err.value)  # Python's
    cli = render(err.value.raw(), flags)  # the command line's
    assert "--flash-attn off" in cli and "--n-gpu-layers 0" in cli and "SHA-256" in cli


def test_a_finite_row_is_its_log_softmax():
    from abricot_local.core import finite_log_softmax, log_softmax

    row = finite_log_softmax([0.5, 3.0, -1.0, 2.0], label="x", position=0)
    assert row.tolist() == pytest.approx(log_softmax([0.5, 3.0, -1.0, 2.0]).tolist())
    assert float(sum(2.718281828459045 ** v for v in row)) == pytest.approx(1.0)
