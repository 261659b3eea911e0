"""A plan's cost only informs: what goes wrong making it is one warning, an AbricotError in its own words (its
options for the door to write, no class name), anything else with its type."""

from __future__ import annotations

from abricot_local.errors import UsageError, opt
from abricot_local.run import dry_run


def test_a_refused_cost_before_a_download_is_said_in_its_own_words(monkeypatch):
    said: list[str] = []

    def refused(*args, **kwargs):
        raise UsageError(f"nothing to cost: {opt('max_items', 3)} is below the first look")

    monkeypatch.setattr(dry_run, "model_cost", refused)
    assert dry_run.of_download(object(), said.append) is None
    assert said == [f"plan: not made before the download: nothing to cost: {opt('max_items', 3)} is below the "
                    "first look"]
    assert "UsageError" not in said[0]

    def broken(*args, **kwargs):
        raise RuntimeError("a fault")

    monkeypatch.setattr(dry_run, "model_cost", broken)
    assert dry_run.of_download(object(), said.append) is None
    assert said[-1] == "plan: not made before the download (RuntimeError: a fault)"
