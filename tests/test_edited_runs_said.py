"""A finished run edited by hand is not shown as if sound. A samples file that lost a line (or gained one) stops
`report` in every format with the file and the count, by the one count check `report --verify`, the html page
and `compare` read samples with (record.run_samples, its lines counted: record.entry_counted); `--verify` still says it as its `not verified:` line. A metric
edited in results.json is shown by `report` as recorded (docs/reports.md) and found by `--verify`. All on the fake
backend and invented data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from invented_data import write_discotex

SAMPLES = "samples-discotex.jsonl"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_discotex(tmp_path_factory.mktemp("edited") / "d", 4)


@pytest.fixture
def run(finished_run, data, tmp_path):
    """A copy of a finished fake run of 6 DISCOTEX items, to edit."""
    return finished_run("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--limit", 6,
                        into=tmp_path / "run")


def lines(run: Path) -> list[str]:
    return (run / SAMPLES).read_text().splitlines(keepends=True)


def lose_one(run: Path) -> Path:
    (run / SAMPLES).write_text("".join(lines(run)[:-1]))
    return run


def add_one(run: Path) -> Path:
    extra = json.loads(lines(run)[0])
    extra["id"] = "task_1_ted_test_99"  # another item's line: the file holds one more than its record counts
    (run / SAMPLES).write_text("".join(lines(run)) + json.dumps(extra) + "\n")
    return run


def tear_last(run: Path) -> Path:
    (run / SAMPLES).write_text("".join(lines(run))[:-20])
    return run


LOST = "holds 5 sample(s) but results.json records n = 6 for task discotex (1 item(s) missing"
MORE = "holds 7 sample(s) but results.json records n = 6 for task discotex (1 more than recorded)"


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "csv"])
@pytest.mark.parametrize("edit, count", [(lose_one, LOST), (add_one, MORE)])
def test_report_stops_with_the_file_and_the_count(run, edit, count, fmt):
    edit(run)
    r = invoke("report", run, "--format", fmt)
    assert r.exit_code == 2 and r.output.startswith(f"error: {run / SAMPLES} {count}"), r.output
    assert r.output.count("\n") == 1, r.output  # no table before it


def test_report_stops_on_a_torn_last_line(run):
    r = invoke("report", tear_last(run))
    assert r.exit_code == 2 and r.output.startswith(f"error: {run / SAMPLES}: its last line (6) is cut short"), r.output
    assert "the file was cut; a finished run's samples are written whole" in r.output, r.output


def test_report_verify_still_says_it_as_not_verified(run):
    r = invoke("report", lose_one(run), "--verify")
    assert r.exit_code == 2 and f"not verified: {run / SAMPLES} holds 5 sample(s)" in r.output, r.output


def test_a_sound_run_is_reported_and_an_edited_metric_found_by_verify(run):
    assert invoke("report", run, "--format", "csv").exit_code == 0
    doc = json.loads((run / "results.json").read_text())
    doc["tasks"]["discotex"]["metrics"]["accuracy"] = 0.99
    (run / "results.json").write_text(json.dumps(doc))
    r = invoke("report", run, "--format", "csv")
    assert r.exit_code == 0 and ",0.99," in r.output, r.output  # shown as recorded: --verify's job
    r = invoke("report", run, "--verify")
    assert r.exit_code == 1 and "recomputed metrics differ" in r.output and "accuracy" in r.output, r.output


def test_a_finished_resume_says_its_record_is_not_checked(run, data):
    doc = json.loads((run / "results.json").read_text())
    doc["tasks"]["discotex"]["metrics"]["accuracy"] = 0.99
    (run / "results.json").write_text(json.dumps(doc))
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--limit", 6,
               "--out", run, "--resume")
    assert "holds this run, complete: nothing to score" in r.output, r.output
    assert f"report --verify {run}" in r.output or (r.exit_code != 0 and "no longer give" in r.output), r.output
