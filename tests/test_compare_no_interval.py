"""compare of two bit-identical runs: a correlation's difference is the same in every resample, so it has no
interval. The paired-differences table says "no interval" (never "[nan, nan]"), the note says why once, the JSON
holds null (never NaN), and the items-like-these line says "no interval (why)" without repeating itself."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from abricot_local.analysis import equivalence
from abricot_local.analysis.compare import compare_metric
from abricot_local.cli import cli
from conftest import FIXTURE

FAKE = ("--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "4")
WHY = "the difference is the same in every resample (the same ratings on these 4 items)"


@pytest.fixture
def two(finished_run, tmp_path):
    a = finished_run("run", "fake", *FAKE)  # the session's, read only; its copy: a bit-identical second run
    return a, finished_run("run", "fake", *FAKE, into=tmp_path / "b")


def test_identical_runs_say_no_interval_with_the_reason_once(two):
    r = CliRunner().invoke(cli, ["compare", *map(str, two)])
    assert r.exit_code == 0, r.output
    table = r.output.split("Paired differences", 1)[1].split("Predictions and log-probs", 1)[0]
    rows = [line for line in table.splitlines() if "Williams t" in line]
    assert len(rows) == 8 and all("0.0000 no interval" in line for line in rows), table
    assert "nan" not in table and ": no interval" not in " ".join(table.split())
    assert " ".join(table.split()).count(" ".join(WHY.split())) == 8  # once per correlation row: 4 a task, 2 tasks
    out = CliRunner().invoke(cli, ["compare", *map(str, two), "--format", "json"])
    data = json.loads(out.output)  # strict JSON: a NaN would not parse as null
    flat = [m for m in data["metrics"] if m["stat"] != "accuracy"]
    assert flat and all(m["ci"] == [None, None] and m["ci90"] == [None, None] and m["note"] == WHY for m in flat)


def test_items_like_these_says_no_interval_once():
    x = np.array([1, 3, 2, 5, 4, 2, 1, 5, 3, 4, 2, 1], float)  # 12 items: a correlation's interval is read
    gold = np.array([2, 3, 1, 4, 5, 3, 1, 4, 3, 5, 1, 2], float)
    ia = SimpleNamespace(name="pearson", stat="pearson", x=x, y=gold)
    m = compare_metric("t", "a", "b", ia, ia, seed=1, n_boot=50)  # the same ratings: the same r in every resample
    assert m.ci90 != m.ci90 or all(v != v for v in m.ci90)
    e = equivalence.verdict_of(m, "b", "a", 0.05, total=12)  # every item of the task compared: exact
    assert e.exact and e.like_line == ("items like these (whether it generalises): no interval (the difference is the "
                                       "same in every resample (the same ratings on these 12 items))")
