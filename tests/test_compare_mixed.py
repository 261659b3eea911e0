"""compare on runs that do not all have the same tasks (fake backend, 12 DISCOTEX items, the invented
ABRICOT fixture): each task compared among the runs that have it, with the very numbers those runs give
compared alone; the runs lacking a task named in its note; pairs that share no task not paired; the
refusal only when no two runs share an item; the command's text, JSON and CSV over a mixed folder."""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import replace

import pandas as pd
import pytest
from click.testing import CliRunner

import planned
from abricot_local import api
from abricot_local.analysis import compare as cmp
from abricot_local.cli.options import flags
from abricot_local.errors import render as in_words
from abricot_local.analysis import stats
from abricot_local.analysis.loading import load_run
from abricot_local.backends.options import ScoringOptions
from abricot_local.cli import cli
from abricot_local.errors import ResultsError
from abricot_local.models.given import Given
from abricot_local.record import Sample
from abricot_local.report.comparison import render
from abricot_local.run.session import run_plan
from abricot_local.tasks.base import TaskOptions
from conftest import FIXTURE


def _plan(data_dir, task_spec):
    opts = TaskOptions(data_dir=str(data_dir), data=(("abricot", str(FIXTURE)),))
    return planned.plan_run(model="fake", given=Given.of(ScoringOptions(n_ctx=8192), backend="fake"),
                             task_spec=task_spec, task_options=opts, limit=None, sample=12)


def _model(plan, model, seed):
    return replace(plan, model=replace(plan.model, label=model, as_written=model),
                   backend_options=replace(plan.backend_options, seed=seed))


@pytest.fixture(scope="module")
def folders(tmp_path_factory, discotex_dir):
    """In one folder: a run of both tasks, two DISCOTEX-only runs, two ABRICOT-only runs (other models:
    other numbers on the same items)."""
    root = tmp_path_factory.mktemp("mixed")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        both, disco, abs_ = (_plan(discotex_dir, t) for t in ("discotex,abricot_abs", "discotex", "abricot_abs"))
        plans = {"both": _model(both, "fake-1", 1), "d2": _model(disco, "fake-2", 2),
                 "d3": _model(disco, "fake-3", 3), "x4": _model(abs_, "fake-4", 4), "x5": _model(abs_, "fake-5", 5)}
        return {name: run_plan(plan, root / "runs" / name).path.parent for name, plan in plans.items()}


@pytest.fixture(scope="module")
def views(folders):
    return {k: load_run(v) for k, v in folders.items()}


def _of(c: cmp.Comparison, task: str) -> dict:
    """What a comparison holds about ``task``: its metrics, agreements, changed answers, equivalence."""
    return {"metrics": [m for m in c.metrics if m.task == task],
            "agreements": [g for g in c.agreements if g.task == task],
            "changes": [ch for ch in c.changes if ch.task == task],
            "equivalence": [e for e in c.equivalence if e.task == task]}


def _moved(view: cmp.Run, label: str) -> cmp.Run:
    """The run with every scored context changed: the same ids, no item in common with any other run."""
    tasks = tuple(t.with_samples(Sample.from_dict({**s.to_dict(), "context": "moved " + str(s.context)})
                                 for s in t.samples) for t in view.run_tasks)
    return replace(view, path=view.path + "-" + label, label=label, run_tasks=tasks)


def test_two_pairs_on_two_tasks_each_compared_as_alone(views):
    d2, d3, x4, x5 = (views[k] for k in ("d2", "d3", "x4", "x5"))
    c = cmp.compare([d2, d3, x4, x5])
    assert [(m.task, m.n) for m in c.matches] == [("discotex", (12, 12, None, None)),
                                                  ("abricot_abs", (None, None, 12, 12))]
    assert [(g.a, g.b, g.task) for g in c.agreements] == [("fake-2", "fake-3", "discotex"),
                                                          ("fake-4", "fake-5", "abricot_abs")]
    assert [(v.a, v.b) for v in c.verdicts] == [("fake-2", "fake-3"), ("fake-4", "fake-5")]
    assert {(d.a, d.b) for d in c.differs} <= {("fake-2", "fake-3"), ("fake-4", "fake-5")}
    alone = {"discotex": cmp.compare([d2, d3]), "abricot_abs": cmp.compare([x4, x5])}
    for task, one in alone.items():
        assert _of(c, task) == _of(one, task) and _of(c, task)["metrics"]  # the same numbers, the same Holm
        assert next(v for v in c.verdicts if (v.a, v.b) == (one.verdicts[0].a, one.verdicts[0].b)) == one.verdicts[0]
        assert c.totals[task] == one.totals[task]
    assert c.groups == ()  # two runs per task: no best group
    assert "task discotex is not in every run: compared among fake-2, fake-3; not in fake-4, fake-5" in c.notes
    assert "task abricot_abs is not in every run: compared among fake-4, fake-5; not in fake-2, fake-3" in c.notes
    (left,) = [n for n in c.notes if n.startswith("not paired")]
    assert all(f"{a} and {b}" in left for a in ("fake-2", "fake-3") for b in ("fake-4", "fake-5"))


def test_three_runs_on_one_task_two_on_the_other(views):
    both, d2, d3, x4 = (views[k] for k in ("both", "d2", "d3", "x4"))
    c = cmp.compare([both, d2, x4, d3])
    assert [(m.task, m.n) for m in c.matches] == [("discotex", (12, 12, None, 12)),
                                                  ("abricot_abs", (12, None, 12, None))]
    disco, abs_ = cmp.compare([both, d2, d3]), cmp.compare([both, x4])
    assert "task abricot_abs is not in every run: not compared" in disco.notes  # a task of one run
    # discotex among three runs: Holm over its three pairs, its best group; abricot_abs between two
    assert _of(c, "discotex") == _of(disco, "discotex") and _of(c, "abricot_abs") == _of(abs_, "abricot_abs")
    for task, pairs in (("discotex", 3), ("abricot_abs", 1)):  # Holm over the pairs that have the task, no more
        rows = _of(c, task)["metrics"]
        for name in {m.metric for m in rows}:
            family = [m for m in rows if m.metric == name]
            assert len(family) == pairs and [m.p_holm for m in family] == list(stats.holm([m.p for m in family]))
    assert [g for g in c.groups] == [g for g in disco.groups if g.task == "discotex"] and c.groups
    # each pair's verdict is the one it gets on the task it shares, compared alone
    verdicts = {(v.a, v.b): v for v in c.verdicts}
    assert set(verdicts) == {("fake-1", "fake-2"), ("fake-1", "fake-4"), ("fake-1", "fake-3"), ("fake-2", "fake-3")}
    for one in (disco, abs_):
        for v in one.verdicts:
            assert verdicts[(v.a, v.b)] == v
    assert "not paired (no compared task in common): fake-2 and fake-4; fake-4 and fake-3" in c.notes


def test_the_reference_of_a_task_it_lacks_falls_back_with_a_note(views):
    d2, d3, x4, x5 = (views[k] for k in ("d2", "d3", "x4", "x5"))
    c = cmp.compare([d2, d3, x4, x5], reference=views["x5"].path)
    assert {(e.other, e.reference, e.task) for e in c.equivalence} == {("fake-3", "fake-2", "discotex"),
                                                                       ("fake-4", "fake-5", "abricot_abs")}
    assert any(n.startswith("task discotex: the reference fake-5 does not have this task; its runs are judged "
                            "against fake-2") for n in c.notes)
    assert not any("task abricot_abs: the reference" in n for n in c.notes)
    # the reference's own task: its answers changed are read from it, as compared alone
    assert _of(c, "abricot_abs")["changes"] == _of(cmp.compare([x4, x5], reference="fake-5"), "abricot_abs")["changes"]


def test_refused_only_when_no_two_runs_share_an_item(views):
    d2, d3, x4 = (views[k] for k in ("d2", "d3", "x4"))
    moved = _moved(d3, "moved")
    with pytest.raises(ResultsError, match="no two of them have common items") as err:
        cmp.compare([d2, moved, x4])
    assert all(r.path in str(err.value) for r in (d2, moved, x4)) and "a task both ran (discotex)" in str(err.value)
    with pytest.raises(ResultsError, match="no two share a task"):
        cmp.compare([d2, x4, replace(views["x5"].only(), label="empty")])
    # two of three share items, but not one item is common to the three: fewer runs at once
    with pytest.raises(ResultsError, match="compare fewer runs at once") as err:
        cmp.compare([d2, d3, moved])
    assert "these share items: fake-2 and fake-3" in str(err.value)
    # a task whose runs share no item is named; the other task is still compared
    c = cmp.compare([d2, moved, x4, views["x5"]])
    assert [(m.task, m.n_common) for m in c.matches] == [("discotex", 0), ("abricot_abs", 12)]
    (note,) = [in_words(x, flags) for x in c.notes if x.startswith("task discotex: no item in common")]
    n = len(moved.task("discotex").samples)
    assert note == (f"task discotex: no item in common to its runs fake-2, moved (same id and scored context): {n} "
                    f"items share an id but not the scored context {WHY}{FORWARD}--by-id")
    said = api.compare(d2, moved, x4, views["x5"]).render()  # the Python door: its keyword, never a marker
    assert f"{FORWARD}by_id=True" in " ".join(said.split()) and "\ue000" not in said
    assert [(v.a, v.b) for v in c.verdicts] == [("fake-4", "fake-5")]


WHY = "(another seed, prompt variant, shot count or chat template: see docs/compare.md)"
FORWARD = ("; to pair them on id alone (each item under its two contexts: is the result sensitive to the seed?), "
           "compare with ")  # then --by-id, by_id=True: the door's words


def test_the_refusal_counts_the_items_that_share_an_id_but_not_the_context(views):
    d2, d3, x4 = (views[k] for k in ("d2", "d3", "x4"))
    moved = _moved(d3, "moved")
    n = len({s.id for s in d2.task("discotex").samples} & {s.id for s in moved.task("discotex").samples})
    assert n  # the moved run has the same ids, every context changed
    with pytest.raises(ResultsError) as err:
        cmp.compare([d2, moved])
    assert str(err.value).endswith(f"have no common items (same id and same scored context) in discotex: {n} items "
                                   f"share an id but not the scored context {WHY}; nothing to compare{FORWARD}"
                                   "by_id=True"), str(err.value)
    with pytest.raises(ResultsError) as err:  # three runs: the pair that shares ids named, with its task
        cmp.compare([d2, moved, x4])
    assert (f"in a task both ran (discotex); items that share an id but not the scored context: fake-2 and moved: "
            f"{n} in discotex {WHY}; nothing to compare{FORWARD}by_id=True") in str(err.value), str(err.value)
    with pytest.raises(ResultsError) as err:  # no id shared: nothing counted
        cmp.compare([d2, x4])
    assert "share an id" not in str(err.value) and "by_id" not in str(err.value)


def test_two_seeds_of_the_seeded_paper_protocol_say_why_they_share_no_item(tmp_path):
    """ABRICOT's paper protocol draws each item's shots with --shot-seed: two seeds, the same ids, other contexts."""
    runs = []
    for seed in (1, 2):
        runs.append(tmp_path / f"seed{seed}")
        r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--n-ctx", "8192", "--tasks", "abricot_inc",
                                     "--protocol", "paper", "--data", f"abricot={FIXTURE}", "--seed", str(seed),
                                     "--shot-seed", str(seed), "--out", str(runs[-1])], catch_exceptions=False)
        assert r.exit_code == 0, r.output
    a, b = ({s.id: s.context for s in load_run(p).task("abricot_inc").samples} for p in runs)
    n = sum(a[i] != b[i] for i in a.keys() & b.keys())
    assert n == len(a) == len(b)  # every item's shots drawn anew
    r = CliRunner().invoke(cli, ["compare", *map(str, runs)], catch_exceptions=False)
    text = " ".join(r.stderr.split())
    assert r.exit_code == 2 and (f"in abricot_inc: {n} items share an id but not the scored context {WHY}; "
                                 f"nothing to compare{FORWARD}--by-id") in text, text


def test_the_command_on_a_mixed_folder(folders, views, tmp_path):
    root = tmp_path / "runs"
    for k in ("d2", "d3", "x4", "x5"):
        shutil.copytree(folders[k], root / k)

    def invoke(*args):
        r = CliRunner().invoke(cli, ["compare", str(root), *args], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return r.stdout

    doc = json.loads(invoke("--format", "json"))
    labels = [r["label"] for r in doc["runs"]]
    assert labels == ["fake-2", "fake-3", "fake-4", "fake-5"]
    assert {m["task"]: m["n"] for m in doc["matches"]} == {"discotex": [12, 12, None, None],
                                                           "abricot_abs": [None, None, 12, 12]}
    pairs = {(v["a"], v["b"]) for v in doc["verdicts"]}
    assert pairs == {("fake-2", "fake-3"), ("fake-4", "fake-5")}
    for section in ("metrics", "agreement", "settings_differ", "power"):
        assert {(x["a"], x["b"]) for x in doc[section]} <= pairs and doc[section], section
    assert {(x["reference"], x["other"], x["task"]) for x in doc["answers_changed"]} == {
        ("fake-2", "fake-3", "discotex"), ("fake-4", "fake-5", "abricot_abs")}
    assert any(n.startswith("task discotex is not in every run") for n in doc["notes"])
    assert sorted(doc["task_items"]) == ["abricot_abs", "discotex"]
    # the JSON is the API's comparison rendered
    from abricot_local import compare

    assert json.loads(compare(root).render("json")) == doc
    table = invoke()
    assert "12 / 12 / - / -" in table and "- / - / 12 / 12" in table
    assert "note: task abricot_abs is not in every run: compared among fake-4, fake-5; not in fake-2, fake-3" in table
    verdicts = table.rsplit("\nVerdict\n\n", 1)[1].replace("\n  ", " ").splitlines()
    assert [line.split(":")[0] for line in verdicts] == ["fake-2 vs fake-3", "fake-4 vs fake-5"]
    assert max(map(len, table.splitlines())) <= 120
    frame = pd.read_csv(io.StringIO(invoke("--format", "csv")))
    assert set(zip(frame["a"], frame["b"], frame["task"])) == {("fake-2", "fake-3", "discotex"),
                                                               ("fake-4", "fake-5", "abricot_abs")}
    assert render(cmp.compare([views[k] for k in ("d2", "d3", "x4", "x5")]), "markdown").count("### ") >= 6
