"""`run MODEL --quants Q,Q --until-settled` ladders (run/settle_sweep.py) as a user resumes and reads them: the advice a
ladder prints at its bound, run verbatim, takes each open rung on to the looks the larger bound plans (a settled rung
stays); each rung's plan line is its own (its looks against the reference), and a plan that cannot be made is said in
the command's words; a rung's verdict block points only at a fixed-n verdict that is printed; its progress counts to
the look it runs to; `check` says the looks it took again. Fake backend, in-process; 120 invented DISCOTEX items."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import FAKE_DISCOTEX as FAKE, fake_quants
from invented_data import write_discotex


def results(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text(encoding="utf-8"))


def looks(folder: Path) -> list[tuple[int, str]]:
    return [(lk["n"], lk["verdict"]) for lk in results(folder)["tasks"]["discotex"]["sequential"]["looks"]]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Two fake quants of one base (every answer alike), their models.toml and data."""
    tmp = tmp_path_factory.mktemp("ladder_resume")
    data = write_discotex(tmp / "discotex", per_source=60)
    models = fake_quants(tmp / "models.toml", {"fake-q8": "Q8_0", "fake-q2": "Q2_K"})
    return models, data


def ladder_args(made, out, *more) -> list[str]:
    models, data = made
    return [str(a) for a in ("run", "fake-q2", "--quants", "Q2_K,Q8_0", "--models", models, *FAKE, "--data-dir", data,
                             "--until-settled", *more, "--out", out)]


def invoke(monkeypatch, args: list[str]):
    """``args`` as the command line (sys.argv too: the advice a run prints is made from it)."""
    monkeypatch.setattr(sys, "argv", ["abricot-local", *args])
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture(scope="module")
def bound40(made, tmp_path_factory):
    """One `--max-items 40` ladder (every progress line shown), made once for the tests that only read it or its
    output: (its folder, the CliRunner result). A test that changes it works on a copy."""
    from conftest import isolated_env

    root = tmp_path_factory.mktemp("bound40")
    with pytest.MonkeyPatch.context() as mp:  # as isolated_home, for a run shared past its test
        for name, value in isolated_env(root).items():
            mp.setenv(name, value)
        mp.setenv("ABRICOT_PROGRESS_SECONDS", "0")  # every progress line
        mp.chdir(root)
        r = invoke(mp, ladder_args(made, root / "o", "--max-items", 40))
    return root / "o", r


def test_the_advice_at_a_ladders_bound_run_verbatim_takes_each_open_rung_to_the_larger_bounds_looks(
        made, tmp_path, monkeypatch):
    """At the task's margin (0.02) the rung is open at --max-items 40 (looks 20, 40); its advice (--max-items 80
    --resume), run as printed, grows the reference to 80, then the rung to its look at 80: the rule and samples a
    fresh --max-items 80 ladder makes. Before, the rung was dropped at look 20 (its rule stopped at its old bound):
    nothing scored, results.json still at 40."""
    out = tmp_path / "ladder"
    r = invoke(monkeypatch, ladder_args(made, out, "--max-items", 40))
    assert looks(out / "fake-q2") == [(20, "cannot tell yet"), (40, "cannot tell yet")]
    advice = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("abricot-local run ")]
    assert advice and all(a == advice[0] for a in advice), r.stdout
    argv = shlex.split(advice[0])[1:]
    assert argv[-3:] == ["--max-items", "80", "--resume"], argv

    r = invoke(monkeypatch, argv)
    assert r.stderr.count("== look at 80 items") == 2, r.stderr  # the reference, then the rung
    assert "== look at 20 items" not in r.stderr and "== look at 40 items" not in r.stderr  # held: not run again
    rung, ref = results(out / "fake-q2"), results(out / "fake-q8")
    assert (rung["config"]["sample"], rung["config"]["max_items"], ref["config"]["sample"]) == (80, 80, 80)
    assert [n for n, _ in looks(out / "fake-q2")] == [20, 40, 80]

    fresh = tmp_path / "fresh"
    invoke(monkeypatch, ladder_args(made, fresh, "--max-items", 80))
    assert looks(out / "fake-q2") == looks(fresh / "fake-q2")
    for model in ("fake-q2", "fake-q8"):
        assert (out / model / "samples-discotex.jsonl").read_bytes() == \
            (fresh / model / "samples-discotex.jsonl").read_bytes(), model

    # the same bound again: every rung held at its bound, nothing scored, nothing grown
    before = {m: (out / m / "results.json").read_bytes() for m in ("fake-q2", "fake-q8")}
    r = invoke(monkeypatch, argv)
    assert "== look at" not in r.stderr, r.stderr
    assert before == {m: (out / m / "results.json").read_bytes() for m in ("fake-q2", "fake-q8")}


def test_a_rung_that_settled_stays_as_it_is_when_the_bound_grows(made, tmp_path, monkeypatch):
    """At a margin of 0.2 the rung settles equivalent at its first look (20): a larger bound scores nothing (the
    reference is not grown either)."""
    out = tmp_path / "wide"
    invoke(monkeypatch, ladder_args(made, out, "--margin", 0.2, "--max-items", 40))
    assert looks(out / "fake-q2") == [(20, "equivalent")]
    r = invoke(monkeypatch, ladder_args(made, out, "--margin", 0.2, "--max-items", 80, "--resume"))
    assert "== look at" not in r.stderr, r.stderr
    assert looks(out / "fake-q2") == [(20, "equivalent")] and results(out / "fake-q8")["config"]["sample"] == 20


def test_a_rungs_plan_line_gives_its_looks_against_the_reference(bound40):
    """Each rung's plan, made once it loads, knows its reference (as --dry-run's): its looks, no `plan: not made
    (UsageError: nothing to settle ...)`; the reference's is a plain --sample run's."""
    _, r = bound40
    assert "plan: not made" not in r.stderr and "UsageError" not in r.stderr, r.stderr
    assert r.stderr.count("plan: fake-q2 discotex: at most 40 items") == 1, r.stderr
    assert r.stderr.count("plan: fake-q2 discotex: at most 20 items left (20 saved)") == 1, r.stderr
    assert r.stderr.count("; looks at 20, 40 items") == 2, r.stderr
    assert "plan: fake-q8 discotex: 20 items," in r.stderr and "plan: fake-q8 discotex: 20 items left" in r.stderr


def test_a_rungs_progress_counts_to_the_look_it_runs_to(bound40):
    """A rung's run at the look at 20 stops there: its progress counts to 20 (its ETA to it), at 40 to 40."""
    _, r = bound40  # made with ABRICOT_PROGRESS_SECONDS=0: every progress line
    steps = re.split(r"^== look at (\d+) items: (\S+)", r.stderr, flags=re.M)[1:]
    seen = []
    for n, who, text in zip(steps[::3], steps[1::3], steps[2::3]):
        shown = [ln for ln in text.splitlines() if ln.startswith("discotex: ")]
        totals = {int(m.group(1)) for ln in shown for m in [re.match(r"discotex: \d+/(\d+) items", ln)]}
        assert totals == {int(n)}, (who, n, shown)
        seen.append((int(n), who))
    assert seen == [(20, "the"), (20, "fake-q2"), (40, "the"), (40, "fake-q2")]


@pytest.mark.parametrize("error, said", [
    ("usage", "plan: not made: the plan failed for --max-items 3"),
    ("other", "plan: not made (RuntimeError: the plan failed)"),
])
def test_a_plan_that_cannot_be_made_is_said_in_the_commands_words(made, tmp_path, monkeypatch, error, said):
    """An AbricotError making the plan is said as the command line says options, without its class name; an
    unexpected exception names its type. The run goes on either way."""
    from abricot_local.errors import UsageError, opt
    from abricot_local.run import dry_run

    def failing(*args, **kwargs):
        if error == "usage":
            raise UsageError(f"the plan failed for {opt('max_items', 3)}")
        raise RuntimeError("the plan failed")

    monkeypatch.setattr(dry_run, "of_run", failing)
    models, data = made
    args = [str(a) for a in ("run", "fake-q8", "--models", models, *FAKE, "--data-dir", data, "--sample", 5,
                             "--out", tmp_path / "o")]
    r = invoke(monkeypatch, args)
    assert said in r.stderr.splitlines(), r.stderr
    assert ("UsageError" in r.stderr) is False and "max_items=" not in r.stderr
    assert (tmp_path / "o" / "results.json").is_file()


def test_a_rungs_verdict_block_points_only_at_a_fixed_n_verdict_that_is_printed(bound40):
    """A rung's block is printed under `published comparison: ... nothing to compare with`: it names the quant
    ladder at the sweep's end, which prints compare's fixed-n verdict beside the rule's, not "the published
    comparison above". A rule's record with no published comparison and no reference names none."""
    from abricot_local import console
    from abricot_local.record import read_run

    out, r = bound40
    block = r.stdout[r.stdout.index("verdict (--until-settled"):]
    assert "nothing to compare with" in r.stdout[:r.stdout.index("verdict (--until-settled")]
    assert "the published comparison above" not in r.stdout, r.stdout
    assert "compare's fixed-n 90% verdict over the same items, at the rule's margin, stands beside this one in the " \
           "quant ladder at the sweep's end" in " ".join(block.split())
    assert "fixed-n verdict at the rule's margin (does not account for" in r.stdout[r.stdout.index("Quant ladder"):]

    record = read_run(out / "fake-q2")
    alone = replace(record, tasks={k: replace(e, sequential=replace(e.sequential, reference=None))
                                   for k, e in record.tasks.items()})
    text = console.settled(alone)
    assert text.startswith("verdict (") and "fixed-n" not in text and "published comparison" not in text


def test_check_of_a_rung_says_the_looks_it_took_again(bound40, tmp_path, monkeypatch):
    """`check` on a rung: how many looks, at which items, against which reference run, each as recorded; a look
    doctored in results.json: said not as recorded."""
    out = tmp_path / "o"
    shutil.copytree(bound40[0], out)
    r = invoke(monkeypatch, ["check", str(out / "fake-q2")])
    assert ("note: discotex: its rule's 2 look(s) (at 20, 40 items) taken again over the run's samples against the "
            "reference run in ../fake-q8: each as recorded (every verdict the same, every interval within 1e-06)"
            ) in r.stdout.splitlines(), r.stdout
    assert "reproduced: " in r.stdout

    doctored = tmp_path / "doctored"
    shutil.copytree(out, doctored)
    doc = results(doctored / "fake-q2")
    doc["tasks"]["discotex"]["sequential"]["looks"][1]["running"] = [-0.5, 0.5]
    (doctored / "fake-q2" / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    r = CliRunner().invoke(cli, ["check", str(doctored / "fake-q2")], catch_exceptions=False)
    assert r.exit_code != 0
    assert "note: discotex: its rule's 2 look(s) (at 20, 40 items) taken again over the run's samples against the " \
           "reference run in ../fake-q8: not as recorded (1 difference(s), below)" in r.stdout.splitlines(), r.stdout
