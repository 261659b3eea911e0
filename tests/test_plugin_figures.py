"""A task's scatter figure plots the metric it names (report/plots.py): the metric's model side (its MetricInput
``x``) against the sample field ``Figure.x`` (its ``y``), labelled so; with no metric, the model's choice. And a
task holding fewer items than a run asks for is named by what asked (tasks.selection.Count): ``--sample``,
``--until-settled``'s ``--max-items``, or the look a run ``--until-settled`` stopped at (no ``--sample`` given).
Fake backend, in-process, the invented ABRICOT fixture."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from abricot_local.analysis.loading import load_run
from abricot_local.cli import cli
from abricot_local.errors import ResultsError
from abricot_local.report import plots
from abricot_local.tasks.base import Figure
from conftest import FIXTURE
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def abs_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fig") / "run"
    r = invoke("run", "fake", "--backend", "fake", "--n-ctx", 4096, "--tasks", "abricot_abs", "--data",
               f"abricot={FIXTURE}", "--sample", 12, "--out", out)
    assert r.exit_code == 0, r.output
    return load_run(out)


def drawn(monkeypatch, run, figure, tmp_path):
    """The figure ``plots.scatter`` draws (not saved): its axes, and the notes."""
    monkeypatch.setattr(plots, "_save", lambda fig, path: fig)
    fig, notes = plots.scatter(run, "abricot_abs", tmp_path / "s.png", figure, "pearson")
    return fig.axes[0], notes


def test_a_scatter_plots_the_metric_it_names_not_always_the_choice(monkeypatch, abs_run, tmp_path):
    samples = abs_run.samples_of("abricot_abs")
    human = np.array([s.fields["human_mean"] for s in samples])
    expected = np.array([s.fields["expected_score"] for s in samples])
    choice = np.array([s.pred + 1 for s in samples], dtype=float)
    assert not np.allclose(expected, choice)  # the two pictures differ

    ax, notes = drawn(monkeypatch, abs_run, Figure("scatter", x="human_mean", metric="pearson_expected"), tmp_path)
    xy = ax.collections[0].get_offsets()
    assert np.array_equal(xy[:, 0], human) and np.array_equal(xy[:, 1], expected)  # was: the choice, jittered
    assert ax.get_ylabel() == "expected_score (pearson_expected's model side)" and notes == []
    assert "pearson_expected: " in ax.get_title(loc="left")

    # the shipped ABRICOT figure (pearson_continuous: the choice against human_mean) keeps its picture
    (shipped,) = plots._task_class("abricot_abs").figures
    ax, _ = drawn(monkeypatch, abs_run, shipped, tmp_path)
    xy = ax.collections[0].get_offsets()
    assert np.array_equal(xy[:, 0], human) and np.all(np.abs(xy[:, 1] - choice) <= plots.JITTER)
    assert ax.get_ylabel() == "model's choice (1-5, jittered)" and ax.get_ylim() == (0.5, 5.5)
    ax, _ = drawn(monkeypatch, abs_run, Figure("scatter", x="human_mean"), tmp_path)  # no metric: the choice
    assert ax.get_ylabel() == "model's choice (1-5, jittered)" and "n/a" not in ax.get_title(loc="left")


def test_a_scatter_that_cannot_show_its_metric_is_not_drawn_and_says_why(monkeypatch, abs_run, tmp_path):
    with pytest.raises(ResultsError, match="correlates its model side with another vector than the sample field "
                                           "expected_score"):  # pearson (choice vs gold) against expected_score
        drawn(monkeypatch, abs_run, Figure("scatter", x="expected_score", metric="pearson"), tmp_path)
    with pytest.raises(ResultsError, match="metric kendall is not one of the metrics the task gives inputs of "
                                           r"\(metric_inputs: pearson, pearson_continuous"):
        drawn(monkeypatch, abs_run, Figure("scatter", x="human_mean", metric="kendall"), tmp_path)


def test_until_settled_names_its_bound_and_its_look_never_a_sample_not_given(tmp_path, claims):
    data = write_discotex(tmp_path / "d", 4)  # 8 items, ABRICOT's fixture 18: the run stops at 18
    out = tmp_path / "settled"
    r = invoke("run", "fake-as-llama", "--models", claims, "--backend", "fake", "--n-ctx", 4096, "--tasks",
               "abricot_abs,discotex", "--data", f"abricot={FIXTURE}", "--data-dir", data, "--until-settled",
               "--max-items", 18, "--out", out)
    assert r.exit_code == 0, r.output
    assert ("warning: discotex: --max-items 18 (--until-settled's bound) asks for more items than the task has: "
            "at most all 8 are scored") in r.stderr  # was: --sample 18, an option not given
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert doc["config"]["sample"] == 18 and doc["tasks"]["discotex"]["n"] == 8
    assert doc["tasks"]["discotex"]["warnings"][0] == ("--until-settled stopped at its look of 18 items, more than "
                                                       "the task has: all 8 were scored")
    assert "--sample 18 asks" not in r.output  # (the verdict still reads its items "as --sample 18 reads them")
