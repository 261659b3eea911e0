"""A `--until-settled` run grown by `--resume --until-settled --max-items M` keeps every look its rule took, and the
error it spent, and spends on its new looks only what is left (sequential.grown, settle.Rule.keep): the advice
followed again and again keeps each verdict's bound (a fresh rule each time took its looks at the first levels
again: 0.12 to 0.2 spent). A `--resume --sample M` that makes it a fixed-n run says, and records, the looks taken.
Fake backend, in-process."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from abricot_local.analysis import sequential as sq
from abricot_local.cli import cli
from abricot_local.errors import UsageError

Q = sq.Question("row", "accuracy", 0.02, published=0.5)


def taken_all(state: sq.Sequential) -> sq.Sequential:
    """``state`` after every planned look over items that never settle it (half right, on the published 0.5 at
    every look would settle: a margin too small to settle is used instead)."""
    q = state.questions[0]
    while not state.stopped:
        n = state.next_look
        state = sq.look(state, n, {q.name: (np.arange(n) % 2, np.ones(n, int))})
    return state


def spent(state: sq.Sequential) -> float:
    return sum(1.0 - lk.level for lk in state.looks)


def test_a_grown_rule_keeps_the_looks_taken_and_spends_only_what_is_left():
    q = sq.Question("row", "accuracy", 1e-4, published=0.5)
    before = taken_all(sq.start(1600, [q], looks=[20], max_items=40))
    assert before.planned == (20, 40) and before.taken == 2 and not before.settled
    grown = sq.grown(sq.start(1600, [q], looks=[20], max_items=80), before.planned[:before.taken])
    assert grown.planned == (20, 40, 80) and grown.level(3) == sq.level(3)  # its new look at the level after theirs
    with pytest.raises(UsageError):
        sq.grown(before, (20,))  # only before the first look
    assert sq.grown(sq.start(1600, [q], max_items=40), (20, 40, 60)).planned == (20, 40)  # none past the plan's last
    assert sq.grown(sq.start(1600, [q], max_items=200), (60,)).planned == (60, 80, 160, 200)


def test_the_advice_followed_to_every_item_spends_under_alpha_where_a_fresh_rule_each_time_did_not():
    """--looks 20, --max-items 40 doubled to 1600: the chain's looks each taken once, at increasing levels."""
    q = sq.Question("row", "accuracy", 1e-4, published=0.5)
    m, state, fresh = 40, None, set()
    while True:
        new = sq.start(1600, [q], looks=[20], max_items=m)
        fresh |= {(n, new.level(k)) for k, n in enumerate(new.planned, 1)}  # what a fresh rule each time took
        state = taken_all(new if state is None else sq.grown(new, state.planned[:state.taken]))
        if m >= 1600:
            break
        m = min(1600, 2 * m)
    assert state.planned == (20, 40, 80, 160, 320, 640, 1280, 1600)
    assert [lk.k for lk in state.looks] == list(range(1, 9)) and spent(state) < sq.ALPHA
    assert sum(1.0 - lvl for _, lvl in fresh) > 2 * sq.ALPHA  # the bug: 0.05 + 7 x 0.025


def run(out, models, data, *more):
    return CliRunner().invoke(cli, ["run", "fake-as-llama", "--models", str(models), "--tasks", "abricot_abs", "--data",
                                    f"abricot={data}", "--backend", "fake", "--n-ctx", "4096", "--margin", "0.3",
                                    *map(str, more), "--out", str(out)], catch_exceptions=False)


def rule_of(out) -> dict:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))["tasks"]["abricot_abs"]


def test_a_run_grown_by_its_advice_keeps_the_look_at_its_old_bound(tmp_path, claims, abricot_file):
    """Looks 5, 10 of --max-items 15 leave the row open (the fake's r not read yet); --max-items 30 plans 5, 10, 15,
    30: the look at 15 kept, the one at 30 look 4 at 1 - 0.1 x 2^-4; `check`'s replay takes the same looks."""
    from abricot_local.run.check import check_run

    out = tmp_path / "o"
    assert run(out, claims, abricot_file, "--until-settled", "--looks", "5,10", "--max-items", 15).exit_code == 0
    assert rule_of(out)["sequential"]["planned"] == [5, 10, 15]
    r = run(out, claims, abricot_file, "--until-settled", "--looks", "5,10", "--max-items", 30, "--resume")
    assert r.exit_code == 0, r.output
    rule = rule_of(out)["sequential"]
    assert rule["planned"] == [5, 10, 15, 30]
    assert [(lk["k"], lk["n"], lk["level"]) for lk in rule["looks"]] == [
        (1, 5, 0.95), (2, 10, 0.975), (3, 15, 0.9875), (4, 30, sq.level(4))]
    assert "look 4 of 4" in r.stdout and "at most 0.1" in r.stdout
    assert check_run(out, atol=0.0).reproduced


def test_a_fixed_n_resume_of_a_run_that_took_looks_says_and_records_them(tmp_path, claims, abricot_file):
    out = tmp_path / "o"
    assert run(out, claims, abricot_file, "--until-settled", "--looks", "5,10", "--max-items", 15).exit_code == 0
    r = run(out, claims, abricot_file, "--sample", 20, "--resume")
    assert r.exit_code == 0, r.output
    entry = rule_of(out)
    assert "sequential" not in entry  # a fixed-n run now, and its record says the looks were taken
    said = [w for w in entry["warnings"] if "took looks" in w]
    assert said and "5, 10, 15 items" in said[0] and "at most 0.1875" in said[0], entry["warnings"]
    assert "took looks (--until-settled) at 5, 10, 15 items" in r.stderr
