"""Task plugins registered in-process (entry points beside the shipped ones, as test_runner's toy plugin): a broken
or outdated plugin is named when asked for and blocks no other task; what a task class declares is checked when it
loads (tasks/contract.py); a plugin takes no shipped task's name, two plugins no one name; a plugin's published rows
that cannot be read are named, not taken for an unknown task's."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import numpy as np
import pytest

from abricot_local import tasks
from abricot_local.analysis import reproduction
from abricot_local.analysis.baselines import all_references
from abricot_local.errors import TaskError
from abricot_local.tasks import contract
from abricot_local.tasks.base import CONTRACT, DataSpec, MetricInput, Reference, Task, TaskOptions
from abricot_local.tasks.selection import select_tasks

HERE = "test_plugin_declarations"
SHIPPED = ("abricot_abs", "abricot_inc", "discotex")


class GoodTask(Task):
    name, version, contract = "toyplug", "1", CONTRACT
    group = "toygroup"
    metric_names = ("accuracy", "pearson")
    primary_metric = "accuracy"
    chance = {"accuracy": 0.5, "pearson": 0.0}
    data = DataSpec(key="toyplug", kind="file", how="give --data toyplug=FILE")

    def items(self):
        return []

    def metrics(self, samples):
        return {}

    def references(self):
        return (Reference("Toy paper", "toy-model", self.name, "accuracy", 0.5),)

    def metric_inputs(self, samples):
        x = np.array([s.pred for s in samples], dtype=float)
        return MetricInput("accuracy", "accuracy", x, x), MetricInput("pearson", "pearson", x, x)


class OldTask(GoodTask):
    name, contract = "oldplug", 1


class RowsFailTask(GoodTask):
    name = "rowsfail"

    def references(self):
        raise RuntimeError("rows.csv is missing")


class BadPrimaryTask(GoodTask):
    name, primary_metric = "badprimary", "acuracy"


@pytest.fixture
def plugins(monkeypatch):
    """register(name=VALUE or [VALUES]): entry points listed before the shipped ones (the order a plugin's
    package may come in), the registry read again."""
    real = list(tasks.entry_points(group=tasks.GROUP))

    def register(**entries):
        eps = [EntryPoint(name=name, value=v, group=tasks.GROUP)
               for name, values in entries.items() for v in ([values] if isinstance(values, str) else values)]
        monkeypatch.setattr(tasks, "entry_points", lambda group: [*eps, *real])
        tasks._entries.cache_clear()
        tasks.groups.cache_clear()

    yield register
    tasks._entries.cache_clear()
    tasks.groups.cache_clear()


def test_a_plugin_that_fails_to_load_is_named_only_when_asked_for(plugins):
    plugins(broken=f"{HERE}_missing:Task", toyplug=f"{HERE}:GoodTask", oldplug=f"{HERE}:OldTask")
    chosen, _ = select_tasks("abricot_abs", TaskOptions())  # a shipped task runs
    assert [t.name for t in chosen] == ["abricot_abs"]
    assert tasks.groups()["abricot"] == ("abricot_abs", "abricot_inc")
    assert tasks.task_names("toygroup") == ["oldplug", "toyplug"]  # an outdated plugin is in its group
    assert "toyplug" in tasks.data_keys()
    with pytest.raises(TaskError, match=rf"task plugin 'broken' \({HERE}_missing:Task\) failed to load: "
                                        "ModuleNotFoundError: .*; fix or reinstall its package"):
        tasks.task_class("broken")
    with pytest.raises(TaskError, match=r"unknown task 'brokengroup'.*task plugin 'broken' .* failed to load"):
        tasks.task_names("brokengroup")  # its group is not known: the error names it
    with pytest.raises(TaskError, match=r"task 'oldplug' .* is written for task contract 1"):
        select_tasks("oldplug", TaskOptions())
    with pytest.raises(TaskError, match="oldplug"):  # its group runs it: named
        select_tasks("toygroup", TaskOptions())
    assert sorted(w.split("'")[1] for w in tasks.broken()) == ["broken", "oldplug"]


@pytest.mark.parametrize("override, refusal", [
    ({"primary_metric": "acuracy"}, r"primary_metric is 'acuracy', which is none of its metric_names\. Did you mean: "
                                    r"accuracy\? Known: accuracy, pearson"),
    ({"chance": {"accuracy": 0.5, "pearsn": 0.0}}, r"chance names 'pearsn', .* Did you mean: pearson\?"),
    ({"margins": {"acc": 0.1}}, r"margins names 'acc', which is none of its metric_names"),
    ({"references": lambda self: (Reference("Toy paper", "toy-model", "toyplug", "pearsonn", 0.1),)},
     r"its published row toy-model \(Toy paper\) is of metric 'pearsonn', .* Did you mean: pearson\?"),
    ({"metric_inputs": lambda self, s: (MetricInput("accuracy", "acuracy", np.zeros(0), np.zeros(0)),)},
     r"metric_inputs\(\) gives 'accuracy' the stat 'acuracy', which is none of the statistics abricot-local "
     r"computes \(metrics.ROW_STATS\)\. Did you mean: accuracy\? Known: accuracy, pearson, spearman"),
    ({"metric_inputs": lambda self, s: (MetricInput("kendall", "accuracy", np.zeros(0), np.zeros(0)),)},
     r"metric_inputs\(\) gives metric 'kendall', which is none of its metric_names"),
])
def test_what_a_task_declares_is_checked_when_its_class_loads(override, refusal):
    cls = type("Slip", (GoodTask,), {"__module__": HERE, **override})
    with pytest.raises(TaskError, match=rf"task 'toyplug' \({HERE}\.Slip\): {refusal}"):
        contract.checked(cls)
    assert contract.checked(GoodTask) is GoodTask


def test_the_shipped_tasks_hold_together_and_a_slip_is_refused_through_its_entry_point(plugins):
    plugins(badprimary=f"{HERE}:BadPrimaryTask")
    assert [contract.checked(tasks.task_class(n)) for n in SHIPPED]
    with pytest.raises(TaskError, match="primary_metric is 'acuracy'"):
        tasks.make_task("badprimary", TaskOptions())


def test_a_plugin_takes_no_shipped_name_and_two_plugins_no_one_name(plugins):
    plugins(discotex=f"{HERE}:GoodTask", zeta=f"{HERE}:GoodTask", alpha=f"{HERE}:BadPrimaryTask",
            twice=[f"{HERE}:GoodTask", f"{HERE}:OldTask", f"{HERE}:GoodTask"])
    assert tasks.all_task_names() == [*SHIPPED, "alpha", "twice", "zeta"]  # shipped first, then plugins by name
    assert tasks.task_class("discotex").__module__ == "abricot_local.tasks.discotex"
    with pytest.raises(TaskError, match=rf"task 'twice' is registered by several plugins \(twice = {HERE}:GoodTask "
                                        rf"and twice = {HERE}:OldTask\): uninstall one"):
        tasks.task_class("twice")
    assert tasks.task_class("zeta") is GoodTask
    ignored = [r for r in tasks.refused() if "ignored" in r]
    assert ignored == [f"task plugin entry discotex = {HERE}:GoodTask is ignored: 'discotex' is a task shipped "
                       "with abricot-local (it runs that one); the plugin must register its task under another name"]


def test_a_plugin_s_rows_that_cannot_be_read_are_named_an_unknown_task_s_passed_over(plugins):
    shipped = all_references(SHIPPED)
    plugins(broken=f"{HERE}_missing:Task", rowsfail=f"{HERE}:RowsFailTask", toyplug=f"{HERE}:GoodTask")
    assert all_references(("gone_task@v9",)) == ()  # recorded by another version
    with pytest.raises(TaskError, match=r"task plugin 'broken' .* failed to load: ModuleNotFoundError"):
        all_references(("broken",))
    with pytest.raises(TaskError, match=r"task 'rowsfail' .*: its references\(\) failed: RuntimeError: rows.csv"):
        all_references(("rowsfail",))
    assert all_references() == (*shipped, *GoodTask(TaskOptions()).references())  # the others' rows all there


def test_a_published_row_of_a_metric_the_run_lacks_says_so():
    v = reproduction.judge(None, None, 0.3, 0.05, n=10, total=10)
    assert v.kind == reproduction.UNDEFINED and "no such metric" in v.note and "constant" not in v.note
    nan = reproduction.judge(float("nan"), None, 0.3, 0.05, n=10, total=10)
    assert "constant vector" in nan.note


def test_every_task_skips_a_broken_plugin_with_its_reason_and_runs_the_others(plugins):
    """No --tasks: a plugin that fails to load is skipped, said with its error (not `no data`), as a task without
    its data is; the shipped tasks whose data is given run."""
    from conftest import FIXTURE

    plugins(broken=f"{HERE}_missing:Task")
    chosen, skipped = select_tasks(None, TaskOptions(data=(("abricot", str(FIXTURE)),)))
    (bad,) = [s for s in skipped if s.task == "broken"]
    assert "failed to load" in bad.said and bad.said != "no data" and "uninstall" in bad.how
    assert all(s.said == "no data" for s in skipped if s.task != "broken")
    assert [t.name for t in chosen] == ["abricot_abs", "abricot_inc"]


def test_tasks_and_lm_eval_matching_name_a_broken_plugin_and_go_on(plugins):
    """`tasks` says a broken plugin is not run here (why), not that its data is missing; matching an lm-eval
    output's tasks passes it over."""
    from abricot_local.analysis.lm_eval_match import _candidates as candidates
    from abricot_local.console.listings import data_status, tasks_text
    from abricot_local.tasks.catalog import task_catalog

    plugins(broken=f"{HERE}_missing:Task")
    rows = {r["name"]: r for r in task_catalog()}
    assert "failed to load" in rows["broken"]["error"] and data_status(rows["broken"]).startswith("not run here: ")
    text = tasks_text(list(rows.values()))
    assert "broken: not run here: task plugin 'broken'" in text and "discotex: DISCOTEX" in text
    assert any(key == "discotex" for key, _ in candidates("discotex_card", None, None))


def test_a_dry_run_of_every_task_skips_a_broken_plugin_and_doctor_names_an_entry_not_run(plugins):
    from conftest import FIXTURE

    from abricot_local.console.listings import doctor_text
    from abricot_local.tasks.selection import select

    plugins(broken=f"{HERE}_missing:Task", discotex=f"{HERE}:GoodTask")
    runs, skipped = select(TaskOptions(data=(("abricot", str(FIXTURE)),)), dry=True)
    assert "broken" in [s.task for s in skipped] and "broken" not in [r.task.name for r in runs]
    facts = {"python": {"version": "3"}, "packages": {}, "llama_cpp": {}, "memory": {}, "nvidia": {}, "reinstall": {},
             "reinstall_rpc": "",
             "tasks": [], "advice": [], "plugins_not_run": list(tasks.refused())}
    assert "plugin entry not run: " in doctor_text(facts) and "discotex" in doctor_text(facts)
