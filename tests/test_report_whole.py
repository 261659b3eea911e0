"""A new user's report (issue: the wrong published rows on a figure, a cut notes cell, a verdict cell read
as the run's score, the samples table without labels, --verify's sentence): fake-backend runs on the
invented ABRICOT rows under a registry entry that reproduces both published sources."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.report import tables as report
from abricot_local.report.texttable import CELL_MAX
from conftest import FIXTURE

PAPER = ["mistral-7b", "llama-3.1-8b", "llama-3.1-70b"]
CALAMITA = ["Minerva-7B-instruct-v1.0", "LLaMAntino-3-ANITA-8B-Inst-DPO-ITA", "Llama-3.1-8B-Instruct",
            "Llama-3.1-70B-Instruct"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    """Two runs of one entry (told apart by their seed) reproducing the paper's and CALAMITA's rows, and a
    copy of the first whose abricot_abs pearson is NaN."""
    root = tmp_path_factory.mktemp("whole")
    models = root / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b; '
                      'CALAMITA leaderboard: Llama-3.1-8B-Instruct"\n', encoding="utf-8")
    out = {"models": models}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_CONFIG_DIR", str(root / "config"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        for seed in (1234, 7):
            r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}", "--tasks",
                       "abricot", "--n-ctx", 8192, "--seed", seed, "--out", root / f"s{seed}")
            assert r.exit_code == 0, r.output
            out[seed] = root / f"s{seed}"
    nan = shutil.copytree(out[1234], root / "nan")
    doc = json.loads((nan / "results.json").read_text(encoding="utf-8"))
    doc["tasks"]["abricot_abs"]["metrics"].update(pearson=math.nan, pearson_ci95=[math.nan, math.nan])
    (nan / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    out["nan"] = nan
    return out


# -- 1: each ABRICOT figure draws the published rows of its own protocol ------------------------------------------
def test_each_bar_figure_draws_the_published_rows_of_its_own_protocol(made):
    pytest.importorskip("matplotlib")
    from abricot_local.report import plots

    doc = report.build([str(made[1234])])
    slugs = plots.run_slugs(doc.runs)
    for key, models in (("abricot_abs.pearson", PAPER), ("abricot_inc.pearson", PAPER),
                        ("abricot_abs@calamita.pearson", CALAMITA), ("abricot_inc@calamita.pearson", CALAMITA)):
        assert [r.model for r in plots.published_rows(doc, key)] == models, key
        fig, _ = plots.bars_figure(doc, key, slugs)
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        source = "paper 3-shot" if models is PAPER else "CALAMITA leaderboard"
        assert [t.rpartition(":")[0] for t in legend] == [f"{m} ({source})" for m in models], (key, legend)


def test_the_note_of_a_value_not_drawn_sits_below_the_run_names(made):
    pytest.importorskip("matplotlib")
    from abricot_local.report import plots

    doc = report.build([str(made[1234]), str(made["nan"])])
    fig, notes = plots.bars_figure(doc, "abricot_abs.pearson", plots.run_slugs(doc.runs))
    assert any("the value is nan, no bar" in n for n in notes)
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    (note,) = [t for t in fig.texts if "no bar" in t.get_text()]
    ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
    assert len(ticks) == 2
    box = note.get_window_extent(renderer)
    assert not any(box.overlaps(t) for t in ticks) and box.y1 < min(t.y0 for t in ticks)
    (marker,) = [t for t in ax.texts if t.get_text() == "not drawn"]  # inside the axes, over its run's place
    inside = ax.get_window_extent(renderer)
    mark = marker.get_window_extent(renderer)
    assert inside.x0 <= mark.x0 and mark.x1 <= inside.x1


# -- 2: the reproduction table whole, each note naming its task, the verdict cell unambiguous ----------------------
def _checks(run: Path) -> list[dict]:
    return json.loads((run / "results.json").read_text(encoding="utf-8"))["published"]["checks"]


def test_markdown_shows_every_note_whole_each_naming_its_task(made):
    md = invoke("report", made[1234], "--table", "published", "--format", "markdown").stdout
    assert "characters;" not in md and "characters)" not in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| fake-as-llama")]
    assert len(rows) == 2
    notes = {row.split(" | ")[2]: row.rstrip(" |").split(" | ")[-1] for row in rows}  # reference -> notes
    for c in _checks(made[1234]):
        cell = notes[f"{c['reference']} ({c['source']})"]
        key = f"{c['task']}.{c['metric']}"
        parts = cell.split("; ")
        for note in [*c["reasons"][1:], *c["notes"]]:
            assert any(p.endswith(f": {note}") and key in p.split(": ")[0].split(", ") for p in parts), (key, note)
    assert len(max(notes.values(), key=len)) > CELL_MAX  # what the text table cuts, markdown shows


def test_the_text_table_says_where_a_cut_cell_is_whole(made):
    text = invoke("report", made[1234], "--table", "published").stdout
    flat = " ".join(text.split())
    assert "characters; the markdown, csv and json formats show it whole)" in flat
    assert "abricot_abs.pearson: " in flat and "abricot_abs@calamita.pearson: " in flat


def test_a_verdict_cell_says_which_number_is_the_runs(made):
    checks = _checks(made[1234])
    text = " ".join(invoke("report", made[1234], "--table", "published").stdout.split())
    md = invoke("report", made[1234], "--table", "published", "--format", "markdown").stdout
    for c in checks:
        cell = f"run {c['value']:.3f} vs published {c['published']:.2f}: "
        assert cell in text and cell in md, cell
    rows = json.loads(invoke("report", made[1234], "--table", "published", "--format", "json").stdout)
    assert [(r["value"], r["published"]) for r in rows["published_checks"]] == \
        [(c["value"], c["published"]) for c in checks]  # the data's keys as they were


def test_each_block_of_the_split_reproduction_table_names_its_reference(made):
    text = invoke("report", made[1234], "--table", "published").stdout
    blocks = [b for b in text.split("\n\n") if b.startswith("model")]
    assert len(blocks) > 1
    for block in blocks:
        assert block.splitlines()[0].split()[:3] == ["model", "quant", "reference"]
        assert all("(paper 3-shot)" in b or "(CALAMITA" in b for b in block.splitlines()[2:] if b.startswith("fake"))


# -- 3: the samples table keeps the run's label ---------------------------------------------------------------------
def test_the_samples_table_adds_each_runs_label(made):
    runs = pd.read_csv(io.StringIO(invoke("report", made[1234], made[7], "--table", "runs", "--format", "csv").stdout))
    label = {r["folder"]: r["label"] for _, r in runs.iterrows() if r["source"].startswith("run")}
    assert len(set(label.values())) == 2
    table = invoke("report", made[1234], made[7], "--table", "samples", "--format", "csv").stdout
    csv = pd.read_csv(io.StringIO(table))
    assert "label" in csv.columns and (csv["label"] == csv["run"].map(label)).all()
    records = json.loads(invoke("report", made[1234], made[7], "--table", "samples", "--format", "json").stdout)
    assert {(r["run"], r["label"]) for r in records} == set(label.items())


# -- 4: --verify's sentence -----------------------------------------------------------------------------------------
def test_verify_says_what_the_verdicts_match(made):
    r = invoke("report", made[1234], made[7], "--verify")
    assert r.exit_code == 0, r.output
    assert ("verified: the metrics of 2 run(s) match their samples files, and the published verdicts of 2 of them "
            "match those made again from their metrics and the published rows") in r.output
