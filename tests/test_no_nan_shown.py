"""An interval a run withheld (a correlation under the 10-answer rule, recorded [NaN, NaN]) is never shown as
"[nan, nan]": a figure's title and a bar chart's notes say "no interval" and why, in the words the text report's notes
use (tables.value_words, tables.no_interval_words), as every table does. Fake backend, 4 invented ABRICOT items; the
figures are drawn but not written (their text read off the matplotlib figure)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import FIXTURE

from abricot_local.cli import cli

ABRICOT = ("--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "4")


@pytest.fixture
def run_dir(finished_run):
    return finished_run("run", "fake", *ABRICOT)  # read only


@pytest.fixture
def drawn(run_dir, monkeypatch):
    """The report of the run, and ``title(fn, *args)``: the title of the plots figure ``fn`` draws, not written."""
    pytest.importorskip("matplotlib")
    from abricot_local.report import plots
    from abricot_local.report import tables

    figs = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figs.append(fig) or path)

    def title(fn, *args):
        fn(*args)
        return figs[-1].axes[0].get_title(loc="left")

    return tables.build([str(run_dir)]), title


def test_a_withheld_interval_is_said_with_why_in_a_figure_never_nan(drawn, tmp_path):
    from abricot_local.report import plots
    from abricot_local.report.tables import WITHHELD, no_interval
    from abricot_local.tasks import task_class

    report, title_of = drawn
    run = report.runs[0]
    why = no_interval(run)
    assert why["abricot_abs.pearson_continuous"].startswith("pearson_continuous rests on ")  # 4 items: withheld
    figure = next(f for f in task_class("abricot_abs").figures if f.kind == "scatter")
    title = title_of(plots.scatter, run, "abricot_abs", tmp_path / "s.png", figure, "pearson")
    assert "nan" not in title.lower(), title
    value = next(m.value for m in run.metric_values if m.key == "abricot_abs.pearson_continuous")
    said = f"pearson_continuous: {value:.3f} no interval: {why['abricot_abs.pearson_continuous']}"
    assert "".join(said.split()) in "".join(title.split()), (said, title)  # broken to the figure's width
    fig, notes = plots.bars_figure(report, "abricot_abs.pearson", ["r"])
    texts = [t.get_text() for t in fig.texts]
    assert not any("nan" in t.lower() for t in [*notes, *texts]), notes
    assert notes == [f"{run.label}: no interval: {why['abricot_abs.pearson'] or WITHHELD}; no whisker"]
    assert "".join(notes[0].split()) == "".join(texts[0].split())  # on the figure too, broken to its width
    assert plots.bars_figure(report, "abricot_abs.accuracy", ["r"])[1] == []  # an interval read: a whisker


def test_report_with_plots_prints_no_nan(drawn, run_dir, tmp_path):  # the figures drawn, not written (drawn)
    r = CliRunner().invoke(cli, ["report", str(run_dir), "--plot", str(tmp_path / "p"), "--metrics", "pearson"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "nan" not in r.output.lower() and "no interval: pearson rests on " in r.output, r.output


def test_run_s_published_comparison_says_no_interval_never_nan():
    from abricot_local import console
    from abricot_local.record import Published
    from abricot_local.record.schema import PublishedCheck

    nan = float("nan")
    withheld = PublishedCheck(reference="llama-3.1-8b", source="paper 3-shot", task="abricot_abs", metric="pearson",
                              published=0.30, value=-0.544, ci95=(nan, nan), difference=-0.844)
    read = PublishedCheck(reference="llama-3.1-8b", source="paper 3-shot", task="abricot_abs", metric="accuracy",
                          published=0.40, value=0.25, ci95=(0.071, 0.591), difference=-0.15)
    text = console.verdict(Published(reproduces="ABRICOT paper: llama-3.1-8b", checks=(withheld, read)), "Q4_K_M")
    row = {line.split()[1]: line for line in text.splitlines() if line.startswith("    llama")}
    assert "-0.544 no interval" in row["abricot_abs.pearson"] and "nan" not in text.lower(), text  # summary's words
    assert "0.250 [0.071, 0.591]" in row["abricot_abs.accuracy"]  # a read interval: its bounds, as before


def test_the_prompts_table_as_csv_is_refused_in_words_not_a_traceback(run_dir):
    # found while surveying every output: a KeyError where csv has no prompts table
    r = CliRunner().invoke(cli, ["report", str(run_dir), "--table", "prompts", "--format", "csv"])
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.exception  # a usage error, said
    assert "--table prompts is written as table, markdown, json or html; got --format csv" in r.output, r.output
