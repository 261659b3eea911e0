"""A bound of 0 is a value given, not "no bound": --max-items 0 is refused as -3 is (0 == False in Python dropped it,
and the run scored every item)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import abricot_local as al
from abricot_local.cli import cli
from abricot_local.errors import UsageError
from abricot_local.option_fields import from_values
from abricot_local.run.request import SettleOptions


@pytest.mark.parametrize("bound", [0, -3])
def test_max_items_below_one_is_refused_by_every_door(bound):
    with pytest.raises(UsageError, match="max_items must be at least 1"):
        al.plan("fake", "abricot_abs", until_settled=True, max_items=bound)
    out = CliRunner().invoke(cli, ["run", "fake", "--until-settled", "--max-items", str(bound), "--dry-run"])
    assert out.exit_code == 2 and "--max-items must be at least 1" in out.output


def test_an_option_a_class_lacks_given_as_zero_is_refused():
    with pytest.raises(UsageError, match="has no option"):
        from_values(SettleOptions, {"n_gpu_layers": 0}, owner="the run")
