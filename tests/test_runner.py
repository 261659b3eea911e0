"""The runner and planner on the fake backend, without the CLI: planning, execute, resume,
--limit/--sample/--shard, warnings, default task selection, and a task from a plugin."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint

import pytest

from abricot_local.models.given import Given
import planned
from abricot_local.run import execute as runner
from abricot_local.run.request import Shard
from abricot_local.run.session import run_plan
from abricot_local import tasks
from abricot_local.errors import DataError, TaskError, UsageError, recorded_words, render
from abricot_local.metrics import with_ci
from abricot_local.run.folder import OutputDir
from abricot_local.record import read_samples
from abricot_local.tasks.base import CONTRACT, DataSpec, Item, Task, TaskOptions
from conftest import FIXTURE


class ToyTask(Task):
    """A task registered only through an entry point, as a plugin is: two sources, 3 choices."""

    name = "toy"
    version = "1"
    contract = CONTRACT
    metric_names = ("accuracy",)
    primary_metric = "accuracy"
    chance = {"accuracy": 1 / 3}
    sources = ("north", "south")
    data = DataSpec(key="toy", kind="file", files=("toy*.txt",), how="give --data toy=FILE")

    def items(self):
        rows = self.data_path().read_text(encoding="utf-8").split()
        return [Item(id=f"t{k}", source=self.sources[k % 2], context=f"Conta. {w} ha",
                     choices=("uno", "due", "tre"), continuations=(" uno", " due", " tre"), gold=len(w) % 3)
                for k, w in enumerate(rows)]

    def metrics(self, samples):
        acc, ci = with_ci("accuracy", [s.pred for s in samples], [s.gold for s in samples],
                          seed=self.options.seed)
        return {"accuracy": acc, "accuracy_ci95": ci}


@pytest.fixture
def toy_plugin(monkeypatch, tmp_path):
    """Register ToyTask through an entry point next to the shipped tasks; its data file."""
    eps = dict(tasks._registry())
    eps["toy"] = EntryPoint(name="toy", value="test_runner:ToyTask", group=tasks.GROUP)
    monkeypatch.setattr(tasks, "_registry", lambda: eps)
    tasks.groups.cache_clear()
    yield tmp_path / "toy.txt"
    tasks.groups.cache_clear()


@pytest.fixture
def plan(request):
    """planning.plan_run on the fake backend; DISCOTEX from the discotex_dir fixture unless task_options is given."""

    def make(**kw):
        if "task_options" not in kw:
            kw["task_options"] = TaskOptions(data_dir=str(request.getfixturevalue("discotex_dir")))
        args = dict(model="fake", given=Given("fake", {"n_ctx": 8192}), task_spec="discotex", limit=None)
        args.update(kw)
        return planned.plan_run(**args)

    return make


def test_plan_records_config_without_loading_anything(plan):
    p = plan(limit=5)
    assert p.model_path is None and [r.task.name for r in p.runs] == ["discotex"]
    assert len(p.runs[0].items) == 5
    cfg = p.config()
    assert cfg.backend == "fake" and cfg.limit == 5 and cfg.extra["engine"] == "prefix" and cfg.extra["n_ctx"] == 8192
    assert p.manifest().data_sha256["discotex"] and p.skipped == ()


def test_sample_is_a_seeded_subset_in_release_order_and_shards_partition_it(plan):
    full = [it.id for it in plan().runs[0].items]
    s = [it.id for it in plan(sample=30).runs[0].items]
    assert len(s) == 30 and s == [i for i in full if i in set(s)]
    assert s == [it.id for it in plan(sample=30).runs[0].items]
    parts = [[it.id for it in plan(sample=30, shard=Shard(k, 3)).runs[0].items] for k in (1, 2, 3)]
    assert sorted(sum(parts, [])) == sorted(s) and sum(map(len, parts)) == 30
    assert plan(sample=30, shard=Shard(2, 3)).config().shard == "2/3"
    with pytest.raises(UsageError):
        Shard.parse("4/3")


def test_execute_writes_results_that_recompute(tmp_path, plan):
    p = plan(sample=12)
    out = run_plan(p, tmp_path / "o")
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    assert doc == out.record.to_dict() and doc["tasks"]["discotex"]["n"] == 12
    lines = [json.loads(x) for x in (tmp_path / "o" / "samples-discotex.jsonl").read_text().splitlines()]
    task = p.runs[0].task
    assert json.loads(json.dumps(task.metrics(read_samples(tmp_path / "o" / "samples-discotex.jsonl")))) == \
        doc["tasks"]["discotex"]["metrics"]
    assert all(s["gold_label"] == s["choices"][s["gold"]] or s["gold_label"].endswith(s["choices"][s["gold"]])
               for s in lines)
    assert doc["tasks"]["discotex"]["chance"]["accuracy"] == 0.2
    assert doc["provenance"]["synthetic"] is True


def test_limit_of_one_class_warns(tmp_path, plan):
    doc = run_plan(plan(limit=6), tmp_path / "o").record.to_dict()
    warnings = doc["tasks"]["discotex"]["warnings"]
    assert any("same gold answer" in w for w in warnings)
    assert any("wiki" in w for w in warnings)  # the first 6 items are all TED
    doc = run_plan(plan(sample=40), tmp_path / "s").record.to_dict()
    assert not any("same gold" in w for w in doc["tasks"]["discotex"]["warnings"])


def test_resume_scores_only_the_rest_and_equals_a_full_run(tmp_path, plan):
    p = plan(sample=10)
    full = run_plan(p, tmp_path / "full").record.to_dict()
    out = tmp_path / "part"
    with OutputDir(out) as o:  # a run interrupted after 4 items
        o.start(p.manifest(), resume=False)
        for item, scored in list(runner.score_items(p.runs[0].items[:4], runner.open_backend(p))):
            o.append("discotex", p.runs[0].task.sample(item, scored))
    doc = run_plan(p, out, resume=True).record.to_dict()
    assert doc["tasks"]["discotex"]["scored_now"] == 6
    assert doc["tasks"]["discotex"]["metrics"] == full["tasks"]["discotex"]["metrics"]
    assert (out / "samples-discotex.jsonl").read_bytes() == (tmp_path / "full" / "samples-discotex.jsonl").read_bytes()


def test_default_tasks_are_those_with_data(plan, discotex_dir):
    p = plan(task_spec=None)
    assert [r.task.name for r in p.runs] == ["discotex"]
    assert {s.task for s in p.skipped} == {"abricot_abs", "abricot_inc"}
    assert all("--data abricot=FILE" in render(s.how, recorded_words) for s in p.skipped)  # the record's words
    both = plan(task_spec=None, task_options=TaskOptions(data_dir=str(discotex_dir), data=(("abricot", str(FIXTURE)),)))
    assert [r.task.name for r in both.runs] == ["abricot_abs", "abricot_inc", "discotex"] and both.skipped == ()
    with pytest.raises(DataError, match="no task has its data"):
        plan(task_spec=None, task_options=TaskOptions(data_dir="/nonexistent"))
    with pytest.raises(DataError):  # an explicit --tasks keeps the rule: missing data is an error
        plan(task_spec="abricot")


def test_a_plugin_task_runs_like_a_shipped_one(toy_plugin, tmp_path, plan):
    toy_plugin.write_text("ab abc abcd a xy xyz", encoding="utf-8")
    opts = TaskOptions(data=(("toy", str(toy_plugin)),))
    p = plan(task_spec="toy", task_options=opts)
    doc = run_plan(p, tmp_path / "o").record.to_dict()
    assert doc["tasks"]["toy"]["n"] == 6 and doc["tasks"]["toy"]["chance"] == {"accuracy": 1 / 3}
    assert "toy" in [r.task.name for r in plan(task_spec=None, task_options=opts).runs]
    with pytest.raises(TaskError, match="unknown task 'toyy'.*Did you mean: toy"):
        plan(task_spec="toyy", task_options=opts)
