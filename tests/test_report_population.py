"""`report`'s own comparisons (the quant ladder, the HTML page's pairwise view) count a task's size N as `compare`
does (analysis/population.py): where the runs recorded their data, else in the data given with `report --data-dir
DIR` / `--data KEY=PATH` (a run folder copied from another machine), carried as ``Report.given``
(population.GivenData); a path given that is not here refused in one line. The runs are made as records older
than ``available`` (a run that records its N is read by it: tests/test_recorded_n.py)."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from abricot_local.analysis import compare as cmp
from abricot_local.analysis.ladder import ladders
from abricot_local.analysis.population import NOTHING_GIVEN, GivenData
from abricot_local.cli import cli
from abricot_local.errors import DataError
from abricot_local.models.registry import load_registry
from abricot_local.report import pairs
from abricot_local.report import tables as report


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def place(tmp_path_factory, discotex_dir):
    """A two-rung ladder (F16, Q4_0 of one base: fake-backend registry entries), --sample 24 of DISCOTEX, made
    with --data-dir on a copy of the data that is then moved (the runs' recorded paths gone; the cache empty)."""
    root = tmp_path_factory.mktemp("report_population")
    models = root / "models.toml"
    models.write_text("".join(f'[toy-{q.lower()}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\n'
                              'base = "toy"\n\n' for q in ("F16", "Q4_0")), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))  # empty: the cache holds no copy of the data
        mp.setenv("ABRICOT_OFFLINE", "1")
        data = root / "gone" / "discotex"
        data.mkdir(parents=True)
        for f in sorted(discotex_dir.iterdir()):
            if f.is_file():
                shutil.copy2(f, data / f.name)
        r = invoke("run", "toy-f16", "--models", models, "--quants", "F16,Q4_0", "--tasks", "discotex",
                   "--data-dir", data.parent, "--sample", 24, "--out", root / "ladder")
        assert r.exit_code == 0, r.output
        for results in sorted((root / "ladder").glob("*/results.json")):  # older records: N counted from the data
            doc = json.loads(results.read_text(encoding="utf-8"))
            for entry in doc["tasks"].values():
                entry.pop("available", None)
            results.write_text(json.dumps(doc), encoding="utf-8")
        (root / "gone").rename(root / "moved")
    return {"root": root, "models": models, "ladder": root / "ladder", "moved": root / "moved"}


@pytest.fixture()
def cache(place, monkeypatch):
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(place["root"] / "cache"))
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    return place


def _rungs(p) -> list:
    return sorted(f for f in p["ladder"].iterdir() if f.is_dir())


def _verdicts(doc: dict) -> list:
    return [r["verdict"] for r in doc["quant_ladder"] if r["reference"]]


def test_the_ladder_counts_n_from_the_data_given(cache):
    p = cache
    registry = load_registry(p["models"])
    without = report.build(_rungs(p), registry=registry)
    assert without.given == NOTHING_GIVEN and not (p["root"] / "gone").exists()
    ((rung,),) = [[r for r in ladders(without.runs) if not r.is_reference]]
    assert rung.verdict.total is None and "for items like these" in rung.verdict.line
    doc = report.build(_rungs(p), registry=registry, data_dir=str(p["moved"]))
    assert doc.given == GivenData(data_dir=str(p["moved"]))
    ((rung,),) = [[r for r in ladders(doc.runs, given=doc.given) if not r.is_reference]]
    assert rung.verdict.total == 1600 and "for the task's 1,600 items, 24 compared" in rung.verdict.line
    # the same verdict compare makes of the same two runs, given the same data
    c = cmp.compare(list(doc.runs), reference=str(doc.runs[0].path), given=doc.given)
    (e,) = [e for e in c.equivalence if e.metric == rung.verdict.metric]
    assert (e.total, e.ci90, e.kind) == (rung.verdict.total, rung.verdict.ci90, rung.verdict.kind)


def test_report_command_counts_n_from_data_dir(cache):
    p = cache
    base = ("report", p["ladder"], "--models", p["models"], "--table", "quant", "--format", "json")
    without = invoke(*base)
    assert without.exit_code == 0, without.output
    assert [v["total"] for v in _verdicts(json.loads(without.stdout))] == [None]
    for given in (("--data-dir", p["moved"]), ("--data", f"discotex={p['moved'] / 'discotex'}")):
        r = invoke(*base, *given)
        assert r.exit_code == 0, r.output
        (v,) = _verdicts(json.loads(r.stdout))
        assert v["total"] == 1600 and "of the task's 1,600 items" in v["line"]
    text = invoke("report", p["ladder"], "--models", p["models"], "--table", "quant", "--format", "markdown",
                  "--data-dir", p["moved"]).stdout
    assert "24 | identical; cannot tell yet (~143 items) (accuracy)" in text


def test_the_html_page_judges_the_tasks_own_value_with_data_dir(cache, tmp_path):
    p = cache
    page, bare = tmp_path / "page.html", tmp_path / "bare.html"
    assert invoke("report", p["ladder"], "--models", p["models"], "--format", "html", "-o", page,
                  "--data-dir", p["moved"]).exit_code == 0
    assert invoke("report", p["ladder"], "--models", p["models"], "--format", "html", "-o", bare).exit_code == 0
    assert "for the task's 1,600 items, 24 compared" in page.read_text(encoding="utf-8")
    assert "1,600" not in bare.read_text(encoding="utf-8")


def test_the_pairwise_view_compares_with_the_reports_data(cache, monkeypatch):
    p = cache
    doc = report.build(_rungs(p), registry=load_registry(p["models"]), data_dir=str(p["moved"]))
    seen, real = [], cmp.compare

    def spy(*args, **kwargs):
        c = real(*args, **kwargs)
        seen.append(c.totals)
        return c

    monkeypatch.setattr(cmp, "compare", spy)
    assert pairs.pairwise(doc)["tasks"]
    assert seen == [{"discotex": 1600}]


def test_a_path_given_to_report_that_is_not_here_is_one_error_line(cache, tmp_path):
    p = cache
    none = tmp_path / "none"
    for args, words in ((("--data-dir", none), f"--data-dir {none}: folder not found"),
                        (("--data", f"discotex={none}"), f"--data discotex={none}: not found")):
        r = invoke("report", p["ladder"], *args)
        assert r.exit_code == 2 and words in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.output
    with pytest.raises(DataError, match="folder not found"):
        report.build(_rungs(p), data_dir=str(none))
