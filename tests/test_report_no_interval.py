"""A correlation recorded with its value and no interval ([NaN, NaN]: metrics.interval_read) is shown by `report` as
`run`'s summary shows it: "no interval", and why in the words the run printed (its task's warning), never
"[nan, nan]" or a blank. The fake run of 4 ABRICOT items other tests share (finished_run): every correlation over 4
items rests on fewer than 10 answers."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from abricot_local.analysis.loading import load_run
from abricot_local.cli import cli
from abricot_local.report.tables import no_interval
from conftest import FIXTURE

FAKE = ("--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "4")


def withheld(folder) -> dict[str, tuple[float, list[str]]]:
    """"task.metric" -> (value, the task's warnings) of each value results.json records with [NaN, NaN]."""
    tasks = json.loads((folder / "results.json").read_text())["tasks"]
    return {f"{t}.{k}": (v, e["warnings"]) for t, e in tasks.items() for k, v in e["metrics"].items()
            if not k.endswith("_ci95") and math.isfinite(v) and all(c != c for c in e["metrics"][f"{k}_ci95"])}


def report(*args) -> str:
    r = CliRunner().invoke(cli, ["report", *map(str, args), "--table", "runs"])
    assert r.exit_code == 0, r.output
    return r.output


@pytest.fixture
def run(finished_run):
    return finished_run("run", "fake", *FAKE)  # read only


def test_the_reason_is_the_warning_the_run_recorded(run):
    expected = withheld(run)
    assert expected  # the shared run has such values (else this test tests nothing)
    why = no_interval(load_run(run))
    assert set(why) == set(expected)
    for key, (_, warnings) in expected.items():
        assert why[key] in warnings and why[key].startswith(f"{key.split('.', 1)[1]} rests on "), (key, why[key])


def test_text_and_markdown_say_no_interval_and_why(run):
    expected = withheld(run)
    text, md = report(run), report(run, "--format", "markdown")
    flat = " ".join(text.split())  # the notes folded to 120 columns, read as lines unfolded
    for key, (value, warnings) in expected.items():
        task, metric = key.split(".", 1)
        why = next(w for w in warnings if w.startswith(f"{metric} rests on "))
        assert f"{value:.3f} no interval" in text and f"{value:.3f} no interval" in md, key
        note = f"{load_run(run).label} {task}: no interval: {why}"
        assert f"note: {note}" in flat and f"- note: {note}" in md, (key, text)
    assert "nan" not in text.lower() and "nan" not in md.lower()


def test_a_record_that_says_no_why_still_says_no_interval(finished_run, tmp_path):
    folder = finished_run("run", "fake", *FAKE, into=tmp_path / "run")
    doc = json.loads((folder / "results.json").read_text())
    for entry in doc["tasks"].values():
        entry["warnings"] = []  # a run written before its warnings said why
    (folder / "results.json").write_text(json.dumps(doc))
    text = report(folder)
    assert all(f"{v:.3f} no interval" in text for v, _ in withheld(folder).values())
    assert "note:" not in text and "nan" not in text.lower(), text
