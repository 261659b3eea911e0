"""A fixed-n run grown by `--resume --sample M` from a run `--until-settled` records, per task, the looks its rule took
and the error they spent (settle_record.looked: "... wrong with probability at most 0.1875"): `report` says it beside
the verdicts it qualifies in every format (the text and markdown tables: a note under the reproduction table, never
cut; the JSON's and the CSV's ``warnings``), as the API's ``Run.published()`` does (its ``warnings`` column), all by one
rule (settled.qualifying): a task's recorded warnings on the whole task, not one on a metric (its verdict says why
itself), nor one the check's differences say. A run never grown shows nothing new. Fake backend, in-process, on the
real ABRICOT release (abricot_abs, looks at 5, 10 and 15 items, then --sample 20)."""

from __future__ import annotations

import csv
import io
import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import abricot_local as al
from abricot_local.analysis.settled import qualifying
from abricot_local.cli import cli
from abricot_local.record import PublishedCheck, TaskEntry
from abricot_local.report import tables


def invoke(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture(scope="module")
def runs(tmp_path_factory, abricot_file):
    """(the --until-settled run, never grown; the same grown by --sample 20: a fixed-n run that took looks)."""
    root = tmp_path_factory.mktemp("spent")
    models = root / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n',
                      encoding="utf-8")

    def run(out, *more):
        invoke("run", "fake-as-llama", "--models", models, "--tasks", "abricot_abs", "--data",
               f"abricot={abricot_file}", "--backend", "fake", "--n-ctx", "4096", "--margin", "0.3", *more,
               "--out", out)

    settled, grown = root / "settled", root / "grown"
    run(settled, "--until-settled", "--looks", "5,10", "--max-items", 15)
    run(grown, "--until-settled", "--looks", "5,10", "--max-items", 15)
    run(grown, "--sample", 20, "--resume")
    return settled, grown


def _took(folder) -> str:
    """The warning the grown run recorded of its rule's looks (its record's words, as `run` printed it)."""
    said = json.loads((folder / "results.json").read_text(encoding="utf-8"))["tasks"]["abricot_abs"]["warnings"]
    took = [w for w in said if w.startswith("its rule took looks")]
    assert len(took) == 1 and "5, 10, 15 items" in took[0] and "at most 0.1875" in took[0], said
    return took[0]


def test_a_grown_runs_spent_error_is_said_beside_its_verdict_in_every_format(runs):
    _, grown = runs
    took = _took(grown)
    text = invoke("report", grown).stdout
    assert f"note: fake-as-llama abricot_abs.pearson: {took}" in " ".join(text.split())  # whole, not cut in a cell
    md = invoke("report", grown, "--format", "markdown").stdout
    assert f"- note: fake-as-llama abricot_abs.pearson: {took}" in md
    checks = json.loads(invoke("report", grown, "--format", "json").stdout)["published_checks"]
    assert checks and all(c["warnings"] == [took] for c in checks)
    rows = list(csv.DictReader(io.StringIO(invoke("report", grown, "--table", "published", "--format", "csv").stdout)))
    assert rows and all(r["warnings"] == took for r in rows)
    assert al.load_run(grown).published()["warnings"].tolist() == [took] * len(checks)  # the API's rows too


def test_a_run_never_grown_shows_nothing_new(runs):
    settled, _ = runs
    report = tables.build([settled])
    assert report.checks and all(rc.warnings == () for rc in report.checks)
    assert tables._text_frames(report, ())["published"].notes == ()
    text = invoke("report", settled, "--table", "published").stdout
    assert "took looks" not in text and "\nnote:" not in text
    checks = json.loads(invoke("report", settled, "--format", "json").stdout)["published_checks"]
    assert checks and all(c["warnings"] == [] for c in checks)
    assert set(al.load_run(settled).published()["warnings"]) == {""}


def test_the_one_rule_keeps_a_warning_on_the_whole_task_only():
    """A metric's own warning (its verdict says why) and one a difference says (not comparable) are left out; every
    other warning on the task, grown or not, qualifies each verdict on it; another task's none."""
    on_task = ("its rule took looks (--until-settled) at 5 items before --sample 20 grew the run (error 0.05 spent)",
               "every scored item has the same gold answer ('1'): the metrics describe one class only")
    data = "data /x/d.csv is not the release (sha256 ab..., release cd...)"
    entry = TaskEntry(metrics={"pearson": 0.1, "pearson_ci95": [0.0, 0.2], "accuracy": 0.5}, n=20, warnings=(
        on_task[0], "pearson rests on 3 answers: its value is shown, its interval is not read below 10 items",
        f"{data}: the published rows were made on the release", on_task[1], "accuracy is undefined (NaN): constant"))
    record = SimpleNamespace(tasks={"abricot_abs": entry, "other": TaskEntry(metrics={}, n=1, warnings=("elsewhere",))})
    check = PublishedCheck(reference="r", source="s", task="abricot_abs", metric="pearson", published=0.3,
                           differences=(data,))
    assert qualifying(record, check) == on_task
    assert qualifying(record, PublishedCheck(reference="r", source="s", task="gone", metric="pearson",
                                             published=0.3)) == ()
