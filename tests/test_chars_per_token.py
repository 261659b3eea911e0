"""A task declares its own characters per token (issue 28, item 6): the planner's table holds the
tokenizer families' ratios over every task's text, and names no task."""

from __future__ import annotations

import statistics

from abricot_local.run.chars_per_token import MEASURED, ratio
from abricot_local.tasks import all_task_names, task_class
from abricot_local.tasks.base import Task


def test_a_task_declares_its_ratios_and_the_plan_says_whose():
    task = task_class("discotex")
    r = ratio("gemma3", task)
    assert r.chars_per_token == task.chars_per_token["gemma3"] == 4.01 and r.n_vocab == 262144
    assert r.basis == "gemma3: 4.01 chars/token measured on discotex"
    assert set(task.chars_per_token) == set(MEASURED)  # every measured family, for every shipped task
    assert all(set(task_class(n).chars_per_token) == set(MEASURED) for n in all_task_names())


def test_a_task_declaring_none_gets_the_family_overall_ratio():
    class Plain(Task):  # a third-party task of the old contract: no chars_per_token
        name, version = "plain", "1"

        def items(self):
            return []

        def metrics(self, samples):
            return {}

    r = ratio("qwen2", Plain)
    assert r.chars_per_token == MEASURED["qwen2"][1] and "every measured task" in r.basis


def test_a_family_not_measured_gets_the_median():
    task = task_class("abricot_inc")
    assert ratio("velvet-bpe", task).chars_per_token == statistics.median(task.chars_per_token.values())
    assert ratio("", None).chars_per_token == statistics.median(v for _, v in MEASURED.values())
    assert ratio("", None).n_vocab is None and "unknown" in ratio("", None).basis
