"""A --sample run grows only where a larger --sample is asked for (docs/running.md, a sample that grows): a --resume
with ``--sample 8`` (every item) of a finished ``--sample 3`` run of a task of 8 items grows it into what a fresh run
without --sample writes; a --resume without --sample is refused, saying how to continue or grow it (a resume that
forgot its --sample is never taken as every item), its dry run too. A run without --resume into a folder the resume
would refuse says why once, naming the folder once. Fake backend, 8 invented DISCOTEX items, one small run copied for
each test."""

from __future__ import annotations

import json
import shutil

import pytest

from invented_data import write_discotex
from test_sample_whole_task2 import FAKE, ITEMS, SAMPLES, invoke  # (its runs' setup: the same 8 invented items)


def record(folder):
    doc = json.loads((folder / "results.json").read_text())
    doc.pop("created"), doc.pop("wall_seconds")
    for entry in doc["tasks"].values():
        entry.pop("seconds"), entry.pop("scored_now")
    return doc


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grow_to_whole")
    data = write_discotex(tmp / "discotex", per_source=4)
    invoke(*FAKE, "--data-dir", data, "--sample", 3, "--out", tmp / "s3")
    invoke(*FAKE, "--data-dir", data, "--out", tmp / "whole")
    return tmp, data


def copy(made, name):
    tmp, _ = made
    shutil.copytree(tmp / "s3", tmp / name)
    return tmp / name


def test_a_sample_covering_every_item_grows_a_sample_run_to_every_item(made):
    tmp, data = made
    out = copy(made, "grown")
    dry = invoke(*FAKE, "--data-dir", data, "--sample", ITEMS, "--out", out, "--resume", "--dry-run")
    assert "3 saved in --out, left out" in dry.output and "cannot resume" not in dry.output, dry.output
    r = invoke(*FAKE, "--data-dir", data, "--sample", ITEMS, "--out", out, "--resume")
    assert "grows from --sample 3 to --sample 8" in r.output and f"{ITEMS - 3} items left (3 saved)" in r.output
    assert (out / SAMPLES).read_bytes() == (tmp / "whole" / SAMPLES).read_bytes()
    assert record(out)["tasks"]["discotex"]["n"] == ITEMS


@pytest.mark.parametrize("dry", [(), ("--dry-run",)])
def test_no_sample_on_a_sample_run_is_refused_saying_how_to_continue_or_grow_it(made, dry):
    tmp, data = made
    out = copy(made, f"forgot{len(dry)}")
    before = (out / "results.json").read_bytes()
    r = invoke(*FAKE, "--data-dir", data, "--out", out, "--resume", *dry, code=2)
    assert "(--sample: recorded 3, given none)" in r.output, r.output
    assert ("(--sample 3 continues it; a larger --sample grows it, one at or above each task's items to every item)"
            in r.output.replace("\n", " ")), r.output
    assert (out / "results.json").read_bytes() == before


@pytest.mark.parametrize("dry", [(), ("--dry-run",)])
def test_a_refused_resume_names_the_folder_once(made, dry):
    tmp, data = made
    out = tmp / "s3"
    r = invoke(*FAKE, "--data-dir", data, "--sample", 2, "--out", out, *dry, code=2)
    assert r.output.count(str(out)) == 1, r.output
    assert "--resume would not take it with --sample 2: it holds a run of --sample 3, and a run does not shrink" \
        in r.output, r.output
    forgot = invoke(*FAKE, "--data-dir", data, "--out", out, *dry, code=2).output  # no --sample: --resume refuses
    assert "--resume would not take it: " in forgot and "--sample 3 continues it" in forgot, forgot
