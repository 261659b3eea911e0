"""A plan's tasks that could not be counted (console/plan.py): each said as what its problem is, a task whose data
is not here apart from one whose items are here but overflow the context, in the full plan and in the short lines
a real run prints first (one line each, with its problem)."""

from __future__ import annotations

from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.console.plan import brief, full
from abricot_local.run.cost import Speed, Work
from abricot_local.run.dry_plan import DryRun, ModelPlan, TaskPlan
from conftest import FIXTURE

OVER = "item X_1: the prompt is 2049 tokens but the context window holds 2048; raise the window"
MISSING = "no data here (the files); get it with a download\n  second line of advice"
SPEED = Speed(1e-3, 0.0, 1e-2, 1e-3, 2.0, "calibrated", "m", "2026-01-01")


def plan(*tasks: TaskPlan, speed: Speed | None = None) -> DryRun:
    return DryRun((ModelPlan("m", "m", "fake", speed=speed, tasks=tasks),))


def counted(name: str = "counted") -> TaskPlan:
    return TaskPlan(name, 4, 4, Work(4, 400, 8, 4, 1000, True, "the model's tokenizer"), seconds=1.0)


def test_the_full_plan_says_each_problem_as_what_it_is():
    text = full(plan(counted(), TaskPlan("over_a", 20, 20, problem=OVER), TaskPlan("over_b", 20, 20, problem=OVER),
                     TaskPlan("absent", 0, 0, problem=MISSING)))
    assert "not counted: 2 tasks whose items are here but could not all be counted (over_a, over_b)" in text
    assert "not counted: 1 task whose data is not here (absent)" in text
    missing = next(ln for ln in text.splitlines() if "whose data is not here" in ln)
    assert "over_a" not in missing  # the overflow is not said as missing data
    only_over = full(plan(TaskPlan("over_a", 20, 20, problem=OVER)))
    assert "data is not here" not in only_over and "1 task whose items are here" in only_over


def test_the_short_plan_says_a_task_it_could_not_count_and_why_in_one_line():
    lines = brief(plan(counted(), TaskPlan("over_a", 20, 20, problem=OVER), TaskPlan("absent", 0, 0, problem=MISSING),
                       speed=SPEED))
    said = [ln for ln in lines if "not counted" in ln]
    assert said[0] == f"plan: m over_a: not counted: {OVER}"
    assert said[1] == "plan: m absent: not counted: no data here (the files); get it with a download"  # first line
    assert lines[0].startswith("plan: m counted: 4 items")
    assert "the 2 tasks not counted left out" in lines[-1] and lines[-1].startswith("plan: total")
    # nothing counted at all: the lines are still there (they were none: the run then failed naming an item)
    alone = brief(plan(TaskPlan("over_a", 20, 20, problem=OVER)))
    assert alone[0] == f"plan: m over_a: not counted: {OVER}" and alone[-1].startswith("plan: no time predicted")
    assert brief(plan(counted(), speed=SPEED))[-1].endswith("(calibrated; `--dry-run` shows the whole plan)")


def test_a_prompt_over_the_window_is_said_so_by_the_dry_run_and_the_run(tmp_path):
    args = ["run", "fake", "--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "64"]
    dry = CliRunner().invoke(cli, [*args, "--dry-run"], catch_exceptions=False)
    assert dry.exit_code == 0, dry.output
    assert "whose items are here but could not all be counted (abricot_abs, abricot_inc)" in dry.stdout, dry.stdout
    assert "data is not here" not in dry.stdout
    run = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "out")])
    assert run.exit_code != 0
    said = [ln for ln in run.stderr.splitlines() if ln.startswith("plan: fake abricot_abs: not counted: item ")]
    assert said and "context window holds 64" in run.stderr, run.stderr
    # the item named is the one the run fails on: its first over the window in the run's order, not the count's
    item = said[0].split("not counted: item ")[1].split(":")[0]
    assert f"error: item {item}: " in run.stderr and f"item {item}: " in dry.stdout.split("abricot_inc")[0], run.stderr
