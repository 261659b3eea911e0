"""A plugin task's items and samples checked where they are made, by the rule their readers keep: an Item
that does not hold together is refused (naming the task, its class, the item and what is wrong) when the
task's items are prepared, before any model loads; NumPy scalars are taken as their Python values; a
sample lacking a field the task declares (``sample_fields``), or holding one of another type, is refused
at the first such sample, before anything more is scored, so `run` never writes a file `check` or
`report` would refuse. The task is registered in-process through an entry point, as a plugin is."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from importlib.metadata import EntryPoint

import numpy as np
import pytest

import planned
from abricot_local import tasks
from abricot_local.errors import TaskError
from abricot_local.metrics import with_ci
from abricot_local.models.given import Given
from abricot_local.record import read_samples
from abricot_local.run.session import run_plan
from abricot_local.tasks.base import CONTRACT, DataSpec, Item, Task, TaskOptions
from abricot_local.tasks.item_check import ItemError

DIGITS = ("1", "2", "3")


def item(**kw) -> Item:
    args = dict(id="i0", source="s", context="Q: x\nA:", choices=DIGITS, continuations=(" 1", " 2", " 3"), gold=1)
    return Item(**{**args, **kw})


class PiTask(Task):
    """A plugin's task: one item per word of its data file, the field ``m`` its metrics read. ``slip`` makes
    its items or samples wrong, one way at a time (a plugin's mistakes, as a reviewer's plugin makes them)."""

    name = "pi"
    version = "1"
    contract = CONTRACT
    metric_names = ("accuracy",)
    primary_metric = "accuracy"
    chance = {"accuracy": 1 / 3}
    sample_fields = {"m": float}
    data = DataSpec(key="pi", kind="file", files=("pi.txt",), how="give --data pi=FILE")
    slip = ""
    made = 0  # the samples made (sample() calls)

    def items(self):
        words = self.data_path().read_text(encoding="utf-8").split()
        out = []
        for k, w in enumerate(words):
            m = 1 + len(w) / 2
            fields = {"m": {"str": str(m), "np": np.float32(m)}.get(self.slip, m)} if self.slip != "nofield" else {}
            out.append(Item(id=f"p{k}", source="s", context=f"Conta {w}:", choices=DIGITS[:2 if self.slip == "mismatch"
                                                                                       else 3],
                            continuations=(" 1", " 2", " 3"), gold=np.int64(len(w) % 3) if self.slip == "np"
                            else 7 if self.slip == "goldout" else len(w) % 3, fields=fields))
        return out

    def sample(self, item, scored):
        type(self).made += 1
        rec = super().sample(item, scored)
        return replace(rec, extra={**rec.extra, "e": np.float32(0.5)}) if self.slip == "npsample" else rec

    def metrics(self, samples):
        m = [s.fields["m"] for s in samples]  # a raw KeyError when a sample lacks it
        acc, ci = with_ci("accuracy", [s.pred for s in samples], [s.gold for s in samples], seed=self.options.seed)
        return {"accuracy": acc, "accuracy_ci95": ci, "m_mean": sum(m) / len(m)}


@pytest.fixture
def pi(monkeypatch, tmp_path):
    """PiTask registered through an entry point beside the shipped tasks; a plan of it on the fake backend
    (``slip``: its mistake)."""
    eps = dict(tasks._registry())
    eps["pi"] = EntryPoint(name="pi", value="test_plugin_items:PiTask", group=tasks.GROUP)
    monkeypatch.setattr(tasks, "_registry", lambda: eps)
    monkeypatch.setattr(PiTask, "made", 0)
    tasks.groups.cache_clear()
    data = tmp_path / "pi.txt"
    data.write_text("ab abc abcd a xy", encoding="utf-8")

    def plan(slip=""):
        monkeypatch.setattr(PiTask, "slip", slip)
        return planned.plan_run(model="fake", given=Given("fake", {"n_ctx": 2048}), task_spec="pi",
                                task_options=TaskOptions(data=(("pi", str(data)),)))

    yield plan
    tasks.groups.cache_clear()


def test_numpy_scalars_are_taken_as_their_python_values():
    it = item(id=np.str_("i0"), gold=np.int64(2), choices=list(DIGITS),
              fields={"m": np.float32(3.25), "n": [np.int32(4), {"b": np.bool_(True)}], "s": "x"})
    assert type(it.gold) is int and it.gold == 2 and it.choices == DIGITS and type(it.id) is str
    assert it.fields == {"m": 3.25, "n": [4, {"b": True}], "s": "x"}
    assert [type(v) for v in (it.fields["m"], it.fields["n"][0], it.fields["n"][1]["b"])] == [float, int, bool]
    plain = {"m": 1.5, "n": [1]}
    assert item(fields=plain).fields is plain  # an item holding none is kept as made


@pytest.mark.parametrize("kw, why", [
    ({"gold": 3}, "its gold 3 is not a choice index (0..2: 3 choices)"),
    ({"gold": -1}, "its gold -1 is not a choice index"),
    ({"gold": True}, "its gold is True (a bool), not an integer choice index"),
    ({"gold": "1"}, "its gold is '1' (a str), not an integer"),
    ({"continuations": (" 1", " 2")}, "it has 3 choices but 2 continuations"),
    ({"choices": "123"}, "choices is a str: give a tuple of strings"),
    ({"choices": (), "continuations": ()}, "it has no choices"),
    ({"choices": ("1", 2, "3")}, "choices[1] is 2 (a int), not a string"),
    ({"fields": {"m": np.zeros(2)}}, "its field m is a numpy.ndarray, not a JSON value"),
    ({"fields": {"m": {1: "x"}}}, "its field m has the key 1"),
    ({"context": None}, "its context is None"),
])
def test_an_item_that_does_not_hold_together_is_refused_naming_it(kw, why):
    with pytest.raises(ItemError, match="^" + re.escape(f"item 'i0': {why}")):
        item(**kw)
    with pytest.raises(TaskError, match=r"^item 7 \(a int\): an item's id is a string"):
        item(id=7)


@pytest.mark.parametrize("slip, why", [
    ("goldout", "its gold 7 is not a choice index"),
    ("mismatch", "it has 2 choices but 3 continuations"),
])
def test_a_task_s_bad_item_is_refused_when_its_items_are_prepared(pi, tmp_path, slip, why):
    with pytest.raises(TaskError, match=rf"^task 'pi' \(test_plugin_items\.PiTask\): item 'p0': {why}"):
        pi(slip)  # the plan: before any model loads, no folder
    assert not list(tmp_path.glob("o*")) and PiTask.made == 0


def test_numpy_values_from_a_task_run_and_read_back(pi, tmp_path):
    run_plan(pi("np"), tmp_path / "o")
    lines = [json.loads(x) for x in (tmp_path / "o" / "samples-pi.jsonl").read_text().splitlines()]
    assert [s["gold"] for s in lines] == [2, 0, 1, 1, 2] and lines[0]["m"] == 2.0
    with pytest.raises(TaskError, match=r"^task 'pi' \(test_plugin_items\.PiTask\) made a sample its readers would "
                                        r"refuse: .*e \(a numpy.float32\) is not a JSON value.*mend the task's items\(\) "
                                        r"or sample\(\)"):  # sample() adding one: the task named
        run_plan(pi("npsample"), tmp_path / "n")


@pytest.mark.parametrize("slip, why", [
    ("str", r"m is a string \('2.0'\), not a number \(its sample_fields declare m float\)"),
    ("nofield", r"it lacks the field 'm' \(its sample_fields declare m float\)"),
])
def test_a_sample_its_readers_would_refuse_is_refused_at_once(pi, tmp_path, slip, why):
    with pytest.raises(TaskError, match=rf"^task 'pi' \(test_plugin_items\.PiTask\) made a sample its readers "
                                        rf"would refuse \(item 'p0'\): {why}"):
        run_plan(pi(slip), tmp_path / "o")
    assert PiTask.made == 1  # refused at its first sample: nothing more scored
    assert not (tmp_path / "o" / "results.json").exists() and not (tmp_path / "o" / "samples-pi.jsonl").exists()
    assert read_samples(tmp_path / "o" / ".checkpoint" / "samples-pi.jsonl", required=False) == []
    assert "made a sample its readers would refuse" in (tmp_path / "o" / "FAILED").read_text()
