"""A published row a --until-settled rule judged has every field the rule's, in the API's published(), `report`'s JSON,
CSV and text alike: its verdict, its interval at its look and level, what settles it (the next look, the --max-items a
grow takes it at: the run's own advice); the fixed-n verdict and its figures only under fixed_n names. The reviewer's
case: the rule says cannot tell yet at its last look while the fixed-n 90% interval says differs."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.cli.options import flags
from abricot_local.errors import render

REPRODUCES = "ABRICOT paper: llama-3.1-8b"


def _run(tmp_path: Path, data: Path) -> Path:
    models = tmp_path / "models.toml"
    models.write_text(f'[fake-as-llama]\nbackend = "fake"\nreproduces = "{REPRODUCES}"\n', encoding="utf-8")
    out = tmp_path / "us20"
    r = CliRunner().invoke(cli, ["run", "fake-as-llama", "--models", str(models), "--tasks", "abricot_abs", "--data",
                                 f"abricot={data}", "--backend", "fake", "--n-ctx", "4096", "--until-settled",
                                 "--max-items", "20", "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return out


def _doctor(out: Path, change) -> None:
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    change(doc["tasks"]["abricot_abs"]["sequential"])
    (out / "results.json").write_text(json.dumps(doc), encoding="utf-8")


def _open_at_bound(rule: dict) -> None:
    """The reviewer's row: the rule's last look cannot tell yet (its 95% interval reaches inside -0.05)."""
    rule["looks"][-1].update(verdict="cannot tell yet", running=[-0.891, -0.037], interval=[-0.891, -0.037])


def _views(out: Path):
    import abricot_local as al
    from abricot_local.report import tables

    rep = tables.build([out])
    api = al.load_run(out).published().set_index("source")
    doc = {c["source"]: c for c in json.loads(tables.render(rep, "json", table="published"))["published_checks"]}
    rows = {r["source"]: r for r in csv.DictReader(io.StringIO(tables.render(rep, "csv", table="published")))}
    return api, doc, rows, tables.render(rep, "markdown", table="published")


def test_a_rule_judged_row_says_the_rules_verdict_interval_and_next_step_the_fixed_n_ones_apart(tmp_path, abricot_file):
    from abricot_local.analysis.reproduction import words
    from abricot_local.analysis.settled import FIXED_N, next_bound
    from abricot_local.record import read_run
    from abricot_local.run import settle_record

    out = _run(tmp_path, abricot_file)
    _doctor(out, _open_at_bound)
    record = read_run(out)
    check = next(c for c in record.published.checks if c.source == "paper 3-shot")
    lk = record.tasks["abricot_abs"].sequential.looks[-1]
    assert check.verdict == "differs" and lk.verdict == "cannot tell yet"  # the two disagree, as the reviewer's
    bound = settle_record.next_bound(record)  # the --max-items the run's own advice names
    assert bound == next_bound(record) == 40
    api, doc, rows, md = _views(out)

    row = api.loc["paper 3-shot"]
    assert row["verdict"] == "cannot tell yet within 0.05" and row["sequential"].startswith(row["verdict"])
    assert math.isnan(row["diff_ci90_low"]) and math.isnan(row["diff_ci90_high"])  # no 90% interval is the rule's
    assert (row["diff_ci_low"], row["diff_ci_high"], row["level"]) == (lk.running[0], lk.running[1], lk.level)
    assert (row["look"], row["looks"], row["items_to_settle"], row["max_items"], row["next_look"]) == (1, 1, bound,
                                                                                                     bound, 40)
    assert "differs" not in row["reasons"] and f"max_items={bound}" in row["reasons"]  # the API's words
    assert row["fixed_n_verdict"] == words(check) == "differs by more than 0.05"
    assert (row["fixed_n_diff_ci90_low"], row["fixed_n_diff_ci90_high"]) == check.ci90
    assert row["fixed_n_reasons"] == "; ".join(check.reasons) and row["fixed_n_items_to_settle"] is pd.NA

    j = doc["paper 3-shot"]
    assert (j["verdict"], j["ci90"], j["items_to_settle"]) == ("cannot tell yet", None, bound)
    assert j["reasons"][0] == j["sequential"]["line"] and not any("differs" in r for r in j["reasons"])
    assert (j["sequential"]["interval"], j["sequential"]["level"]) == (list(lk.running), lk.level)
    assert (j["sequential"]["next_look"], j["sequential"]["max_items"]) == (40, bound)
    assert j["fixed_n"] == {"verdict": "differs", "words": words(check), "about": FIXED_N, "ci90": list(check.ci90),
                            "items_to_settle": None, "reasons": list(check.reasons)}

    c = rows["paper 3-shot"]
    assert (c["verdict"], c["diff_ci90_lo"], c["items_to_settle"].split(".")[0]) == ("cannot tell yet", "", "40")
    assert float(c["diff_ci_lo"]) == lk.running[0] and float(c["fixed_n_diff_ci90_lo"]) == check.ci90[0]

    # the text: every note that says differs is said to be the fixed-n one; what settles the rule's is there too
    cell = next(line for line in md.splitlines() if "(paper 3-shot)" in line)
    notes = cell.split(" | ")[-1].removeprefix("abricot_abs.pearson: ")
    assert all(n.startswith(("the fixed-n", "fixed-n (does not account")) for n in notes.split("; abricot_abs.pearson: ")
               if "differs" in n)
    assert f"fixed-n (does not account for the looks): {check.reasons[1]}" in notes
    assert f"--max-items {bound}" in render(notes, flags)  # as `report` renders it


def test_a_settled_rule_has_nothing_to_settle_and_an_unstopped_one_its_own_next_look(tmp_path, abricot_file):
    out = _run(tmp_path, abricot_file)
    api, doc, _, _ = _views(out)  # as the run left it: the rule settled at its look
    j = doc["paper 3-shot"]
    assert j["sequential"]["settled"] and j["items_to_settle"] is None and j["sequential"]["next_look"] is None
    assert api.loc["paper 3-shot", "items_to_settle"] is pd.NA

    def unstopped(rule):  # a rule with a look still planned (its run's bound past it)
        _open_at_bound(rule)
        rule["planned"] = [20, 40]

    _doctor(out, unstopped)
    api, doc, _, _ = _views(out)
    j = doc["paper 3-shot"]
    assert (j["items_to_settle"], j["sequential"]["next_look"], j["sequential"]["max_items"]) == (40, 40, None)
    assert (j["sequential"]["look"], j["sequential"]["looks"]) == (1, 2) and "its rule's next look" in j["reasons"][-1]
