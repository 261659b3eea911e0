"""No --sample is the whole task (docs/running.md, a sample that grows): a --resume without --sample of a finished
``--sample 3`` run of a task of 8 items grows it to every item, as ``--sample 8 --resume`` does, into what a fresh
run without --sample writes (its record says no sample, as given); its dry run says the same. A run without --resume
into a folder the resume would refuse says why once, naming the folder once. Fake backend, 8 invented DISCOTEX items,
one small run copied for each test."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.tasks.discotex import RELEASE
from invented_data import write_discotex

FAKE = ("run", "fake-model", "--backend", "fake", "--tasks", "discotex", "--n-ctx", "4096")
ITEMS = 4 * len(RELEASE)
SAMPLES = "samples-discotex.jsonl"


def invoke(*args, code: int = 0):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == code, r.output
    return r


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


@pytest.mark.parametrize("given", [(), ("--sample", ITEMS)])
def test_no_sample_grows_a_sample_run_to_every_item(made, given):
    tmp, data = made
    out = copy(made, f"grown{len(given)}")
    dry = invoke(*FAKE, "--data-dir", data, *given, "--out", out, "--resume", "--dry-run")
    assert "3 saved in --out, left out" in dry.output and "cannot resume" not in dry.output, dry.output
    r = invoke(*FAKE, "--data-dir", data, *given, "--out", out, "--resume")
    said = f"grows from --sample 3 to {'--sample 8' if given else 'every item (no --sample)'}"
    assert said in r.output and f"{ITEMS - 3} items left (3 saved)" in r.output, r.output
    assert (out / SAMPLES).read_bytes() == (tmp / "whole" / SAMPLES).read_bytes()
    grown = record(out)
    assert grown["tasks"]["discotex"]["n"] == ITEMS
    if not given:  # the fresh run without --sample, but for the times and the items scored by the last process
        assert grown == record(tmp / "whole")
    again = invoke(*FAKE, "--data-dir", data, "--out", out, "--resume")
    assert "nothing to score, nothing written" in again.output, again.output


@pytest.mark.parametrize("dry", [(), ("--dry-run",)])
def test_a_refused_resume_names_the_folder_once(made, dry):
    tmp, data = made
    out = tmp / "s3"
    r = invoke(*FAKE, "--data-dir", data, "--sample", 2, "--out", out, *dry, code=2)
    assert r.output.count(str(out)) == 1, r.output
    assert "--resume would not take it with --sample 2: it holds a run of --sample 3, and a run does not shrink" \
        in r.output, r.output
    assert "(or --resume to reuse it)" in invoke(*FAKE, "--data-dir", data, "--out", out, *dry, code=2).output
