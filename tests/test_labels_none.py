"""A run label names an option a run did not set as "no KEY", never as JSON (`max_items=null`)."""

from abricot_local.analysis.labels import RunIdentity, unique_labels


def test_an_unset_option_is_said_no_key():
    a = RunIdentity("gemma", options={"max_items": None, "seed": 1})
    b = RunIdentity("gemma", options={"max_items": 40, "seed": 1})
    assert unique_labels([a, b]) == ("gemma (no max_items)", "gemma (max_items=40)")
