"""A `--until-settled` verdict whose running interval (its looks' intervals intersected) misses the last look's own
estimate says so in its line (sequential.Look.outside, .disagreement, Sequential.line) wherever the line is shown
(the run's last lines, `report`), and `report`'s JSON gives ``estimate`` and ``estimate_outside`` under
``sequential`` (settled.SettledVerdict.to_json); the rule, its verdict and its numbers unchanged. A run whose
looks agree says nothing of it. Fake backend, in-process, on the real ABRICOT release."""

from __future__ import annotations

import json
import math

from click.testing import CliRunner

from abricot_local.analysis import sequential as sq
from abricot_local.cli import cli

SAID = "look 3's own estimate, -0.138, lies outside it: the looks disagree, and a larger run would tell"
CALAMITA = "CALAMITA leaderboard: Llama-3.1-8B-Instruct abricot_inc@calamita.pearson"
PAPER = "paper 3-shot: llama-3.1-8b abricot_inc.pearson"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def line_of(output: str, question: str) -> str:
    return next(ln.strip() for ln in output.splitlines() if ln.strip().startswith(question + ": "))


def test_the_reviewers_repro_says_its_last_look_lies_outside_the_interval_it_settled_on(tmp_path, abricot_file):
    """The finding's run (fake-as-llama claiming both sources, abricot_inc, --max-items 80): the CALAMITA row
    settles `reproduced` on [-0.013, +0.040], look 1's lower bound met with look 3's own [-0.322, +0.040], while
    look 3's own estimate is -0.138: its line says so, in the run's last lines and `report`'s text, markdown and
    JSON; the paper row, whose look 3 estimate lies inside its interval, says nothing of it. Verdicts and
    intervals are as before the words."""
    models, out = tmp_path / "models.toml", tmp_path / "u80"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nsource = "synthetic"\nreproduces = "ABRICOT paper: '
                      'llama-3.1-8b; CALAMITA leaderboard: Llama-3.1-8B-Instruct"\n', encoding="utf-8")
    r = invoke("run", "fake-as-llama", "--models", models, "--tasks", "abricot_inc", "--data",
               f"abricot={abricot_file}", "--n-ctx", 8192, "--until-settled", "--max-items", 80, "--out", out)
    assert r.exit_code == 0, r.output
    calamita, paper = line_of(r.stdout, CALAMITA), line_of(r.stdout, PAPER)
    assert calamita.startswith(f"{CALAMITA}: reproduced within 0.05 (reached sequentially at look 3 of 3: "
                               f"[-0.013, +0.040] at 98.75%, 80 of 127 items; {SAID}; Bonferroni over the looks")
    assert paper.startswith(f"{PAPER}: differs by more than 0.05 (reached sequentially at look 3 of 3: "
                            "[-0.513, -0.151] at 98.75%, 80 of 127 items; Bonferroni over the looks")
    assert "own estimate" not in paper

    # the record is as it was: the looks' values and intervals, no new field; the estimate outside the running one
    rule = json.loads((out / "results.json").read_text(encoding="utf-8"))["tasks"]["abricot_inc@calamita"]["sequential"]
    last = [lk for lk in rule["looks"] if lk["k"] == 3][0]
    assert last["verdict"] == "reproduced" and set(last) == {"question", "k", "n", "total", "level", "margin",
                                                             "verdict", "value", "interval", "running", "note"}
    assert round(last["value"], 3) == -0.138 and not last["running"][0] <= last["value"] <= last["running"][1]
    assert last["interval"][0] <= last["value"] <= last["interval"][1]  # look 3's own interval holds it

    doc = json.loads(invoke("report", out, "--format", "json").stdout)
    seq = {f"{c['source']}: {c['reference']} {c['task']}.{c['metric']}": c["sequential"]
           for c in doc["published_checks"] if c.get("sequential")}
    assert seq[CALAMITA]["estimate_outside"] is True and round(seq[CALAMITA]["estimate"], 3) == -0.138
    assert seq[CALAMITA]["verdict"] == "reproduced" and SAID in seq[CALAMITA]["line"]
    assert seq[PAPER]["estimate_outside"] is False and round(seq[PAPER]["estimate"], 3) == -0.334
    assert "own estimate" not in seq[PAPER]["line"]
    assert SAID in invoke("report", out, "--format", "markdown").stdout
    text = " ".join(invoke("report", out, "--table", "published").stdout.split())  # the table wraps its cells
    assert "look 3's own estimate, -0.138, lies outside it" in text


def _look(value, running, interval=None, k=3, n=80, verdict="reproduced"):
    return sq.Look(question="q", k=k, n=n, total=127, level=sq.level(k), margin=0.05, verdict=verdict, value=value,
                   interval=interval or running, running=running)


def _line(*looks: sq.Look) -> str:
    state = sq.Sequential(total=127, planned=(20, 40, 80), questions=(sq.Question("q", "pearson", 0.05, 0.18),),
                          looks=looks)
    return state.line(looks[-1])


def test_a_look_whose_estimate_lies_inside_says_nothing_and_one_outside_says_so_settled_or_open():
    """Inside the running interval (or on its bound): no words, ``outside`` false. Outside it, settled or open
    (`not settled by the last look`): the words, after the interval, before the guarantee; where this look's own
    interval misses the estimate too, the looks are not said to disagree."""
    inside = _look(0.01, (-0.013, 0.040), (-0.3, 0.04))
    assert not inside.outside and inside.disagreement == "" and "own estimate" not in _line(inside)
    assert not _look(0.040, (-0.013, 0.040)).outside
    out = _look(-0.138, (-0.013, 0.040), (-0.322, 0.040))
    assert out.outside and f"80 of 127 items; {SAID}; Bonferroni" in _line(out)
    open_ = _look(-0.138, (-0.013, 0.2), (-0.322, 0.2), verdict="cannot tell yet")
    assert f"(not settled by the last look, look 3 of 3: [-0.013, +0.200] at 98.75%, 80 of 127 items; {SAID}" \
        in _line(open_)
    skewed = _look(-0.138, (-0.013, 0.040), (-0.1, 0.040))
    assert skewed.disagreement == "look 3's own estimate, -0.138, lies outside it"


def test_no_words_where_there_is_no_estimate_no_interval_or_every_item():
    """An undefined value (NaN, None), no running interval, or the exact look at every item (its value the verdict
    itself): ``outside`` false, the line as before."""
    assert not _look(math.nan, (-0.013, 0.040)).outside
    assert not _look(None, (-0.013, 0.040)).outside
    assert not sq.Look(question="q", k=1, n=20, total=127, level=0.95, margin=0.05, verdict="cannot tell",
                       value=-0.5).outside
    exact = _look(-0.164, (-0.164, -0.164), n=127)
    assert not exact.outside and "own estimate" not in _line(exact)
