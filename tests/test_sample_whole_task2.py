"""No --sample is the whole task too (run/saved.py's same_items, whole_tasks): a run made with ``--sample 500`` on
a task of 8 items and resumed without --sample, or made without it and resumed with ``--sample 8`` (or more), is
the same run, continued or returned as it is with its record's bytes unchanged (the sample as first given, and what
it drew); ``--sample 7`` is still a shrink. Fake backend, 8 invented DISCOTEX items."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.tasks.discotex import RELEASE
from conftest import fail_after
from invented_data import write_discotex

FAKE = ("run", "fake-model", "--backend", "fake", "--tasks", "discotex", "--n-ctx", "4096")
ITEMS = 4 * len(RELEASE)
SAMPLES = "samples-discotex.jsonl"


def invoke(*args, code: int = 0):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == code, r.output
    return r


def sample(n):
    return () if n is None else ("--sample", n)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whole_task2")
    data = write_discotex(tmp / "discotex", per_source=4)
    for n in (500, None):
        invoke(*FAKE, "--data-dir", data, *sample(n), "--out", tmp / f"s{n}")
    return tmp, data


@pytest.mark.parametrize("first, given", [(500, None), (None, ITEMS), (None, 500)])
def test_no_sample_and_a_sample_taking_every_item_are_one_run(made, first, given):
    tmp, data = made
    out = tmp / f"s{first}"
    before = (out / "results.json").read_bytes()
    dry = invoke(*FAKE, "--data-dir", data, *sample(given), "--out", out, "--resume", "--dry-run")
    assert f"{ITEMS} saved in --out, left out" in dry.output, dry.output
    r = invoke(*FAKE, "--data-dir", data, *sample(given), "--out", out, "--resume")
    assert "nothing to score, nothing written" in r.output, r.output
    assert (out / "results.json").read_bytes() == before


@pytest.mark.parametrize("first, said", [(500, "a run does not shrink"), (None, "a run does not shrink")])
def test_a_sample_below_the_task_items_is_still_refused(made, first, said):
    tmp, data = made
    before = (tmp / f"s{first}" / "results.json").read_bytes()
    for args in (("--resume",), ("--resume", "--dry-run")):
        r = invoke(*FAKE, "--data-dir", data, "--sample", ITEMS - 1, "--out", tmp / f"s{first}", *args, code=2)
        assert "cannot resume" in r.output and said in r.output, r.output
    assert (tmp / f"s{first}" / "results.json").read_bytes() == before


@pytest.mark.parametrize("first, given", [(500, None), (None, ITEMS)])
def test_an_interrupted_run_continues_as_it_was_asked(made, monkeypatch, first, given):
    tmp, data = made
    out = tmp / f"cut{first}"
    with monkeypatch.context() as m:
        fail_after(m, 3, KeyboardInterrupt)
        invoke(*FAKE, "--data-dir", data, *sample(first), "--out", out, code=130)
    r = invoke(*FAKE, "--data-dir", data, *sample(given), "--out", out, "--resume")
    assert "cannot resume" not in r.output, r.output
    record, whole = (json.loads((d / "results.json").read_text()) for d in (out, tmp / f"s{first}"))
    assert record["tasks"]["discotex"]["scored_now"] == ITEMS - 3
    assert record["config"]["sample"] == whole["config"]["sample"] == first
    assert record["tasks"]["discotex"].get("sampled") == whole["tasks"]["discotex"].get("sampled")
    assert record["tasks"]["discotex"]["warnings"] == whole["tasks"]["discotex"]["warnings"]
    assert (out / SAMPLES).read_bytes() == (tmp / f"s{first}" / SAMPLES).read_bytes()
