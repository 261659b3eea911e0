"""compare across ABRICOT's two protocols (fake backend, in-process): a `--protocol paper` run keys its task
`abricot_abs`, a `--protocol calamita` run `abricot_abs@calamita`; `--by-id` pairs the two instances of the one
task on their ids (the refusal without it says so), never when a run holds several unpaired (a note says why). A
run's label names an option that differs between the tasks compared, never "no shots" for a run whose tasks ran
with 3 shots and 0; a correlation's paired difference has no interval below 10 items off a side's most common
value, the rule of a run's own CI."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from abricot_local import metrics
from abricot_local.analysis.compare import compare, compare_metric
from abricot_local.analysis.labels import RunIdentity, task_settings, unique_labels
from abricot_local.analysis.loading import load_run
from abricot_local.analysis.matching import ID
from abricot_local.cli import cli
from abricot_local.errors import ResultsError, render
from conftest import FIXTURE

FAKE = ("run", "fake", "--backend", "fake", "--n-ctx", "8192", "--tasks", "abricot_abs", "--data",
        f"abricot={FIXTURE}", "--limit", "6")


@pytest.fixture
def protocols(finished_run):
    """paper (3 shots, --seed 7), calamita (0 shots), both protocols in one run (the default seed), and paper with
    both prompt variants, and paper at 0 shots."""
    return {name: finished_run(*FAKE, *more) for name, more in (
        ("paper", ("--protocol", "paper", "--seed", "7")), ("calamita", ("--protocol", "calamita")),
        ("both", ("--protocol", "all")), ("variants", ("--protocol", "paper", "--prompt-variant", "all")),
        ("zero", ("--protocol", "paper", "--shots", "0")))}


def test_by_id_pairs_the_two_protocols_instances_of_one_task(protocols):
    paper, calamita = load_run(protocols["paper"]), load_run(protocols["calamita"])
    assert (paper.tasks, calamita.tasks) == (("abricot_abs",), ("abricot_abs@calamita",))
    with pytest.raises(ResultsError) as err:  # the refusal says --by-id pairs them (Python: by_id=True)
        compare([paper, calamita])
    said = render(str(err.value))
    assert "(fake (shots=0)'s abricot_abs@calamita with fake (shots=3)'s abricot_abs: each item" in said
    assert said.endswith("compare with by_id=True")
    c = compare([paper, calamita], by_id=True)
    assert [m.task for m in c.matches] == ["abricot_abs"] and c.matches[0].n_common == 6
    assert c.matches[0].paired_on == ID and c.matches[0].n_context_differs == 6
    assert [r.label for r in c.runs] == ["fake (shots=3)", "fake (shots=0)"]
    assert any("recorded it as abricot_abs@calamita; paired with run fake (shots=3)'s by id alone" in n
               for n in c.notes)
    assert {m.n for m in c.metrics} == {6} and c.verdicts[0].reason.startswith("paired by id")
    cli_refusal = CliRunner().invoke(cli, ["compare", str(protocols["paper"]), str(protocols["calamita"])])
    assert cli_refusal.exit_code != 0 and "compare with --by-id" in cli_refusal.output
    ok = CliRunner().invoke(cli, ["compare", str(protocols["paper"]), str(protocols["calamita"]), "--by-id",
                                  "--format", "json"])
    assert ok.exit_code == 0, ok.output
    assert [m["task"] for m in json.loads(ok.output)["matches"]] == ["abricot_abs"]


def test_by_id_leaves_a_task_a_run_holds_several_unpaired_instances_of(protocols):
    """paper run with both prompt variants (abricot_abs, abricot_abs~calamita) vs the calamita run: which of the
    two pairs with abricot_abs@calamita is the user's choice (Run.only), never guessed."""
    variants, calamita = load_run(protocols["variants"]), load_run(protocols["calamita"])
    assert set(variants.tasks) == {"abricot_abs", "abricot_abs~calamita"}
    with pytest.raises(ResultsError, match=r"these runs hold several not paired by key \(fake[^:]*: abricot_abs, "
                                           r"abricot_abs~calamita; fake[^:]*: abricot_abs@calamita\)"):
        compare([variants, calamita], by_id=True)
    c = compare([variants.only("abricot_abs~calamita"), calamita], by_id=True)  # the one chosen: paired
    assert [(m.task, m.n_common) for m in c.matches] == [("abricot_abs~calamita", 6)]


def test_labels_name_what_differs_between_the_tasks_compared_never_no_shots_for_mixed(protocols):
    both, seed7 = load_run(protocols["both"]), load_run(protocols["paper"])
    c = compare([both, seed7], by_id=True)  # abricot_abs compared: 3 shots each, seed 1234 vs 7
    assert [r.label for r in c.runs] == ["fake (seed=1234)", "fake (seed=7)"]
    assert both.identity.options["shots"] is None and "shots" in both.identity.mixed  # 3 and 0: mixed, not unset
    zero = compare([both, load_run(protocols["zero"])], by_id=True)  # abricot_abs: 3 shots vs 0, not "mixed" vs 0
    assert [r.label for r in zero.runs] == ["fake (shots=3)", "fake (shots=0)"]
    assert all("no shots" not in r.label for r in c.runs)
    report = CliRunner().invoke(cli, ["report", str(protocols["both"]), str(protocols["paper"])])
    assert report.exit_code == 0, report.output
    assert "no shots" not in report.output and "fake (seed=7)" in report.output
    # pure: a mixed option names no label; an option not set still says so
    options, resolved, mixed = task_settings([{"shots": 3}, {"shots": 0}], {"shots": None}, {"shots"})
    assert (options, resolved, mixed) == ({"shots": None}, {}, frozenset({"shots"}))
    mixed_run = RunIdentity("m", folder="x/a", options=options, resolved=resolved, mixed=mixed)
    three = RunIdentity("m", folder="x/b", options={"shots": 3})
    assert unique_labels([mixed_run, three]) == ("m (a)", "m (b)")
    assert unique_labels([RunIdentity("m", options={"shots": None}), three]) == ("m (no shots)", "m (shots=3)")


def test_a_paired_correlation_has_no_interval_below_ten_answers_off_the_most_common_one():
    gold = np.array([1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2], float)
    few = np.array([1, 1, 1, 1, 1, 1, 1, 2, 3, 4, 5, 2], float)  # 5 answers off its most common one
    many = np.array([5, 4, 3, 2, 1, 2, 3, 4, 5, 1, 1, 2], float)
    spread = np.array([2, 3, 1, 5, 4, 1, 2, 3, 4, 5, 3, 2], float)

    def inp(x, y=gold):
        return SimpleNamespace(name="pearson", stat="pearson", x=x, y=y)

    assert not metrics.interval_read("pearson", few, gold)  # the run's own CI: withheld
    m = compare_metric("t", "a", "b", inp(few), inp(many), seed=1, n_boot=50)
    assert all(v != v for v in (*m.ci, *m.ci90)) and m.test == "Williams t" and m.p == m.p
    assert m.note == ("no interval: read from 10 items off each side's most common value, as a run's own CI (here, "
                      "of 12: a's side 5, b's 9, the gold's 9 off)")
    wide = np.concatenate([gold] * 2)
    read = compare_metric("t", "a", "b", inp(np.concatenate([many] * 2), wide),
                          inp(np.concatenate([spread] * 2), wide), seed=1, n_boot=50)
    assert metrics.interval_read("pearson", np.concatenate([many] * 2), wide) and read.ci[0] == read.ci[0]


def test_compare_prints_no_interval_for_six_common_items_with_the_reason(protocols):
    """Runs of 6 items: the table says "no interval", its note says why, the verdict never "[nan, nan]"."""
    r = CliRunner().invoke(cli, ["compare", str(protocols["both"]), str(protocols["paper"]), "--by-id"])
    assert r.exit_code == 0, r.output
    table = r.output.split("Paired differences", 1)[1].split("Predictions and log-probs", 1)[0]
    rows = [line for line in table.splitlines() if "Williams t" in line]
    assert len(rows) == 4 and all("no interval" in line for line in rows), table
    assert "read from 10 items off each side's" in " ".join(table.split())
    assert "nan" not in r.output.split("Verdict", 1)[1] and "no interval, Williams t" in " ".join(r.output.split())
