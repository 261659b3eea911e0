"""compare on runs of one task that hold different items (an --until-settled sweep's rungs stopped at different
looks, --sample runs of other sizes): each pair is judged over the items both of its runs scored alike, with the
very numbers the pair gives compared alone, and says its own n (text, JSON, the HTML page's matrix, a sweep's
verdicts); the best group stays over the items all the runs share, and a note says so. Three fake-backend runs
of 12 DISCOTEX items, the third cut to its first 6 (nested samples)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

import planned
from abricot_local.analysis import compare as cmp
from abricot_local.analysis import stats
from abricot_local.analysis.loading import load_run
from abricot_local.analysis.matching import OWN_ITEMS
from abricot_local.analysis.overview import gather
from abricot_local.backends.options import ScoringOptions
from abricot_local.models.given import Given
from abricot_local.report.comparison import render
from abricot_local.report.pairs import pairwise
from abricot_local.report.sweep import pairwise_verdicts
from abricot_local.run.session import run_plan
from abricot_local.tasks.base import TaskOptions

TASK, FULL, CUT = "discotex", 12, 6


def _cut(view: cmp.Run, ids) -> cmp.Run:
    """The run holding only the items ``ids`` (a run that stopped earlier, on a nested sample)."""
    return replace(view, run_tasks=tuple(t.with_samples([s for s in t.samples if s.id in ids])
                                         for t in view.run_tasks))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, discotex_dir):
    """fake-1 and fake-2 on 12 items, fake-3 on the first 6 of them (other seeds: other numbers)."""
    root = tmp_path_factory.mktemp("pairwise-items")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        plan = planned.plan_run(model="fake", given=Given.of(ScoringOptions(n_ctx=8192), backend="fake"),
                                task_spec=TASK, task_options=TaskOptions(data_dir=str(discotex_dir)), limit=None,
                                sample=FULL)
        views = []
        for seed in (1, 2, 3):
            p = replace(plan, model=replace(plan.model, label=f"fake-{seed}", as_written=f"fake-{seed}"),
                        backend_options=replace(plan.backend_options, seed=seed))
            views.append(load_run(run_plan(p, root / f"fake-{seed}").path.parent))
    first = sorted(s.id for s in views[2].task(TASK).samples)[:CUT]
    return views[0], views[1], _cut(views[2], set(first)), set(first)


def _row(m: cmp.MetricComparison) -> tuple:
    """A metric row without its Holm-adjusted p (Holm runs over the pairs compared together)."""
    return (m.a, m.b, m.metric, m.n, m.value_a, m.value_b, m.diff, m.ci, m.ci90, m.test, m.p, m.mdd, m.detail)


def test_each_pair_is_judged_over_its_own_items(runs):
    a, b, c, first = runs
    three = cmp.compare([a, b, c])
    assert [(m.n, m.n_common) for m in three.matches] == [((FULL, FULL, CUT), CUT)]  # the items table: all three
    assert {(g.a, g.b): g.n for g in three.agreements} == {("fake-1", "fake-2"): FULL, ("fake-1", "fake-3"): CUT,
                                                          ("fake-2", "fake-3"): CUT}
    for x, y in ((a, b), (a, c), (b, c)):  # each pair: the numbers it gives compared alone
        alone = cmp.compare([x, y])
        pair = (x.label, y.label)
        assert [_row(m) for m in three.metrics if (m.a, m.b) == pair] == [_row(m) for m in alone.metrics]
        assert [g for g in three.agreements if (g.a, g.b) == pair] == list(alone.agreements)
        assert [ch for ch in three.changes if {ch.reference, ch.other} == set(pair)] == list(alone.changes)
        assert [p for p in three.power if (p.a, p.b) == pair] == list(alone.power)
    for name in {m.metric for m in three.metrics}:  # Holm over the three pairs, each at its own n
        family = [m for m in three.metrics if m.metric == name]
        assert [m.p_holm for m in family] == list(stats.holm([m.p for m in family]))
    # each run against its reference (fake-1) over the pair's own items: fake-2 on 12, fake-3 on 6
    assert {(e.other, e.reference, e.n) for e in three.equivalence} == {("fake-2", "fake-1", FULL),
                                                                       ("fake-3", "fake-1", CUT)}
    # the best group: over the 6 items all three share, as the three cut to them give it
    same = cmp.compare([_cut(a, first), _cut(b, first), c])
    assert three.groups == same.groups and three.groups
    (note,) = [n for n in three.notes if OWN_ITEMS in n]
    assert note == (f"task {TASK}: its runs scored different items, so {OWN_ITEMS} (fake-1 vs fake-2 on {FULL}; the "
                    f"other pairs on the {CUT} all 3 runs share); the best group, and the common items of compare's "
                    f"first table, are over the {CUT} items all 3 runs share")
    assert not any(OWN_ITEMS in n for n in same.notes)  # the same items everywhere: no note, every pair on 6
    assert {g.n for g in same.agreements} == {CUT}


def test_every_place_says_the_pairs_own_n(runs):
    a, b, c, _ = runs
    three = cmp.compare([a, b, c])
    doc = json.loads(render(three, "json"))
    assert {(m["a"], m["b"], m["n"]) for m in doc["metrics"]} == {("fake-1", "fake-2", FULL), ("fake-1", "fake-3", CUT),
                                                                 ("fake-2", "fake-3", CUT)}
    assert doc["matches"][0]["n_common"] == CUT
    text = " ".join(render(three, "table").split())
    assert OWN_ITEMS in text and "fake-1 vs fake-2 on 12" in text
    verdict = next(v for v in three.verdicts if (v.a, v.b) == ("fake-1", "fake-2"))
    assert verdict.kind != cmp.CANNOT_TELL or f"; {FULL} items detect only" in verdict.line
    # a sweep's end: the verdicts, and the note on the items each pair was compared over
    swept = pairwise_verdicts([a, b, c])
    assert verdict.line.split(" (")[0] in swept and OWN_ITEMS in " ".join(swept.split())
    # the HTML page's matrix: each cell its pair's n, the heading the range
    page = pairwise(gather([a, b, c]))
    (entry,) = page["tasks"]
    assert entry["n"] == [f"{CUT} to {FULL}"]
    assert sorted((cell["a"], cell["b"], cell["n"]) for cell in entry["cells"]) == [(0, 1, FULL), (0, 2, CUT),
                                                                                   (1, 2, CUT)]
    best = page["best"][f"{TASK}.accuracy"]
    group = next(g for g in three.groups if g.metric == "accuracy")
    labels = [r.label for r in three.runs]
    assert (labels[best["best"]], [labels[k] for k in best["members"]]) == (group.best, list(group.members))
    assert any(OWN_ITEMS in n for n in entry["notes"]) and not math.isnan(entry["cells"][0]["diff"])
