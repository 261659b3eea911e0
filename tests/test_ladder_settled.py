"""`report`'s quant ladder of a `run --quants --until-settled` sweep: a rung its rule judged gets the rule's verdict as
the run's (the run's own verdict line: its look, its interval, its guarantee) in text, markdown, JSON and the HTML
page; compare's fixed-n verdict of the same items only beside it, said not to account for the looks. A rung whose rule
read another reference run, and a ladder without the rule, are reported as before. Fake backend, in-process; 120
invented DISCOTEX items."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest

from conftest import FAKE_DISCOTEX as FAKE, fake_quants, invoke_ok as invoke
from test_report_settled import column  # the text table's column, folded lines joined
from invented_data import write_discotex


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Two fake quants of one base (every answer alike) swept --until-settled at a margin of 0.2: the rung settles
    equivalent at its first look (20 items), compare's fixed-n verdict beside it judged at the same margin."""
    tmp = tmp_path_factory.mktemp("ladder")
    data = write_discotex(tmp / "discotex", per_source=60)
    models = fake_quants(tmp / "models.toml", {"fake-q8": "Q8_0", "fake-q2": "Q2_K", "fake-f16": "F16"})
    out = tmp / "sweep"
    printed = invoke("run", "fake-q2", "--quants", "Q2_K,Q8_0", "--models", models, *FAKE, "--data-dir", data,
                     "--until-settled", "--margin", 0.2, "--out", out).stdout
    return tmp, models, data, out, printed


def build(*folders):
    from abricot_local.report import tables

    return tables.build(list(folders))


def rung_of(rungs, run: str):
    return next(r for r in rungs if r.run == run)


def ruled(text: str, header: str) -> str:
    """``text`` from the header line whose next line is the table's rule and that holds ``header`` as a word (another
    column's folded header above it may hold the word too), for ``column``."""
    lines = text.splitlines()
    at = next(k for k, ln in enumerate(lines[:-1]) if header in ln.split() and lines[k + 1].startswith("---"))
    return "\n".join(lines[at:])


def header_of(text: str, cell: str) -> str:
    """The header of the text table's column holding ``cell`` (on one line), its folded lines joined."""
    lines = text.splitlines()
    row = next(k for k, ln in enumerate(lines) if cell in ln)
    start = lines[row].index(cell)
    rule = next(k for k in range(row, -1, -1) if lines[k].strip() and set(lines[k].strip()) <= {"-", " "})
    end = start + len(lines[rule][start:].split()[0])
    head = []
    for ln in reversed(lines[:rule]):
        if not ln.strip():
            break
        head.insert(0, ln[start:end].strip())
    return " ".join(h for h in head if h)


def own_line(record, name: str) -> str:
    """The run's verdict line on ``name`` as `run` prints it (console.settled), its name left out."""
    from abricot_local import console

    found = [ln.strip() for ln in console.settled(record).splitlines() if ln.strip().startswith(name + ": ")]
    assert len(found) == 1, console.settled(record)
    return found[0].removeprefix(name + ": ")


def test_a_rung_a_rule_judged_shows_the_rules_verdict_and_the_fixed_n_one_beside_it(sweep, tmp_path):
    from abricot_local.analysis import sequential as sq
    from abricot_local.analysis.ladder import ladders
    from abricot_local.analysis.settled import FIXED_N, rung_verdict
    from abricot_local.record import read_run
    from abricot_local.report import html, ladder as rows, tables

    _, _, _, made, printed = sweep
    out = tmp_path / "sweep"
    shutil.copytree(made, out)  # moved whole: the rung's reference folder is named from its own
    rung_dir, ref_dir = out / "fake-q2", out / "fake-q8"
    doc = json.loads((rung_dir / "results.json").read_text(encoding="utf-8"))
    rule = doc["tasks"]["discotex"]["sequential"]
    name = sq.pair_question_name("fake-q2", "fake-q8", "discotex", "accuracy")
    assert [q["name"] for q in rule["questions"]] == [name]  # the name run/settle.py gives the question
    for doctored in (False, True):
        if doctored:  # the rule's last look made to say otherwise: the report follows the record, not compare
            lk = rule["looks"][-1]
            lk["verdict"], lk["running"] = "cannot tell yet", [-0.3, 0.3]
            (rung_dir / "results.json").write_text(json.dumps(doc), encoding="utf-8")
        record = read_run(rung_dir)
        line = own_line(record, name)
        last = rule["looks"][-1]
        assert line.startswith("cannot tell yet" if doctored else "equivalent within 0.2 (reached sequentially at")
        assert f"look {last['k']} of {len(rule['planned'])}" in line and "at most 0.1" in line
        if not doctored:
            assert f"{name}: {line}" in printed  # what the run printed, word for word
        assert rung_verdict(record, "fake-q8", "discotex", "accuracy").line == line
        assert rung_verdict(record, "fake-f16", "discotex", "accuracy") is None  # another reference: no verdict

        report = build(ref_dir, rung_dir)
        r = rung_of(ladders(report.runs, given=report.given), "fake-q2")
        assert r.settled is not None and r.settled.line == line and r.verdict is not None
        fixed = rows.fixed_n_text(r)
        assert fixed == rows.verdict_text(replace(r, settled=None))  # compare's, as a rung without the rule shows it
        # at the rule's margin (0.2), not the task's (0.02, where 20 items cannot tell yet): every answer alike
        assert r.verdict.margin == last["margin"] == 0.2 and fixed == "identical; equivalent within 0.2"

        md = tables.render(report, "markdown", table="quant")
        assert f"| {rows.FIXED_N_COLUMN} |" in md
        assert f"| fake-q2 | {last['n']} | {line} (accuracy) | {fixed} (accuracy) |" in md

        text = tables.render(report, "table", table="quant")
        ladder_text = text[text.index("Quant ladder"):]
        assert f"{line} (accuracy)" in column(ruled(ladder_text, "verdict"), "verdict")  # the run's line whole
        assert header_of(ladder_text, f"{fixed} (accuracy)") == rows.FIXED_N_COLUMN  # the rule's margin, the looks
        assert f"{fixed} (accuracy)" in " ".join(ladder_text.split())

        j = next(x for x in json.loads(tables.render(report, "json", table="quant"))["quant_ladder"]
                 if x["run"] == "fake-q2")
        assert j["verdict"]["kind"] == last["verdict"] and j["verdict"]["line"] == line
        assert j["verdict_text"] == line
        assert (j["sequential"]["look"], j["sequential"]["looks"], j["sequential"]["n"]) == (
            last["k"], len(rule["planned"]), last["n"])
        assert j["sequential"]["settled"] is (not doctored) and j["sequential"]["line"] == line
        assert j["fixed_n"]["kind"] == r.verdict.kind and j["fixed_n"]["words"] == fixed
        assert j["fixed_n"]["about"] == FIXED_N and j["difference_text"] == rows.difference_text(r.verdict)

        page = next(x for x in html.report_data(report, figures=False)["ladder"] if x["run"] == "fake-q2")
        assert page["verdict_text"] == f"{line}; {FIXED_N}: {fixed}" and fixed.startswith("identical; ")
        assert page["verdict"]["kind"] == last["verdict"]


def test_a_rung_whose_rule_read_another_reference_run_and_a_ladder_without_the_rule_are_as_before(sweep, tmp_path):
    from abricot_local.analysis.ladder import ladders
    from abricot_local.analysis.settled import FIXED_N
    from abricot_local.report import html, ladder as rows, tables

    _, models, data, made, _ = sweep
    plain = {}
    for alias in ("fake-q8", "fake-q2", "fake-f16"):
        plain[alias] = tmp_path / alias
        invoke("run", alias, "--models", models, *FAKE, "--data-dir", data, "--sample", 20, "--out", plain[alias])

    for folders in ((plain["fake-q8"], plain["fake-q2"]),  # no rule at all
                    (plain["fake-q8"], made / "fake-q2"),  # the rule read the sweep's fake-q8, not this one
                    (plain["fake-f16"], made / "fake-q8", made / "fake-q2")):  # another reference: F16
        report = build(*folders)
        rungs = ladders(report.runs, given=report.given)
        assert rungs and all(r.settled is None for r in rungs)
        q2 = next(r for r in rungs if r.quant.upper().startswith("Q2"))
        assert rows.verdict_text(q2) == rows.fixed_n_text(q2) and q2.verdict is not None
        frame = rows.frame(rungs)
        assert list(frame.columns) == list(rows.COLUMNS)
        assert frame.loc[frame["run"] == q2.run, "verdict"].iloc[0] == f"{rows.fixed_n_text(q2)} ({q2.verdict.metric})"
        md = tables.render(report, "markdown", table="quant")
        assert FIXED_N not in md and rows.FIXED_N_COLUMN not in md and "sequentially" not in md
        for rec in json.loads(tables.render(report, "json", table="quant"))["quant_ladder"]:
            assert not {"sequential", "fixed_n"} & set(rec)
        j = next(x for x in rows.records(rungs) if x["run"] == q2.run)
        assert j["verdict"]["kind"] == q2.verdict.kind and j["verdict"]["line"] == q2.verdict.line
        assert rows.page_records(rungs) == rows.records(rungs)
        page = html.report_data(report, figures=False)["ladder"]
        assert [p["verdict_text"] for p in page] == [rows.verdict_text(r) for r in rungs]
