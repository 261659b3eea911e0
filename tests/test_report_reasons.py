"""A new user's report (issue FB2): the reproduction table's notes said only the reasons after a verdict's first,
so a `cannot tell` row (its one reason: why, and the items that would settle it) had an empty notes cell and a
`differs` row showed only the items-like-these interval, not the task's own it rests on; and compare listed the
recorded settings of a task only one run holds, a task it then says it does not compare. Fake-backend runs on the
invented ABRICOT rows."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.analysis.reproduction import said
from abricot_local.cli import cli
from abricot_local.console import verdict
from abricot_local.record import read_run
from conftest import FIXTURE

WHY = ("the run's metric is undefined (NaN): the model gave the same answer, '1', to every item; more items help only "
       "if the constant side varies over them: all 18 of the task's items give its exact value")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    """A run of both ABRICOT tasks reproducing the paper's rows, a copy whose abricot_inc check cannot tell (one
    reason: why), and a run of abricot_abs alone (another seed)."""
    root = tmp_path_factory.mktemp("reasons")
    models = root / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n',
                      encoding="utf-8")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in (("CACHE", "cache"), ("CONFIG", "config")):
            mp.setenv(f"ABRICOT_{k}_DIR", str(root / v))
        mp.setenv("ABRICOT_OFFLINE", "1")
        for name, tasks, seed in (("both", "abricot", 1234), ("abs", "abricot_abs", 7)):
            r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}", "--tasks", tasks,
                       "--n-ctx", 8192, "--seed", seed, "--out", root / name)
            assert r.exit_code == 0, r.output
            out[name] = root / name
    told = shutil.copytree(out["both"], root / "told")
    doc = json.loads((told / "results.json").read_text(encoding="utf-8"))
    check = next(c for c in doc["published"]["checks"] if c["task"] == "abricot_inc")
    check.update(verdict="cannot tell", reasons=[f"cannot tell: {WHY}"])
    (told / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    out["told"] = told
    return out


def _notes(folder: Path) -> str:
    md = invoke("report", folder, "--table", "published", "--format", "markdown").stdout
    return next(ln for ln in md.splitlines() if ln.startswith("| fake-as-llama")).rstrip(" |").split(" | ")[-1]


def test_each_row_notes_what_its_verdict_rests_on_as_the_run_says_it(made):
    record = read_run(made["told"])
    block = verdict(record.published)
    cell = _notes(made["told"])
    for c in record.published.checks:
        key = f"{c.task}.{c.metric}"
        lines = said(c)
        assert lines and lines[0] == (c.reasons[0].partition(": ")[2] or c.reasons[0])  # the verdict's own figures
        for line in lines:  # each, in the run's words, after the tasks it is said of (this one among them)
            assert re.search(rf"(^|; )([^;]*, )?{re.escape(key)}(, [^;]*)?: {re.escape(line)}(; |$)", cell), (key, line)
            assert f"      {line}" in block.splitlines()  # the console's block: the same lines
        if c.task == "abricot_inc":  # cannot tell: its one reason (why, and the items that would settle it)
            assert lines == (WHY,)
        else:  # the task's 90% interval first, before items like these
            assert "for the task's" in lines[0] or "on all" in lines[0]
            assert lines[1].startswith("items like these") and cell.index(lines[0]) < cell.index(lines[1])


def test_the_text_table_begins_each_rows_notes_with_the_task_interval(made):
    text = " ".join(invoke("report", made["both"], "--table", "published").stdout.split())
    c = read_run(made["both"]).published.checks[0]
    assert f"{c.task}.{c.metric}: {said(c)[0][:60]}" in text


def test_compare_leaves_out_the_settings_of_a_task_one_run_lacks(made):
    out = invoke("compare", made["both"], made["abs"], "--format", "json").stdout
    doc = json.loads(out)
    keys = [d["key"] for d in doc["settings_differ"]]
    assert keys and not any(k.startswith("abricot_inc.") for k in keys), keys  # the runs' own settings still said
    assert any(n.startswith("task abricot_inc is not in every run") for n in doc["notes"])
    text = invoke("compare", made["both"], made["abs"]).stdout
    assert "abricot_inc." not in text and "task abricot_inc is not in every run: not compared" in text
