"""A run's plan as the tests make one without the CLI: a run.request.RunRequest of the given fields,
planned by run.plan.plan (the plan `run` executes)."""

from __future__ import annotations

from abricot_local.run.plan import make_plan
from abricot_local.run.request import RunRequest
from abricot_local.tasks.base import TaskOptions


def plan_run(*, model: str, given, task_spec: str | None = None, task_options: TaskOptions | None = None,
             limit: int | None = None, sample: int | None = None, shard=None, force: bool = False,
             models_file=None, model_dirs: tuple[str, ...] = (), margin: float | None = None, fresh: bool = False,
             notify=None):
    request = RunRequest((model,), given, task_spec, task_options or TaskOptions(), limit, sample, shard,
                         resume=fresh, force=force, models_file=models_file, model_dirs=tuple(model_dirs),
                         margin=margin)
    return make_plan(request, notify=notify)
