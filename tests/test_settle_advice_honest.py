"""A --until-settled run open at its bound is advised honestly (analysis/settled.Reach, one rule): where the estimate of
the items that would settle an open verdict lies far beyond the next look a grow takes, its end message
(settle_record.advice: the command line's and the API's), `report` and the API's rows (SettledVerdict.step), the
quant ladder's line and the dry run say so, with the figure and the bound that could settle it (``--max-items`` near
the estimate, at most the task's items; or a wider ``--margin``), not "the next look at 80 items". A hobbyist's
SmolLM2 ladder at a 0.02 margin was told to grow 40 -> 80 items while ~1,272 were needed. Pure records, no run."""

from __future__ import annotations

import numpy as np
import pytest

from abricot_local.analysis import sequential as sq
from abricot_local.analysis import stats
from abricot_local.analysis.settled import fixed_n_needed, plan_reach, record_of, restored, rung_verdict, \
    settled_verdict
from abricot_local.errors import keywords, recorded_words, render
from abricot_local.record.schema import SCHEMA_VERSION, Model, Published, PublishedCheck, Record, RunConfig, TaskEntry
from abricot_local.run import settle_record

TOTAL = 1600
PAIR = sq.pair_question_name("q8", "f16", "discotex", "accuracy")


def _ruled(question: sq.Question, vectors, total: int = TOTAL, bound: int = 40) -> sq.Sequential:
    """A rule over ``total`` items, looks 20 and ``bound``, each taken on the first n of ``vectors``."""
    state = sq.start(total, [question], max_items=bound)
    for n in state.planned:
        state = sq.look(state, n, {question.name: [np.asarray(v[:n]) for v in vectors]})
    return state


def _pair_record(changed: int, total: int = TOTAL) -> Record:
    """A rung stopped at --max-items 40, open: ``changed`` of its 40 answers differ from the reference's (one fixed,
    the others broken), every other alike."""
    gold = np.zeros(40, int)
    ref = gold.copy()
    mine = gold.copy()
    mine[1:changed] = 1  # broken
    ref[0] = 1  # ... and the first, wrong in the reference, fixed
    state = _ruled(sq.Question(PAIR, "accuracy", 0.02), (mine, gold, ref, gold), total)
    return Record(schema_version=SCHEMA_VERSION, model=Model(name="q8"), config=RunConfig(sample=40, max_items=40, until_settled=True),
                  tasks={"discotex": TaskEntry(metrics={}, n=40, sequential=record_of(state, reference="../f16"))})


def _row_record(items_to_settle: int | None) -> tuple[Record, PublishedCheck]:
    """A run held to a published accuracy of 0.5 at 0.02, stopped at --max-items 40 open, its fixed-n check recording
    ``items_to_settle``."""
    check = PublishedCheck(reference="paper-model", source="PAPER", task="discotex", metric="accuracy", published=0.5,
                           verdict="cannot tell yet", margin=0.02, n=40, items_total=TOTAL,
                           items_to_settle=items_to_settle)
    name = sq.question_name("PAPER", "paper-model", "discotex", "accuracy")
    right = np.array([1, 0] * 20)
    state = _ruled(sq.Question(name, "accuracy", 0.02, published=0.5), (right, np.ones(40, int)))
    record = Record(schema_version=SCHEMA_VERSION, model=Model(name="m"), config=RunConfig(sample=40, max_items=40, until_settled=True),
                    tasks={"discotex": TaskEntry(metrics={}, n=40, sequential=record_of(state))},
                    published=Published(checks=(check,)))
    return record, check


def _advice(record: Record) -> tuple[str, list[int]]:
    asked: list[int] = []

    def command(m: int) -> str:
        asked.append(m)
        return f"abricot-local run ... --max-items {m} --resume"

    return render(settle_record.advice(record, command), recorded_words), asked


def test_a_rung_whose_estimate_lies_far_beyond_the_next_look_is_told_the_figure_and_the_bound_that_could():
    """The reviewer's Q8_0: 3 of 40 answers changed, -0.025 at a 0.02 margin over 1,600 items. Before: "--max-items
    80 plans a look at 80 items", the only command. Now the figure (its last look's interval scaled: no fixed-n
    figure is recorded for a rung), far beyond the look at 80, and the command at a bound near it."""
    record = _pair_record(changed=3)
    lk = restored(record.tasks["discotex"].sequential).latest[0]
    assert lk.verdict == "cannot tell yet" and lk.value == -0.025
    needed = fixed_n_needed(record, lk)
    assert 2 * 80 < needed <= TOTAL
    text, asked = _advice(record)
    assert asked == [needed], text  # the command printed grows the run to the bound that could settle it, not 80
    assert f"q8 vs f16 discotex.accuracy: ~{needed:,} items" in text and "would settle it at a fixed n" in text
    assert "far beyond the next look at 80 items, which is unlikely to settle it" in text
    assert f"--max-items {needed} could, or a wider --margin" in text and "plans a look at 80" not in text
    # `report`'s row and the API's (SettledVerdict.step), each in its door's words
    step = rung_verdict(record, "f16", "discotex", "accuracy").step
    assert f"the run grown by --resume --until-settled --max-items {needed} could" in render(step, recorded_words)
    assert f"max_items={needed} could, or a wider margin" in render(step, keywords)


def test_a_published_row_says_the_figure_its_record_holds():
    """A published row's figure is its record's fixed-n check's (items_to_settle), in the end message and in
    `report`'s row (a rung's is its rule's own, one figure everywhere: test_ladder_resume_first_look.py)."""

    row, check = _row_record(1272)
    text, asked = _advice(row)
    assert asked == [1272] and "~1,272 items would settle it at a fixed n, far beyond the next look at 80" in text
    fields = settled_verdict(row, check).fields(check)
    assert fields["verdict"] == "cannot tell yet" and fields["sequential"]["needed"] == 1272
    assert fields["items_to_settle"] == 1272 and fields["sequential"]["max_items"] == 80  # the grow it advises
    assert "--max-items 1272 could" in render(fields["reasons"][-1], recorded_words)


@pytest.mark.parametrize("needed, said", [(150, "plans a look at 80 items"), (None, "plans a look at 80 items")])
def test_an_estimate_within_reach_of_the_next_look_or_none_leaves_the_advice_as_it_was(needed, said):
    """Within twice the next look (the look after it would reach it), or no figure: the next look, as before."""
    row, check = _row_record(needed)
    text, asked = _advice(row)
    assert asked == [80] and said in text and "far beyond" not in text
    assert "far beyond" not in render(settled_verdict(row, check).step, recorded_words)


def test_a_difference_on_the_margin_is_told_a_wider_margin_and_no_command():
    row, check = _row_record(stats.MAX_ITEMS)
    text, asked = _advice(row)
    assert asked == [] and "no number of items would settle it within 0.02 at a fixed n" in text
    assert "a wider --margin could" in text and "no larger --max-items is likely to settle it" in text


def test_the_dry_run_says_from_its_own_estimate_when_its_looks_cannot_settle_the_margin():
    """Before scoring, a plan knows the case most in a verdict's favour (no answer changed; the run's value the
    published one): at 0.02 over 1,600 items, looks at 20 and 40 cannot show a rung within the margin even then;
    the look that could is said, as a least figure (how the answers fall, the plan cannot know). Every item: no word."""
    pair = sq.Question(PAIR, "accuracy", 0.02)
    far = plan_reach(sq.start(TOTAL, [pair], max_items=40), pair)
    assert far is not None and far.least and far.at == 40 and 40 < far.bound <= TOTAL
    text = render(far.words("the plan's last look"), recorded_words)
    assert text.startswith("even if no answer changed, its rule could show it within 0.02 no sooner than its look at")
    assert "which a plan cannot know before scoring" in text and f"--max-items {far.bound} could" in text
    assert plan_reach(sq.start(TOTAL, [pair]), pair) is None  # its last look is every item: exact, it settles
    row = sq.Question("PAPER: m discotex.accuracy", "accuracy", 0.02, published=0.5)
    assert plan_reach(sq.start(TOTAL, [row], max_items=40), row).basis == "the run's value were the published one"
    corr = sq.Question(PAIR, "pearson", 0.02)  # read once 10 answers changed: no case most in its favour to say
    assert plan_reach(sq.start(TOTAL, [corr], max_items=40), corr) is None
    wide = sq.Question(PAIR, "accuracy", 0.3)
    assert plan_reach(sq.start(TOTAL, [wide], max_items=40), wide) is None  # a margin the looks can show


def test_the_dry_runs_lines_say_it_in_each_doors_words():
    from abricot_local.console.plan import _settle_lines, brief
    from abricot_local.run.cost import Work
    from abricot_local.run.dry_plan import DryRun, ModelPlan, TaskPlan

    pair = sq.Question(PAIR, "accuracy", 0.02)
    far = plan_reach(sq.start(TOTAL, [pair], max_items=40), pair)
    task = TaskPlan("discotex", 40, TOTAL, Work(40, 1000, 40), looks=((20, None), (40, None)),
                    reach=(f"{PAIR}: {far.words('it')}",))
    plan = DryRun((ModelPlan("q8", "q8", "fake", tasks=(task,)),))
    cli, api = plan.rendered(recorded_words), plan.rendered(keywords)
    lines = _settle_lines(cli.models[0].tasks[0], None)
    assert lines[0] == "until settled: looks at 20, 40 items"
    assert lines[1].startswith(f"  cannot settle within these looks: {PAIR}: even if no answer changed")
    assert f"--max-items {far.bound} could" in lines[1]
    assert f"max_items={far.bound} could" in api.models[0].tasks[0].reach[0]
    assert cli.to_json()["models"][0]["tasks"][0]["cannot_settle"] == [lines[1].split("these looks: ", 1)[1]]
    said = " ".join(brief(cli))  # the lines a real run prints first say it too, before the first item
    assert f"plan: q8 discotex: cannot settle within these looks: {PAIR}: even if no answer changed" in said
