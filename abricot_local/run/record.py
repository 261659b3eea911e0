"""A run's record made from its plan, its backend and its task results (results.json's sections:
record/), and the provenance every door records of a backend (`run`'s and the lm-eval model's, one
builder). Names no task and no backend."""

from __future__ import annotations

import json
import platform
from dataclasses import replace
from datetime import datetime, timezone
from typing import Sequence

from abricot_local import __version__
from abricot_local.analysis import baselines
from abricot_local.backends.base import Backend
from abricot_local.backends.chat import turn_of as chat_turn
from abricot_local.errors import opt, recorded_words, render
from abricot_local.metrics import CI_LEVEL, N_BOOT, constant_words, few_words
from abricot_local.record import (SCHEMA_VERSION, Bootstrap, ChatWrap, Provenance, Published, Record, Sample,
                                  SkippedTask, TaskEntry, metric_items)
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


def recorded(text: str) -> str:
    """A text a run records (a task's warning, a skipped task's reason), the options it names in the record's
    words (errors.recorded_words: the flag made from the field, as records always have)."""
    return render(text, recorded_words)


def data_warnings(task, samples: Sequence[Sample], *, limit: int | None = None, sample: int | None = None) -> list[str]:
    """What makes a task's numbers misleading: one gold class only (with the advice that fits how
    the items were chosen: ``limit``, ``sample``), a source not scored."""
    out = []
    golds = {s.gold for s in samples}
    if len(samples) > 1 and len(golds) == 1:
        only = samples[0].gold if samples[0].gold_label is None else samples[0].gold_label
        advice = (f"; use {opt('sample', 'N')} (a seeded draw over the whole release) instead of {opt('limit')}"
                  if limit is not None else f"; a larger {opt('sample', 'N')} draws more of the release"
                  if sample is not None else "")
        out.append(f"every scored item has the same gold answer ({only!r}): the metrics describe one class "
                   f"only{advice}")
    missing = [src for src in task.sources if src not in {s.source for s in samples}]
    if missing:
        out.append(f"no item from source(s) {', '.join(missing)} was scored")
    return out


def metric_warnings(metrics: dict, task=None, samples: Sequence[Sample] = ()) -> list[str]:
    """Each metric undefined (NaN), with the side that is constant (metrics.constant_words over ``task``'s metric
    inputs of ``samples``; without them, either); each correlation recorded without its interval, too few items off
    a side's most common value (metrics.few_words: what its value rests on; only with ``task`` and ``samples``)."""
    inputs = {inp.name: inp for inp in task.metric_inputs(list(samples))} if task is not None and samples else {}
    out = []
    for name, value, _ in metric_items(metrics):
        if isinstance(value, float) and value != value:
            why = constant_words(inputs[name], samples) if name in inputs else ""
            out.append(f"{name} is undefined (NaN): {why or 'a constant prediction or gold vector'}")
        elif name in inputs and (few := few_words(inputs[name], samples)):
            out.append(few)
    return out


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


def scored_warnings(task, samples: Sequence[Sample], metrics: dict, *, limit: int | None = None,
                    sample: int | None = None) -> tuple[str, ...]:
    """The warnings a task's scored ``samples`` and their ``metrics`` (as results.json holds them) give: its data's
    (one gold class, a source not scored: :func:`data_warnings`), its metrics' (:func:`metric_warnings`); the
    options they name as opt()'s. A function of the samples: a shard's are not its merged run's (run/merge.py)."""
    return (*data_warnings(task, samples, limit=limit, sample=sample), *metric_warnings(metrics, task, samples))


def task_warnings(plan: Plan, run: TaskRun, res) -> tuple[str, ...]:
    """What makes a task's numbers misleading, as its run ends: the task's own, then :func:`scored_warnings`; the
    options they name as opt()'s (a door renders them; the record keeps them in its words, after the task's notes,
    which the run said as it began: :func:`entry_warnings`)."""
    return (*run.task.warnings(), *scored_warnings(run.task, res.samples, as_json(res.metrics), limit=plan.limit,
                                                   sample=plan.sample))


def entry_warnings(fixed: Sequence[str], task, samples: Sequence[Sample], metrics: dict, *,
                   limit: int | None = None, sample: int | None = None) -> tuple[str, ...]:
    """A task entry's ``warnings`` as results.json records them, in its words (:func:`recorded`): ``fixed``, what
    does not depend on the items scored (the run's notes, the task's own warnings: the same in every shard of a
    run), then :func:`scored_warnings` of ``samples``. The one rule `run`, `--resume` and `merge` record by;
    `check` holds a record to it (:func:`recorded_split`)."""
    made = scored_warnings(task, samples, metrics, limit=limit, sample=sample)
    return tuple(recorded(w) for w in (*fixed, *made))


def recorded_split(entry: TaskEntry, task, samples: Sequence[Sample], *, limit: int | None = None,
                   sample: int | None = None) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(fixed, scored) of a recorded task ``entry``'s warnings (:func:`entry_warnings`): ``scored``, those its
    ``samples`` and recorded metrics give, remade, ending them; ``fixed`` the rest. None when the record's do not
    end with them (the record or its samples were changed after it was written, or an earlier version wrote it)."""
    made = entry_warnings((), task, samples, entry.metrics, limit=limit, sample=sample)
    have = tuple(entry.warnings)
    if len(made) > len(have) or have[len(have) - len(made):] != made:
        return None
    return have[:len(have) - len(made)], made


def warnings_of(plan: Plan, task_results: list) -> tuple[tuple[str, str], ...]:
    """(task, warning) for each of the plan's tasks scored (:func:`task_warnings`, as made: a door's words)."""
    return tuple((res.name, w) for res, run in zip(task_results, plan.runs, strict=True)
                 for w in task_warnings(plan, run, res))


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


def task_entry(plan: Plan, run: TaskRun, res) -> TaskEntry:
    """One task's results as results.json records them (the task's metrics checked at this edge)."""
    metrics = as_json(res.metrics)
    check_metrics(metrics, f"tasks.{res.name}.metrics")
    return TaskEntry(
        metrics=metrics, n=len(res.samples), version=run.task.version, config=run.task.config(),
        prompt_hash=run.task.prompt_hash(), data=plan.data[res.name],
        samples_file=samples_name(res.name), seconds=round(res.seconds, 3), scored_now=res.scored_now,
        chance=dict(run.task.chance),
        warnings=entry_warnings((*run.notes, *run.task.warnings()), run.task, res.samples, metrics, limit=plan.limit,
                                sample=plan.sample),
        sampled=run.sampled,  # config's sample is as given; this is what was drawn
        available=run.available or None, plugin=task_plugin(res.name))


def build_record(plan: Plan, backend: Backend, task_results: list, wall: float, *, settled: dict | None = None) -> Record:
    """The record of ``plan`` scored through ``backend`` (its TaskResults, in the plan's order); ``settled``: a
    --until-settled run's rule per task (record.Settle), in its entry."""
    runs = plan.runs
    tasks = {res.name: task_entry(plan, run, res) for res, run in zip(task_results, runs, strict=True)}
    if settled:
        tasks = {k: replace(e, sequential=settled.get(k)) for k, e in tasks.items()}
    chat = None
    if plan.task_options.chat_template:
        head, tail = chat_turn(backend)
        chat = ChatWrap(head=head, tail=tail)
    made = counted(provenance(backend, bootstrap=Bootstrap(n_boot=N_BOOT, level=CI_LEVEL, seed=plan.task_options.seed),
                              chat_template=chat), backend)
    return Record(
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


def counted(made: Provenance, backend: Backend) -> Provenance:
    """``made`` with ``kernels.thread_dependent``, the backend's count of decode calls whose numbers depend on its
    thread count (docs/numerics.md#threads), written last in ``kernels``; every door records it after scoring
    (`run` here, lm-eval's model when lm-eval reads its provenance: lm_eval/requests.OpenedModel.provenance)."""
    if made.kernels is None:
        return made
    return replace(made, kernels=made.kernels.placed(last=("thread_dependent",),
                                                     thread_dependent=backend.counters.thread_dependent))
