"""The grow advice never names a run below the 10-answer rule's floor (analysis/reproduction.judge, grow_advice): a
--limit run of fewer than 10 items of a correlation offered `--sample 5` (its own n), which then could not tell
either and offered nothing. A correlation under 10 items now gets the 10-answer rule's estimate, a --limit run's
draw is never below reproduction.FLOOR, and the items are said to judge the verdict, not to settle it, wherever
they are the fewest it is judged on (--limit runs too); every door (the CLI's text, the API's warning and
published()) says the same number."""

from __future__ import annotations

import re
import warnings
from types import SimpleNamespace as NS

import pytest

from abricot_local.analysis import reproduction as rp

WHY = "fewer than 10 items away from a vector's most common value (2): a correlation's interval is not read yet"


def judge(n, off, *, drawn=True, value=0.319, ci90=(-0.2, 0.7), total=127):
    return rp.judge(value, ci90, 0.30, 0.05, n=n, total=total, correlation=True, why=WHY if off is not None else "",
                    off=off, drawn=drawn)


def advice(v, *, limit):
    check = NS(verdict=v.kind, items_to_settle=v.items, reasons=v.reasons)
    return rp.grow_advice(NS(checks=[check]), NS(sample=None if limit else v.n, limit=v.n if limit else None),
                          lambda m: f"run {m}")


def test_fewer_than_ten_items_get_the_ten_answer_estimate_never_the_runs_own_n():
    for drawn in (True, False):
        v = judge(5, 2, drawn=drawn)  # 2 of 5 off: about 25 would hold 10 at this rate
        assert v.kind == rp.UNDEFINED and v.items == 25, (drawn, v.items)
        assert "about 25 items would give 10 answers off a vector's most common value" in v.line, v.line
    for off in (0, None):  # no rate to go by: a --limit run's draw is still at least the floor, a --sample run none
        assert judge(5, off, drawn=False).items == rp.FLOOR == 11
        assert judge(5, off).items is None
    assert judge(5, 2, drawn=False, total=8).items == 8  # never more than the task holds


def test_the_items_a_verdict_is_judged_on_are_said_to_judge_it_in_a_limit_run_too():
    said = advice(judge(5, 2, drawn=False), limit=True)
    assert said.startswith("to judge what cannot tell: about 25 items (the fewest it is judged on at all, not what "
                           "settles it);") and "in a new run" in said and said.endswith("run 25"), said
    said = advice(judge(5, 2), limit=False)
    assert said.startswith("to judge what cannot tell: about 25 items") and "grows to" in said, said
    # a --limit run whose draw would be judged (cannot tell yet, as drawn): its items settle it, as before
    drawn = judge(40, None, value=0.33, ci90=(0.2, 0.46))
    limited = judge(40, None, drawn=False, value=0.33, ci90=(0.2, 0.46))
    assert drawn.kind == rp.UNSETTLED and limited.items == drawn.items > 40
    assert advice(limited, limit=True).startswith(f"to settle what cannot tell yet: about {drawn.items} items;")


def test_every_door_says_the_same_number_at_or_above_the_floor(tmp_path, abricot_file):
    import abricot_local as api
    from abricot_local import console
    from abricot_local.record import read_run

    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n',
                      encoding="utf-8")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        run = api.evaluate("fake-as-llama", "abricot_abs", limit=5, out=tmp_path / "lim5", models_file=str(models),
                           data={"abricot": str(abricot_file)}, n_ctx=8192, progress=False)
    frame = run.published()
    wanted = set(frame["items_to_settle"].dropna().astype(int))
    assert len(wanted) == 1, frame
    m = wanted.pop()
    assert rp.FLOOR <= m <= 127
    api_words = [str(w.message) for w in said if "to judge what cannot tell" in str(w.message)]
    assert len(api_words) == 1 and f"about {m} items" in api_words[0] and f"sample={m})" in api_words[0], api_words
    record = read_run(tmp_path / "lim5")
    text = console.verdict(record.published, grow=(record.config, lambda k: f"abricot-local run ... --sample {k}"))
    assert re.search(rf"to judge what cannot tell: about {m} items .*\n +abricot-local run \.\.\. --sample {m}$",
                     text), text


@pytest.mark.parametrize("n", [5, 9])
def test_a_judged_figure_is_never_below_the_floor(n):
    for off in range(0, n):
        v = judge(n, off, drawn=False)
        assert v.items >= rp.FLOOR, (n, off, v.items)
