"""`report RUNS --table samples --format csv` (issue 10, item 9): one tidy table over runs and
tasks that pandas.read_csv loads as is, every value traceable to a samples file."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.report.sample_table import COLUMNS, choice_probabilities
from invented_data import write_discotex

FIXTURE = Path(__file__).resolve().parent / "data" / "abricot_invented_fixture.csv"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def two_runs(tmp_path):
    data = write_discotex(tmp_path / "d", 6)
    outs = []
    for seed in (1, 2):
        out = tmp_path / f"run{seed}"
        r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex,abricot_abs", "--data-dir", data,
                   "--data", f"abricot={FIXTURE}", "--seed", seed, "--n-ctx", 8192, "--out", out)
        assert r.exit_code == 0, r.output
        outs.append(out)
    return outs


def test_samples_csv_is_one_tidy_table(tmp_path):
    runs = two_runs(tmp_path)
    r = invoke("report", *runs, "--table", "samples", "--format", "csv")
    assert r.exit_code == 0, r.output
    assert not r.stdout.startswith("#")
    df = pd.read_csv(io.StringIO(r.stdout))
    assert list(df.columns) == [*COLUMNS, "p_0", "p_1", "p_2", "p_3", "p_4"]
    expected = []
    for out in runs:
        for task in ("discotex", "abricot_abs"):
            rows = [json.loads(line) for line in (out / f"samples-{task}.jsonl").read_text().splitlines()]
            expected += [(str(out), task, s) for s in rows]
    assert len(df) == len(expected) == 2 * (12 + json.loads((runs[0] / "results.json").read_text())
                                            ["tasks"]["abricot_abs"]["n"])
    for (_, row), (run, task, s) in zip(df.iterrows(), expected):
        assert (row["run"], row["task"], str(row["id"]), row["source"]) == (run, task, str(s["id"]), s["source"])
        assert (row["gold"], row["pred"]) == (s["gold"], s["pred"])
        assert (str(row["gold_label"]), str(row["pred_label"])) == (str(s["gold_label"]), str(s["pred_label"]))
        assert row["correct"] == (s["gold"] == s["pred"]) and row["model"] == "fake"
        p = row[[f"p_{k}" for k in range(5)]].to_numpy(dtype=float)
        assert math.isclose(p.sum(), 1.0, abs_tol=1e-12) and int(np.argmax(p)) == s["pred"]
        lp = np.asarray(s["logprobs"])
        assert np.allclose(np.log(p), lp - np.logaddexp.reduce(lp), atol=1e-12)
    assert df["correct"].dtype == bool
    assert set(df["task"]) == {"discotex", "abricot_abs"} and df["run"].nunique() == 2
    assert (df.loc[df["task"] == "discotex", "gold_label"].str.match(r"^[A-E]\. ")).all()
    assert set(df.loc[df["task"] == "abricot_abs", "pred_label"].astype(str)) <= {"1", "2", "3", "4", "5"}


def test_samples_as_json_and_refused_as_a_text_table(tmp_path):
    runs = two_runs(tmp_path)
    records = json.loads(invoke("report", runs[0], "--table", "samples", "--format", "json").stdout)
    assert records[0]["task"] == "discotex" and set(COLUMNS) <= set(records[0])
    r = invoke("report", runs[0], "--table", "samples")
    assert r.exit_code != 0 and "--format csv" in r.output and "Traceback" not in r.output


def test_choice_probabilities():
    assert choice_probabilities([0.0, 0.0]) == [0.5, 0.5]
    p = choice_probabilities([-1.0, -2.0, -30.0])
    assert math.isclose(sum(p), 1.0) and p[0] > p[1] > p[2]
    assert all(math.isnan(x) for x in choice_probabilities([0.0, float("nan")]))
