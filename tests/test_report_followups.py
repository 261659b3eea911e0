"""Report follow-ups: a sweep's pairwise verdicts point to a `compare` that judges at the margin its --until-settled
rules read (the quant ladder's fixed-n verdict, again); a correlation's withheld interval is said apart from no
interval recorded in `report --format csv` (the `no_interval` column) and JSON (`no_interval`, the bounds null),
and report's and compare's JSON are strict (no bare NaN or Infinity); the HTML pairwise view says the settings only
one side's door records (an lm-eval output's beside a run) apart, as compare does. Fake backend, in-process."""

from __future__ import annotations

import csv
import io
import json
import math
import shlex
from dataclasses import replace

import pytest
from click.testing import CliRunner
from conftest import FIXTURE

import abricot_local
from abricot_local.analysis.differing import one_side_settings
from abricot_local.cli import cli
from invented_data import write_discotex

ABRICOT = ("--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "4")
MODELS = ('[fake-q8]\nbackend = "fake"\nbase = "fakebase"\nquant = "Q8_0"\n\n'
          '[fake-q2]\nbackend = "fake"\nbase = "fakebase"\nquant = "Q2_K"\n')


def invoke(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


def strict(text: str):
    """``text`` read as strict JSON (as JSON.parse and jq read it): a bare NaN or Infinity fails the test."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in the JSON"))


# -- 1. a sweep's details command judges at its rules' margin ---------------------------------------------------------
@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Two fake quants (every answer alike) swept --until-settled at a margin of 0.2 over 20 invented items, and what
    the sweep printed."""
    tmp = tmp_path_factory.mktemp("followups-sweep")
    data = write_discotex(tmp / "discotex", per_source=10)
    (tmp / "models.toml").write_text(MODELS, encoding="utf-8")
    out = invoke("run", "fake-q2", "--quants", "Q2_K,Q8_0", "--models", tmp / "models.toml", "--backend", "fake",
                 "--tasks", "discotex", "--n-ctx", 4096, "--data-dir", data, "--until-settled", "--margin", 0.2,
                 "--looks", "10,20", "--max-items", 20, "--out", tmp / "sweep").stdout
    return tmp / "sweep", out


def test_the_details_command_under_a_sweep_reproduces_the_ladder_s_verdict(sweep):
    folder, out = sweep
    assert "fixed-n verdict at the rule's margin" in out and "identical; equivalent within 0.2" in out  # the ladder's
    lines = out.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("Pairwise verdicts"))
    head = lines[at]
    for x in lines[at + 1:]:  # the heading, folded at 120 columns (its continuations indented)
        if not x.startswith("  "):
            break
        head += " " + x.strip()
    command = shlex.split(head.split("details: ", 1)[1].split(")")[0])
    assert command[:2] == ["abricot-local", "compare"] and command[-2:] == ["--margin", "0.2"], head
    details = invoke(*command[1:]).stdout  # the command as printed: the rung judged at the rule's margin again
    assert "equivalent within 0.2" in details and "within 0.02" not in details


def test_runs_whose_rules_read_each_task_s_margin_or_no_rule_get_no_margin(sweep):
    from abricot_local.report.sweep import pairwise_verdicts, rule_margins

    folder, _ = sweep
    runs = [abricot_local.load_run(folder / name) for name in ("fake-q2", "fake-q8")]

    def margin(run, m):  # the run as made with --margin m (None: without, its rule reading each task's)
        return replace(run, record=replace(run.record, published=replace(run.record.published, margin=m)))

    assert rule_margins(runs) == [0.2]
    plain = [margin(r, None) for r in runs]
    assert rule_margins(plain) == [None]
    assert "--margin" not in pairwise_verdicts(plain)  # compare's own margins: each task's, as the rules read
    no_rule = [replace(r, record=replace(r.record, tasks={t: replace(e, sequential=None)
                                                          for t, e in r.record.tasks.items()})) for r in runs]
    assert rule_margins(no_rule) == []  # a --margin with no rule: the ladder judges at the task's, and so compare
    mixed = pairwise_verdicts([runs[0], replace(margin(runs[0], 0.1), label="fake-q2 at 0.1")])  # two rungs' rules
    assert "rules read other margins (0.2, 0.1)" in mixed and "compare judges every pair at one" in mixed


# -- 8. a withheld interval, said in CSV and JSON; strict JSON --------------------------------------------------------
def test_a_withheld_interval_is_said_apart_in_csv_and_json(finished_run):
    run_dir = finished_run("run", "fake", *ABRICOT)  # read only
    record = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))  # Python reads its NaN
    metrics = record["tasks"]["abricot_abs"]["metrics"]
    withheld = {k[:-5] for k, v in metrics.items() if k.endswith("_ci95") and math.isnan(v[0])}
    assert "pearson" in withheld and "accuracy" not in withheld  # 4 items: the correlations' withheld
    rows = list(csv.DictReader(io.StringIO(invoke("report", run_dir, "--table", "runs", "--format", "csv").stdout)))
    run, published = rows[0], rows[1:]
    named = dict(part.split(": ", 1) for part in run["no_interval"].split(" | "))
    assert {k for k in named if k.startswith("abricot_abs.")} == {f"abricot_abs.{m}" for m in withheld}
    assert named["abricot_abs.pearson"].startswith("pearson rests on ")  # the run's own reason
    assert run["abricot_abs.pearson.ci_lo"] == run["abricot_abs.pearson.ci_hi"] == ""  # blank, and said why
    assert float(run["abricot_abs.accuracy.ci_lo"]) == metrics["accuracy_ci95"][0]  # recorded: a number
    assert published and all(r["no_interval"] == "" for r in published)  # no interval recorded: blank, unnamed
    doc = strict(invoke("report", run_dir, "--format", "json").stdout)
    task = doc["runs"][0]["tasks"]["abricot_abs"]
    assert task["metrics"]["pearson_ci95"] == [None, None] and task["metrics"]["pearson"] == metrics["pearson"]
    assert set(task["no_interval"]) == withheld and task["no_interval"]["pearson"].startswith("pearson rests on ")
    assert task["metrics"]["accuracy_ci95"] == metrics["accuracy_ci95"]


def test_compare_json_is_strict_with_an_infinity_in_it(finished_run):
    from abricot_local.analysis.compare import compare
    from abricot_local.report.comparison import render

    run_dir = finished_run("run", "fake", *ABRICOT)
    a = abricot_local.load_run(run_dir)
    c = compare([a, replace(a, label="again")])
    c = replace(c, metrics=(replace(c.metrics[0], statistic=math.inf, p=math.nan), *c.metrics[1:]))
    first = strict(render(c, "json"))["metrics"][0]
    assert first["statistic"] is None and first["p"] is None


# -- 9. the HTML pairwise view: settings one side only records, apart --------------------------------------------------
def _lm_eval(run_dir, into):
    """The run's export as `lm_eval --model abricot-local` writes it (its version and request rules recorded)."""
    where = abricot_local.load_run(run_dir).to_lm_eval(into)
    (results,) = where.glob("results_*.json")
    doc = json.loads(results.read_text(encoding="utf-8"))
    doc["lm_eval_version"] = "0.4.13"
    doc["config"]["abricot_local"]["requests"] = {"version": "lm-eval/v1", "prefix_token": 2}
    for config in doc["configs"].values():
        del config["metadata"]["abricot_local_task"]  # lm-eval ran the task: not an export
    results.write_text(json.dumps(doc), encoding="utf-8")
    return where


@pytest.fixture
def beside(finished_run, tmp_path):
    """A run and an lm-eval output of it, and their HTML report."""
    run_dir = finished_run("run", "fake", *ABRICOT)
    lm_dir = _lm_eval(run_dir, tmp_path / "lm")
    page = tmp_path / "page.html"
    invoke("report", run_dir, lm_dir, "--data", f"abricot={FIXTURE}", "--format", "html", "-o", page)
    return run_dir, lm_dir, page


def _data(page) -> dict:
    return json.loads(page.read_text(encoding="utf-8").split('id="report-data">', 1)[1].split("</script>", 1)[0])


def test_the_pairwise_view_holds_what_one_side_records_apart(beside):
    from abricot_local.report.comparison import ONE_SIDE

    run_dir, lm_dir, page = beside
    run, lm = abricot_local.load_run(run_dir), abricot_local.load_run(lm_dir, data={"abricot": str(FIXTURE)})
    pairwise = _data(page)["pairwise"]
    (pair,) = pairwise["settings"]
    assert pair["differs"] == []  # no setting differs ...
    said = {k: (va, vb) for k, va, vb in pair["one_side"]}  # ... and what only the lm-eval output records, apart
    assert list(said) == [d.key for d in one_side_settings(run, lm)] and said
    assert said["provenance.lm_eval_version"] == ("(not recorded)", "0.4.13")
    assert pairwise["one_side"] == ONE_SIDE


@pytest.mark.real  # a browser
def test_the_page_shows_what_one_side_records_apart(browser, beside):
    _, _, page = beside
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    problems = []
    pg.on("pageerror", lambda err: problems.append(str(err)))
    pg.goto(page.as_uri(), wait_until="load")
    cell = pg.locator('table.pairwise td[data-a="0"][data-b="1"]').first
    title = cell.get_attribute("title")
    assert "no recorded setting differs" in title and "Recorded by one side only" in title
    assert "provenance.lm_eval_version: (not recorded) / 0.4.13" in title
    cell.click()
    detail = pg.locator(".pair-detail").first
    assert detail.locator("table.settings:not(.one-side) tbody tr td").first.text_content() == "(none recorded)"
    rows = detail.locator("table.one-side tbody tr")
    assert "provenance.lm_eval_version" in [rows.nth(k).locator("td").first.text_content() for k in range(rows.count())]
    assert problems == []
    ctx.close()
