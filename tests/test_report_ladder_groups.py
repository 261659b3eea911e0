"""`report`'s quant ladder is per base and task: each task's rungs against that task's reference, whichever folders
are given first; two runs of one quant of a base are two ladders (one per folder), never a rung of each other; what is
left out is said in a note. The ladder's text table keeps every row in every block when split; an undefined difference
says why; compare's footer defines "numerically close" only where a verdict says it, and a verdict line's difference
is read with its direction and level. Fake backend, in-process; invented DISCOTEX items (one test reads the ABRICOT
release, the conftest fixture)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from invented_data import write_discotex

FAKE = ("--backend", "fake", "--n-ctx", "4096")


def invoke(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """Fake quants Q8_0 and Q2_K of one base swept three times: ``one`` on discotex (10 items), ``two`` on discotex
    and discotex~ita-bench (12 items: its own ladders), ``lone`` a Q8_0 run of discotex alone in its folder."""
    tmp = tmp_path_factory.mktemp("groups")
    data = write_discotex(tmp / "discotex", per_source=30)
    models = tmp / "models.toml"
    models.write_text('[fake-q8]\nbackend = "fake"\nbase = "fakebase"\nquant = "Q8_0"\n\n'
                      '[fake-q2]\nbackend = "fake"\nbase = "fakebase"\nquant = "Q2_K"\n', encoding="utf-8")
    one, two, lone = tmp / "one", tmp / "two", tmp / "alone" / "q8"
    invoke("run", "fake-q2", "--quants", "Q2_K,Q8_0", "--models", models, *FAKE, "--tasks", "discotex",
           "--data-dir", data, "--sample", 10, "--out", one)
    invoke("run", "fake-q2", "--quants", "Q2_K,Q8_0", "--models", models, *FAKE, "--tasks", "discotex",
           "--prompt-variant", "all", "--data-dir", data, "--sample", 12, "--out", two)
    invoke("run", "fake-q8", "--models", models, *FAKE, "--tasks", "discotex", "--data-dir", data, "--sample", 8,
           "--out", lone)
    return tmp, models, data, one, two, lone


def report(*folders, models=None):
    from abricot_local.models.registry import load_registry
    from abricot_local.report import tables

    runs = [str(r) for f in folders for r in ([f] if (f / "results.json").exists() else
                                               sorted(x for x in f.iterdir() if (x / "results.json").exists()))]
    return tables.build(runs, registry=load_registry(models) if models else None)


def quant_json(rep) -> dict:
    from abricot_local.report import tables

    return json.loads(tables.render(rep, "json", table="quant"))


def ladders_of(rows: list[dict]) -> dict:
    """(task, ladder) -> the runs' quants, the reference's first; every rung names its ladder's reference."""
    out: dict = {}
    for r in rows:
        key = (r["task"], r.get("ladder"))
        if r["reference"] is None:
            assert key not in out, rows  # one reference per ladder
            out[key] = {"ref": r["run"], "quants": [r["quant"]]}
        else:
            assert r["reference"] == out[key]["ref"], rows  # a rung against its own ladder's reference
            out[key]["quants"].append(r["quant"])
    return out


def test_every_task_gets_its_ladder_whichever_folder_comes_first(sweeps):
    _, _, _, one, two, _ = sweeps
    seen = []
    for order in ((one, two), (two, one)):
        doc = quant_json(report(*order))
        got = ladders_of(doc["quant_ladder"])
        seen.append(sorted(got))
        assert {t for t, _ in got} == {"discotex", "discotex~ita-bench"}
        assert all(len(v["quants"]) == 2 and v["quants"][0].startswith("Q8") for v in got.values())
        # discotex twice (a quant run in both folders): one ladder per folder; the other task: one ladder
        assert sorted(w for t, w in got if t == "discotex") == sorted([str(one), str(two)])
        assert [w for t, w in got if t == "discotex~ita-bench"] == [None]
        assert doc.get("quant_ladder_notes") == []
    assert seen[0] == seen[1]


def test_a_second_run_of_a_quant_is_never_a_rung_of_the_first(sweeps):
    _, _, _, one, two, _ = sweeps
    rows = quant_json(report(one, two))["quant_ladder"]
    refs = {(r["task"], r.get("ladder")): r for r in rows if r["reference"] is None}
    assert len(refs) == 3
    for r in rows:
        if r["reference"] is not None:
            ref = refs[(r["task"], r.get("ladder"))]
            assert r["reference"] == ref["run"] and r["quant"] != ref["quant"], r  # not "identical; cannot tell yet"


def test_a_run_left_out_is_said_in_every_form(sweeps):
    from abricot_local.report import html, tables

    _, _, _, one, two, lone = sweeps
    rep = report(one, two, lone)
    lone_run = next(r for r in rep.runs if r.path == str(lone))
    doc = quant_json(rep)
    assert lone_run.label not in {r["run"] for r in doc["quant_ladder"]}
    notes = doc.get("quant_ladder_notes", [])
    assert len(notes) == 1 and lone_run.label in notes[0] and notes[0].startswith("discotex: ")
    text = tables.render(rep, "table", table="quant")
    ladder_text = " ".join(text[text.index("Quant ladder"):].split())
    assert f"note: {notes[0]}" in ladder_text
    assert f"note: {notes[0]}" in " ".join(tables.render(rep, "markdown", table="quant").split())
    assert html.report_data(rep, figures=False)["ladderNotes"] == notes


def test_disjoint_tasks_each_get_a_ladder(sweeps, abricot_file):
    tmp, models, _, one, _, _ = sweeps
    abr = tmp / "abricot"
    if not abr.exists():
        invoke("run", "fake-q2", "--quants", "Q2_K,Q8_0", "--models", models, *FAKE, "--tasks", "abricot_abs",
               "--data", f"abricot={abricot_file}", "--sample", 10, "--out", abr)
    for order in ((one, abr), (abr, one)):
        got = ladders_of(quant_json(report(*order))["quant_ladder"])
        assert [t.split("@")[0] for t, _ in sorted(got)] == ["abricot_abs", "discotex"]
        assert all(w is None and len(v["quants"]) == 2 and v["quants"][0].startswith("Q8") for (_, w), v in got.items())


def test_a_split_ladder_table_keeps_every_row_in_every_block(sweeps):
    from abricot_local.report import tables

    _, _, _, one, two, _ = sweeps
    rep = report(one, two)
    rows_json = quant_json(rep)["quant_ladder"]
    n_rows, ref_quant = len(rows_json), rows_json[0]["quant"]
    text = tables.render(rep, "table", table="quant")
    body = text[text.index("Quant ladder"):].split("\n\n")[1:]
    blocks = [b for b in body if b.startswith("model")]
    assert len(blocks) > 1  # split to fit
    for b in blocks:
        lines = b.splitlines()
        dashes = next(x for x in lines if x.startswith("---"))
        rows = [ln for ln in lines[lines.index(dashes) + 1:] if ln.startswith("fakebase")]
        assert len(rows) == n_rows, b
        cells = dashes.index(" -", dashes.index(" -", dashes.index(" -") + 2) + 2) + 1  # after model, task, quant
        refs = [ln for ln in rows if ref_quant in ln.split()]
        assert len(refs) == 3 and all(ln[cells:].strip() for ln in refs), b  # reference rows shown, marked


def test_an_undefined_difference_says_why_never_nan():
    from abricot_local.analysis.equivalence import UNDEFINED, Equivalence
    from abricot_local.report.ladder import difference_text

    base = Equivalence("q4", "q8", "t", "pearson", 0.05, 20, math.nan, (math.nan, math.nan), UNDEFINED,
                       note="the difference is undefined (a constant vector)")
    for e in (base, replace(base, note=""), replace(base, diff=0.01)):
        text = difference_text(e)
        assert "nan" not in text.lower() and "constant vector" in text, text
    assert difference_text(replace(base, diff=0.01)).startswith("+0.010 (no interval: ")


def test_compare_defines_numerically_close_only_where_used_and_reads_differences(sweeps):
    from abricot_local.analysis.compare import CANNOT_TELL, CLOSE, compare
    from abricot_local.analysis.loading import load_all
    from abricot_local.report.comparison import render, verdict_text

    _, _, _, one, _, _ = sweeps
    runs = load_all([str(one / "fake-q8"), str(one / "fake-q2")], None)
    c = compare(runs)
    assert all(v.kind not in (CLOSE, CANNOT_TELL) for v in c.verdicts)
    text = render(c)
    assert "numerically close" not in text and "A - B" not in text
    close = replace(c, verdicts=tuple(replace(v, kind=CLOSE) for v in c.verdicts))
    footer = " ".join(render(close).split())
    assert f'"numerically close" (a verdict below) means the same prediction on every common item and every ' \
           f'|delta log-prob| <= {c.tolerance:g} nats' in footer
    unsure = replace(c, verdicts=tuple(replace(v, kind=CANNOT_TELL) for v in c.verdicts))
    for shown in (render(unsure), render(unsure, "markdown"), verdict_text(unsure)):
        assert "the difference is A - B with its 95% CI" in " ".join(shown.split())
    assert "A - B" not in verdict_text(c)
