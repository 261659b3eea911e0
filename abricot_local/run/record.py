"""A run's record made from its plan, its backend and its task results (results.json's sections:
record/), and the provenance every door records of a backend (`run`'s and the lm-eval model's, one
builder). Names no task and no backend."""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Sequence

from abricot_local import __version__
from abricot_local.analysis import baselines
from abricot_local.backends.base import Backend
from abricot_local.backends.chat import turn_of as chat_turn
from abricot_local.metrics import CI_LEVEL, N_BOOT
from abricot_local.record import (SCHEMA_VERSION, Bootstrap, ChatWrap, Provenance, Published, Record, Sample,
                                  SkippedTask, TaskEntry)
from abricot_local.record.misleading import entry_warnings as entry_warnings  # check's and merge's name for it
from abricot_local.record.misleading import recorded, run_warnings
from abricot_local.record.misleading import recorded_split as recorded_split  # check's and merge's name for it
from abricot_local.record.schema import TaskPlugin, check_metrics
from abricot_local.run.owned import samples_name
from abricot_local.run.plan import Plan
from abricot_local.tasks.selection import TaskRun


def provenance(backend: Backend, *, before: dict | None = None, after: dict | None = None, **fields) -> Provenance:
    """What made the numbers, as every door records it: this package and Python, ``before`` (a door's own keys, as
    it writes them: lm-eval's model and config), the backend's own provenance (its build, schedule, kernels),
    ``fields`` (typed: a run's bootstrap and chat wrap), ``after`` (a door's own keys: lm-eval's request rules)."""
    own = backend.provenance()
    before, after = before or {}, after or {}
    return own.placed(("abricot_local", "python", *before), (*fields, *after), abricot_local=__version__,
                      python=platform.python_version(), extra={**before, **own.extra, **after}, **fields)


def verdict(plan: Plan, tasks: dict[str, TaskEntry], runs: Sequence[TaskRun] = (),
            results: Sequence = (), recorded: Published | None = None) -> Published:
    """The published rows the model's registry entry reproduces, each with its reproduction verdict at the margin
    (``--margin`` or the task's): baselines.rejudge over the ``results``' samples, each task's N by its one rule
    (baselines.items_total: ``tasks``' ``available``, else ``recorded``'s, else what prepare counted of its data)."""
    judged = [baselines.VerdictTask(res.name, run.task, tuple(res.samples), run.available or len(run.task.items()))
              for run, res in zip(runs, results)]
    return baselines.rejudge(plan.reproduces, tasks, judged, plan.margin, drawn=plan.limit is None,
                             recorded=recorded)


def judged_again(plan: Plan, record: Record, samples: dict[str, Sequence[Sample]]) -> Record:
    """``record`` (the finished run of ``plan``) with its published verdict made again at ``plan.margin`` from
    its recorded ``samples`` (task key -> its samples file's): :func:`verdict`, as the run's end makes it (a
    verdict is a function of the samples and the margin: nothing is scored); the rest of the record as it is."""
    from abricot_local.run.execute import TaskResult

    runs = [r for r in plan.runs if r.task.key in record.tasks]
    results = [TaskResult(r.task.key, tuple(samples[r.task.key]), {}, 0.0, 0) for r in runs]
    return replace(record, published=verdict(plan, record.tasks, runs, results, record.published))


def as_json(obj):
    """``obj`` as results.json holds it (tuples as lists): what a read-back record compares equal to."""
    return json.loads(json.dumps(obj))


def task_plugin(key: str) -> TaskPlugin | None:
    """The plugin that registered the task of run key ``key`` (tasks.GROUP's entry point, its distribution's name
    and version: importlib.metadata), or None for a task this package ships (its class in abricot_local: the
    record's ``provenance.abricot_local`` names it). An entry point of no distribution (made in-process) records
    itself alone."""
    from abricot_local.tasks import _registry, base_name

    ep = _registry().get(base_name(key))
    if ep is None or ep.module.split(".")[0] == __name__.split(".")[0]:
        return None
    dist = getattr(ep, "dist", None)  # None: an entry point made in-process, of no distribution
    meta = dist.metadata if dist is not None else None
    return TaskPlugin(entry_point=ep.value, package=meta["Name"] if meta else None,
                      version=meta["Version"] if meta else None)


def task_entry(plan: Plan, run: TaskRun, res, warnings: tuple[str, ...]) -> TaskEntry:
    """One task's results as results.json records them (the task's metrics checked at this edge; ``warnings``, as
    the record holds them: misleading.run_warnings)."""
    metrics = as_json(res.metrics)
    check_metrics(metrics, f"tasks.{res.name}.metrics")
    return TaskEntry(
        metrics=metrics, n=len(res.samples), version=run.task.version, config=run.task.config(),
        prompt_hash=run.task.prompt_hash(), data=plan.data[res.name],
        samples_file=samples_name(res.name), seconds=round(res.seconds, 3), scored_now=res.scored_now,
        chance=dict(run.task.chance),
        warnings=warnings,
        sampled=run.sampled,  # config's sample is as given; this is what was drawn
        available=run.available or None, plugin=task_plugin(res.name))


@dataclass(frozen=True)
class Made:
    """A run's record as it ends (:func:`record_of`), the samples its folder puts in place beside it (task key ->
    its samples, in the plan's order) and each task's warnings as made (task, text: misleading.run_warnings, opt()'s
    for a door to render, session.Outcome.warnings; the record holds them in its own words)."""

    record: Record
    samples: dict[str, list[Sample]]
    warnings: tuple[tuple[str, str], ...]


def record_of(stages, plan: Plan, backend: Backend, task_results: list, wall: float, home) -> Made:
    """The record of ``plan`` scored in ``stages`` (execute.Stages: the plan they record, ``stages.made``, and each
    task's rule as results.json records it, ``stages.sections``: ``home`` the run's folder) through ``backend`` (its
    TaskResults, in the plan's order), with its samples and each task's warnings, made once (misleading.run_warnings:
    as made, in a door's words, and as the record holds them);
    folder.OutputDir.finalize writes it."""
    plan = stages.made(plan)
    runs, settled = plan.runs, stages.sections(home)
    said, tasks = [], {}
    for res, run in zip(task_results, runs, strict=True):
        made, words = run_warnings(run.notes, run.task, res.samples, as_json(res.metrics), limit=plan.limit,
                                   sample=plan.sample)
        said += [(res.name, w) for w in made]
        tasks[res.name] = task_entry(plan, run, res, words)
    if settled:
        tasks = {k: replace(e, sequential=settled.get(k)) for k, e in tasks.items()}
    chat = None
    if plan.task_options.chat_template:
        head, tail = chat_turn(backend)
        chat = ChatWrap(head=head, tail=tail)
    made = counted(provenance(backend, bootstrap=Bootstrap(n_boot=N_BOOT, level=CI_LEVEL, seed=plan.task_options.seed),
                              chat_template=chat), backend)
    record = Record(
        schema_version=SCHEMA_VERSION,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        model=plan.model.record(),  # ModelRef: the one source of it
        config=plan.config(),
        manifest=plan.manifest(),
        provenance=made,
        tasks=tasks,
        skipped=tuple(SkippedTask(task=s.task, reason=recorded(s.reason), how=recorded(s.how))
                      for s in plan.skipped),
        published=verdict(plan, tasks, runs, task_results),
        wall_seconds=round(wall, 3),
    )
    return Made(record, {r.name: list(r.samples) for r in task_results}, tuple(said))


def counted(made: Provenance, backend: Backend) -> Provenance:
    """``made`` with ``kernels.thread_dependent``, the backend's count of decode calls whose numbers depend on its
    thread count (docs/numerics.md#threads), written last in ``kernels``; every door records it after scoring
    (`run` here, lm-eval's model when lm-eval reads its provenance: lm_eval/requests.OpenedModel.provenance)."""
    if made.kernels is None:
        return made
    return replace(made, kernels=made.kernels.placed(last=("thread_dependent",),
                                                     thread_dependent=backend.counters.thread_dependent))
