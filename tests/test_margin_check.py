"""One margin check (reproduction.checked_margin) for every door that takes a margin: run's --margin, the published
verdict (reproduction.judge, where each published row is judged), compare and its equivalence verdicts, a --until-settled
question. A margin must be a finite number more
than 0: infinity, NaN, 0 and a negative number are refused, in one wording, before anything is read."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from abricot_local import api
from abricot_local.analysis import equivalence, reproduction, sequential
from abricot_local.cli import cli
from abricot_local.errors import UsageError
from abricot_local.run.request import run_options
from conftest import FIXTURE

FAKE = ("--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "4")
BAD = (math.inf, math.nan, 0.0, -0.05)
WORDS = "must be a finite number more than 0 (in the metric's own units)"


@pytest.fixture
def two(finished_run, tmp_path):
    a = finished_run("run", "fake", *FAKE)  # the session's, read only; its copy: a second run
    return a, finished_run("run", "fake", *FAKE, into=tmp_path / "b")


@pytest.mark.parametrize("bad", BAD)
def test_compare_refuses_a_margin_that_is_not_finite_and_positive_at_both_doors(two, bad):
    r = CliRunner().invoke(cli, ["compare", *map(str, two), f"--margin={bad}"])
    assert r.exit_code != 0 and f"--margin {WORDS}" in " ".join(r.output.split()), r.output
    with pytest.raises(UsageError, match=r"margin") as err:
        api.compare(*two, margin=bad)
    assert WORDS in str(err.value)


@pytest.mark.parametrize("bad", BAD)
def test_every_door_that_takes_a_margin_refuses_it_in_the_same_words(bad):
    def refused(call) -> str:
        with pytest.raises(UsageError) as err:
            call()
        return str(err.value)

    said = [refused(lambda: run_options({"margin": bad})),
            refused(lambda: reproduction.judge(0.3, (0.2, 0.4), 0.3, bad, n=10, total=100)),  # the published rows'
            refused(lambda: equivalence.judge((), (), {}, bad)),  # its own door: `inf` passed it
            refused(lambda: sequential.Question("q", "accuracy", bad, published=0.3)),
            refused(lambda: reproduction.checked_margin(bad))]
    assert all(WORDS in s and repr(bad) in s for s in said), said
    assert reproduction.checked_margin(0.05) == 0.05 and reproduction.checked_margin(1) == 1.0
