"""--sample at or above a task's items takes the whole task, whatever its number: a --resume judges by the items, so
``--sample 500`` on a task of 8 items and ``--sample 8`` are one run (either continues or returns the other; the
record keeps the sample as it was given, with its note that all 8 are scored), where ``--sample 8 --resume`` was
refused as a shrink. A sample below the task's items is still one. Fake backend, 8 invented DISCOTEX items."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.tasks.discotex import RELEASE
from invented_data import write_discotex

FAKE = ("run", "fake-model", "--backend", "fake", "--tasks", "discotex", "--n-ctx", "4096")
PER_SOURCE = 4
ITEMS = PER_SOURCE * len(RELEASE)


def invoke(*args, code: int = 0):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == code, r.output
    return r


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whole_task")
    data = write_discotex(tmp / "discotex", per_source=PER_SOURCE)
    said = [invoke(*FAKE, "--data-dir", data, "--sample", n, "--out", tmp / f"s{n}").output for n in (500, ITEMS)]
    assert f"--sample 500 asks for more items than the task has: all {ITEMS} are scored" in said[0]
    return tmp, data


@pytest.mark.parametrize("made, given", [(500, ITEMS), (ITEMS, 500), (500, ITEMS + 1)])
def test_a_sample_taking_the_whole_task_resumes_the_run_that_took_it(runs, made, given):
    tmp, data = runs
    out = tmp / f"s{made}"
    before = (out / "results.json").read_bytes()
    dry = invoke(*FAKE, "--data-dir", data, "--sample", given, "--out", out, "--resume", "--dry-run")
    assert f"{ITEMS} saved in --out, left out" in dry.output, dry.output
    r = invoke(*FAKE, "--data-dir", data, "--sample", given, "--out", out, "--resume")
    assert "nothing to score, nothing written" in r.output, r.output
    assert (out / "results.json").read_bytes() == before  # the record as it was: its sample as given


def test_a_sample_below_the_task_items_is_still_a_shrink(runs):
    tmp, data = runs
    r = invoke(*FAKE, "--data-dir", data, "--sample", ITEMS - 1, "--out", tmp / "s500", "--resume", code=2)
    assert "a run does not shrink" in r.output, r.output


def test_without_resume_it_is_offered_resume(runs):
    tmp, data = runs
    r = invoke(*FAKE, "--data-dir", data, "--sample", ITEMS, "--out", tmp / "s500", code=2)
    assert "choose another --out (or --resume to reuse it)" in r.output, r.output
