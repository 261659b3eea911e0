"""The dry run's table (console/plan.full) stays aligned whatever the models' names: the model column as wide as
its names (22 at least, 40 at most), a longer name on a line of its own above its rows."""

from __future__ import annotations

import pytest

from abricot_local.console.plan import MODEL_COLUMN, full
from abricot_local.errors import WIDTH
from abricot_local.run.cost import CALIBRATED, Speed, Work
from abricot_local.run.dry_plan import DryRun, ModelPlan, TaskPlan

SPEED = Speed(1e-3, 0.0, 1e-2, 2e-3, 1.0, CALIBRATED, "m", "2026-12-05T00:00:00+00:00")


def model(label: str, tasks=("discotex", "abricot_abs@calamita")) -> ModelPlan:
    plans = tuple(TaskPlan(t, 40, 400, Work(40, 11_449, 41, 160, 0, True, "the model's tokenizer"), 12.0)
                  for t in tasks)
    return ModelPlan(label, label, "llama.cpp", speed=SPEED, tasks=plans)


def table(labels) -> list[str]:
    text = full(DryRun(tuple(model(name) for name in labels)))
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("model "))
    end = next(k for k, line in enumerate(lines) if line.startswith("total:"))
    return lines[start:end]


def columns(header: str) -> dict[str, int]:
    """Where each column of the header starts (task, time) or ends (the right-aligned counts)."""
    return {"task": header.index("task"), "items": header.index("items") + 5, "tokens": header.index("tokens") + 6,
            "calls": header.index("calls") + 5, "time": header.index("time")}


GEMMA_RUNGS = [f"gemma-3-270m-q4_k_m-dequantized-{q}" for q in ("q8_0", "q4_k_m", "q2_k")]  # 36 to 38 long


@pytest.mark.parametrize("labels", [["m"], ["gemma-3-270m"], GEMMA_RUNGS, ["m", "x" * 40],
                                    ["m", "a-model-whose-name-is-longer-than-forty-columns-" + "x" * 30]])
def test_every_row_is_aligned_with_the_header(labels):
    header, rule, *rows = table(labels)
    at = columns(header)
    assert set(rule) == {"-"} and len(rule) >= len(header.rstrip())
    counted = [r for r in rows if "11,449" in r]  # its note at its end, or (past WIDTH) on the line under it
    assert len(counted) == 2 * len(labels) == sum("the model's tokenizer" in r for r in rows)
    for row in counted:
        assert row[at["task"] - 1] == " " and row[at["task"]] != " ", row
        assert row[at["items"] - 2: at["items"]] == "40", row
        assert row[at["tokens"] - 6: at["tokens"]] == "11,449", row
        assert row[at["calls"] - 2: at["calls"]] == "41", row
        assert row[at["time"]:].startswith("12 s"), row
        assert len(row) <= WIDTH
    for row in rows:
        if row.strip().startswith(("load", "total")):
            assert row[at["task"]:].startswith(row.strip()[:4]), row
    assert len(header) <= WIDTH and MODEL_COLUMN[0] + 1 <= at["task"] <= MODEL_COLUMN[1] + 1
    for name in labels:  # each name once, in the model column or (longer) on a line of its own
        (line,) = [r for r in rows if r == name or r.startswith(name + " ")]
        assert (line == name) == (len(name) >= at["task"])
        assert len(name) < at["task"] or len(name) > MODEL_COLUMN[1] or len(header) + len(name) - at["task"] >= WIDTH


def test_short_names_keep_the_columns_of_before():
    header = table(["gemma-3-270m"])[0]
    assert header.startswith(f"{'model':<22} task ")  # docs/running.md's tables: unchanged
