"""A `run MODEL --quants Q,Q --until-settled` ladder stopped at its first look resumes with the command it printed: a
rung with no folder yet starts there, as a sweep's model does (run.settle_sweep.resumes, the one rule of both). Before,
the resume finished the reference's look, then every rung failed `nothing to resume: ... does not exist` (exit 1),
each time. And a rung open at its bound is advised one figure and one bound wherever its advice is said: its run's
end message, the ladder's line under the table, `report` (analysis.settled.fixed_n_needed; compare's figure is the
fixed-n verdict's, in its column). Before, the end message said `~90 items ... --max-items 90` and the ladder's line
`--max-items 40; ~61 items`. Fake backend, in-process; 120 invented DISCOTEX items."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import fake_quants
from invented_data import write_discotex

MODELS = ("fake-q2", "fake-q4", "fake-q8")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Three fake quants of one base, their models.toml and data."""
    tmp = tmp_path_factory.mktemp("ladder_first_look")
    data = write_discotex(tmp / "discotex", per_source=60)
    models = fake_quants(tmp / "models.toml", {f"fake-{q[:2].lower()}": q for q in ("Q2_K", "Q4_1", "Q8_0")})
    return models, data


def ladder(made, out, *more) -> list[str]:
    models, data = made
    return [str(a) for a in ("run", "fake-q8", "--quants", "Q8_0,Q4_1,Q2_K", "--models", models, "--backend", "fake",
                             "--tasks", "discotex", "--n-ctx", "4096", "--data-dir", data, "--until-settled", *more,
                             "--out", out)]


def invoke(monkeypatch, args: list[str]):
    """``args`` as the command line (sys.argv too: the commands a run prints are made from it)."""
    monkeypatch.setattr(sys, "argv", ["abricot-local", *args])
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def looks(folder: Path) -> list[tuple[int, str]]:
    doc = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    return [(lk["n"], lk["verdict"]) for lk in doc["tasks"]["discotex"]["sequential"]["looks"]]


@pytest.mark.parametrize("scored", [6, 13])  # in the reference's first look; in the first rung's (the next none)
def test_a_ladder_stopped_at_its_first_look_resumes_with_the_command_it_printed(made, tmp_path, monkeypatch, scored):
    """The reviewer's ladder (--margin 0.2 --looks 10,20 --max-items 20) stopped by Ctrl-C after ``scored`` items:
    its `resume with:` command, run verbatim, finishes every model (exit 0), each as the uninterrupted ladder does."""
    from conftest import fail_after

    out, more = tmp_path / "lad", ("--margin", 0.2, "--looks", "10,20", "--max-items", 20)
    with monkeypatch.context() as m:
        fail_after(m, scored, KeyboardInterrupt)
        r = invoke(m, ladder(made, out, *more))
    assert r.exit_code == 130, r.output
    assert not (out / "fake-q2").exists() and (out / "fake-q4").exists() == (scored > 10)
    said = [ln.removeprefix("resume with: ") for ln in r.output.splitlines() if ln.startswith("resume with: ")]
    assert len(said) == 1 and said[0].endswith(f"--out {out} --resume"), r.output
    r = invoke(monkeypatch, shlex.split(said[0])[1:])
    assert r.exit_code == 0 and "nothing to resume" not in r.output and "failed" not in r.output, r.output
    for rung in ("fake-q4", "fake-q2"):  # each rung's first look, once (the reference's, where it was not held)
        assert r.output.count(f"== look at 10 items: {rung} against fake-q8") == 1, r.output

    fresh = tmp_path / "fresh"
    assert invoke(monkeypatch, ladder(made, fresh, *more)).exit_code == 0
    for model in MODELS:
        assert (out / model / "samples-discotex.jsonl").read_bytes() == \
            (fresh / model / "samples-discotex.jsonl").read_bytes(), model
        if model != "fake-q8":
            assert looks(out / model) == looks(fresh / model), model


def test_the_sweep_and_the_ladder_ask_one_rule_whether_a_models_first_run_resumes(made, tmp_path, monkeypatch):
    """run.settle_sweep.resumes: with --resume, a folder that is there; never one not made yet, nor without --resume.
    A sweep and a ladder each ask it for every model's first run (a second copy of the condition would not be)."""
    from abricot_local.run import settle_sweep

    there = tmp_path / "there"
    there.mkdir()
    for resume, folder, want in ((True, there, True), (True, tmp_path / "none", False), (False, there, False)):
        assert settle_sweep.resumes(SimpleNamespace(resume=resume), folder) is want

    asked: list[str] = []
    real = settle_sweep.resumes

    def spy(request, folder):
        asked.append(Path(folder).name)
        return real(request, folder)

    monkeypatch.setattr(settle_sweep, "resumes", spy)
    models, data = made
    sweep = ["run", "fake-q2", "fake-q8", "--models", str(models), "--backend", "fake", "--tasks", "discotex",
             "--data-dir", str(data), "--sample", "3", "--out", str(tmp_path / "sw"), "--resume"]
    assert invoke(monkeypatch, sweep).exit_code == 0
    assert asked == ["fake-q2", "fake-q8"]
    asked.clear()
    r = invoke(monkeypatch, ladder(made, tmp_path / "lad", "--margin", 0.2, "--looks", "10", "--max-items", 10,
                                   "--resume"))
    assert r.exit_code == 0, r.output
    assert sorted(asked) == sorted(MODELS)


def test_a_rung_open_at_its_bound_is_advised_one_figure_and_one_bound_everywhere(made, tmp_path, monkeypatch):
    """At --margin 0.05, --max-items 20, the Q2_K rung stays open at its one look: the rule's own figure (scaled from
    its look's interval) lies far beyond the next look (40). Its end message, the ladder's line at the sweep's end and
    `report`'s line all say that figure and grow to the same --max-items; compare's own figure (another interval: the
    fixed-n verdict's) stays in the fixed-n column, and the rule's figure is said not to be it."""
    out = tmp_path / "lad"
    r = invoke(monkeypatch, ladder(made, out, "--margin", 0.05, "--max-items", 20))
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())
    end = text[text.index("fake-q2 vs fake-q8 discotex.accuracy: ~"):text.index("Quant ladder")]
    said = re.search(r"fake-q2 vs fake-q8 discotex\.accuracy: ~(\d+) items would settle it at a fixed n \(scaled from "
                     r"the rule's own interval at its last look, not the fixed-n verdict's\), far beyond the next look "
                     r"at 40 items", end)
    assert said, end
    needed = int(said.group(1))
    commands = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("abricot-local run ")]
    assert len(commands) == 2 and all(c.endswith(f"--max-items {needed} --resume") for c in commands), commands

    fixed = re.search(r"Q2_K identical; cannot tell yet within 0\.05 \(~(\d+) items\)", text)
    assert fixed and int(fixed.group(1)) != needed, text  # compare's: another figure, of the fixed-n verdict
    report = CliRunner().invoke(cli, ["report", str(out)])
    assert report.exit_code == 0, report.output
    for where in (text, " ".join(report.stdout.split())):
        line = where[where.index("cannot tell yet: "):]  # the Q2_K rung's (`report` names it Q2 by its run's name)
        line = line[re.search(r"Q2(_K)? \(whether", line).start():].split(" ", 1)[1]
        assert line.startswith(
            f"(whether within 0.05: not settled over 20 items, the rule's verdict at look 1 of 1; ~{needed} items "
            "would settle it at a fixed n (scaled from the rule's own interval at its last look, not the fixed-n "
            "verdict's), far beyond the rule's next look at 40 items, which is unlikely to settle it: the run grown "
            f"by --resume --until-settled --max-items {needed} could, or a wider --margin)"), line[:600]
        assert "--max-items 40" not in line[:600]
