"""`report` of a --until-settled run: a published row its rule judged gets the rule's verdict as the run's (the run's
own verdict line: its look, its interval, its guarantee), in every format; the fixed-n verdict of the same items only
beside it, said not to account for the looks. A run without the rule is reported as before."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from abricot_local.cli import cli

FAKE = ("--backend", "fake", "--n-ctx", "4096")


def run(models, data, out: Path, *more):
    r = CliRunner().invoke(cli, [str(a) for a in ("run", "fake-as-llama", "--models", models, "--tasks", "abricot_abs",
                                                  "--data", f"abricot={data}", *FAKE, *more, "--out", out)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


def report(folder: Path, fmt: str) -> str:
    from abricot_local.report import tables

    return tables.render(tables.build([folder]), fmt, table="published")


def page_checks(folder: Path) -> list[dict]:
    from abricot_local.report import html, tables

    return html.report_data(tables.build([folder]), figures=False)["checks"]


def column(text: str, header: str) -> str:
    """The cells of the text table's column ``header`` (its first block), their folded lines joined."""
    lines = text.splitlines()
    at = next(k for k, ln in enumerate(lines) if header in ln.split())
    start = lines[at].index(header)
    end = start + len(lines[at + 1][start:].split()[0])
    cells = []
    for ln in lines[at + 2:]:
        if not ln.strip():
            break
        cells.append(ln[start:end].strip())
    return " ".join(c for c in cells if c)


def last_words(line: str) -> str:
    """The verdict's words at the head of a rule's line (before its parenthesis)."""
    return line.split(" (", 1)[0]


def own_line(record, name: str) -> str:
    """The run's verdict line on ``name`` as `run` prints it (console.settled: the run's own words), its name left out."""
    from abricot_local import console

    found = [line.strip() for line in console.settled(record).splitlines() if line.strip().startswith(name + ": ")]
    assert len(found) == 1, console.settled(record)
    return found[0].removeprefix(name + ": ")


def test_the_rules_verdict_is_the_runs_in_every_format_the_fixed_n_one_beside_it(tmp_path, claims, abricot_file):
    from abricot_local.analysis.settled import FIXED_N
    from abricot_local.analysis.reproduction import words
    from abricot_local.record import read_run

    out = tmp_path / "settled"
    printed = run(claims, abricot_file, out, "--until-settled", "--max-items", 80).stdout
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    rule = doc["tasks"]["abricot_abs"]["sequential"]
    name = rule["questions"][0]["name"]
    # the record as the run left it, then its rule's last look made to disagree with the fixed-n verdict (a rule that
    # reads fewer items at a higher level may say cannot tell yet where the fixed-n 90% verdict says differs)
    for doctored in (False, True):
        if doctored:
            lk = rule["looks"][-1]
            lk["verdict"], lk["running"] = "cannot tell yet", [-0.2, 0.3]
            (out / "results.json").write_text(json.dumps(doc), encoding="utf-8")
        record = read_run(out)
        check = next(c for c in record.published.checks if f"{c.source}: {c.reference} {c.task}.{c.metric}" == name)
        line = own_line(record, name)
        last = rule["looks"][-1]
        assert line.startswith(words(check) if not doctored else "cannot tell yet within 0.05")
        assert f"look {last['k']} of {len(rule['planned'])}" in line and "at most 0.1" in line
        if not doctored:
            assert f"{name}: {line}" in printed  # what the run printed, word for word
        fixed = f"{FIXED_N}: {check.reasons[0]}"
        assert check.reasons[0].startswith(words(check))

        md = report(out, "markdown")
        assert f"run {check.value:.3f} vs published {check.published:.2f}: {line}" in md
        assert fixed in md and "a row judged by a --until-settled run's rule: that rule's verdict" in md
        assert (f"published {check.published:.2f}: {words(check)} |" in md) is False  # the fixed-n one is no verdict

        cell = column(report(out, "table"), f"{check.task}.{check.metric}")  # its folded lines, their words in order
        assert cell.startswith(f"run {check.value:.3f} vs published {check.published:.2f}: {line[:150]}")

        row = next(c for c in json.loads(report(out, "json"))["published_checks"] if c["reference"] == check.reference)
        assert row["verdict"] == last["verdict"] and row["sequential"]["line"] == line
        assert (row["sequential"]["look"], row["sequential"]["looks"], row["sequential"]["n"]) == (
            last["k"], len(rule["planned"]), last["n"])
        assert row["sequential"]["settled"] is (not doctored)
        assert row["fixed_n"] == {"verdict": check.verdict, "words": words(check), "about": FIXED_N,
                                  "ci90": list(check.ci90), "items_to_settle": check.items_to_settle,
                                  "reasons": list(check.reasons)}
        assert row["ci90"] is None  # the fixed-n figures under fixed_n: the row's fields are the rule's

        csv = report(out, "csv").splitlines()
        assert csv[0].split(",")[11:14] == ["verdict", "sequential", "fixed_n_verdict"]

        page = next(c for c in page_checks(out) if c["reference"].startswith(check.reference))
        assert page["verdict"] == line and page["notes"][0] == fixed

        import abricot_local as al  # the API: Run.published() says the run's verdict too

        api = al.load_run(out).published().set_index("reference").loc[check.reference]
        assert api["verdict"] == last_words(line) and api["sequential"] == line
        assert api["fixed_n_verdict"] == words(check)
    assert row["verdict"] != row["fixed_n"]["verdict"]  # the doctored record: the rule's verdict shown, not the other


def test_a_run_without_the_rule_is_reported_as_before(tmp_path, claims, abricot_file):
    from abricot_local.analysis.settled import FIXED_N
    from abricot_local.analysis.reproduction import words
    from abricot_local.record import read_run
    from abricot_local.report import tables

    out = tmp_path / "fixed"
    run(claims, abricot_file, out, "--sample", 20)
    check = read_run(out).published.checks[0]
    md = report(out, "markdown")
    assert f"run {check.value:.3f} vs published {check.published:.2f}: {words(check)} |" in md
    assert FIXED_N not in md and "--until-settled" not in md
    rows = json.loads(report(out, "json"))["published_checks"]
    assert rows[0]["verdict"] == check.verdict and not {"sequential", "fixed_n"} & set(rows[0])
    import abricot_local as al

    assert "sequential" not in al.load_run(out).published().columns
    frame = tables.published_frame(tables.build([out]))
    assert "sequential" not in frame.columns and "fixed_n_verdict" not in frame.columns
    assert page_checks(out)[0]["verdict"] == words(check)
