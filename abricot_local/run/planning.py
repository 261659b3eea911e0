"""Planning a run: tasks, data, model and memory are checked before anything heavy loads.

No task or backend is named here: tasks come from the registry (entry points)
and declare their data; a backend class declares whether it reads a model
file, its options and what its config records, and gives its memory facts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from abricot_local import hashing
from abricot_local.backends import backend_class
from abricot_local.backends.options import ScoringOptions
from abricot_local.errors import AbricotError, DataError, DownloadError, MissingDataError, UsageError
from abricot_local.models.given import Given, Opened
from abricot_local.models.ref import ModelRef, before_download, open_model
from abricot_local.tasks import all_task_names, make_task, task_class, task_names
from abricot_local.tasks import uses
from abricot_local.tasks.base import Item, Task, TaskOptions
from abricot_local.tasks.uses import refuse_unused
from abricot_local.run.request import Shard

SAMPLE_STREAM = 101  # --sample's generator: [seed, 101], apart from the tasks' own draws


@dataclass(frozen=True)
class TaskRun:
    task: Task
    items: tuple[Item, ...]
    sampled: int | None = None  # with --sample: the items drawn (all of them when the task has fewer)
    notes: tuple[str, ...] = ()  # what preparing did that a reader must know (recorded as warnings)
    available: int = 0  # the items in the task's data, before --limit/--sample/--shard


@dataclass(frozen=True)
class Skipped:
    """A task left out of a run with no --tasks: why, and the command that gets its data."""

    task: str
    reason: str
    how: str


def instances(tasks: list[Task], reproduces: str = "", variants: str | None = None,
              protocols: str | None = None) -> list[Task]:
    """Each task under every protocol whose published rows ``reproduces`` (a registry entry's)
    names, in the task's order of protocols (``--protocol`` given: that one only; a list, or ``all``:
    each of those the task has, whatever ``reproduces`` names), and under
    each prompt variant ``variants`` (``--prompt-variant all`` or a list) names
    (:func:`variant_instances`); instances whose settings come out the same (a flag overriding
    what told them apart) run once. A protocol a task lacks, on a task that declares none,
    leaves it as it is (noted in its run)."""
    from abricot_local.analysis.baselines import protocols_named

    named = protocols_named(reproduces) if reproduces else {}
    out: list[Task] = []
    for task in tasks:
        wanted = named.get(task.name, ()) if task.options.protocol is None else ()
        if uses.several(protocols):
            wanted = uses.protocols_for(type(task), protocols)
        order = [p.name for p in task.protocols if p.name in wanted]
        made = [make_task(task.name, replace(task.options, protocol=p)) for p in order] or [task]
        made = [v for t in made for v in variant_instances(t, variants)]
        seen: list[dict] = []
        for t in made:
            if t.settings() not in seen or not t.settings():
                seen.append(t.settings())
                out.append(t)
    return out


def variant_instances(task: Task, spec: str | None) -> list[Task]:
    """``task`` under each prompt variant ``spec`` (``--prompt-variant all`` or a list) names of it:
    its default variant (its protocol's, else the task's first) keeps its key, another is keyed
    ``KEY~VARIANT`` (tasks.make_task). A variant other than the one its protocol fixes is scored with
    the protocol's other settings, said in its warnings: the published rows are checked against the
    instance with the protocol's own variant only (baselines.entry_for)."""
    wanted = uses.variants_for(type(task), spec) if uses.several(spec) else ()
    if not wanted:
        return [task]
    default = task.resolved_variant()
    protocol = task.protocol
    out = []
    for v in sorted(wanted, key=lambda v: v != default):
        t = task if v == default else make_task(f"{task.key}~{v}", task.options)
        t.option_notes = task.option_notes
        if protocol is not None and protocol.fixes("prompt_variant") and protocol.value("prompt_variant") != v:
            t.option_notes = (*t.option_notes, f"prompt variant {v} (--prompt-variant {','.join(uses.names(spec))}) where protocol "
                              f"{protocol.name} fixes {protocol.value('prompt_variant')}: scored with the protocol's "
                              "other settings; no published row is checked against it")
        out.append(t)
    return out


def prepare(tasks, limit: int | None, sample: int | None = None, shard: Shard | None = None) -> list[TaskRun]:
    """Build every task's items, checking ids are unique: the first ``limit`` in release
    order, or ``sample`` of them drawn with the task's seed (kept in release order);
    then the shard's part of those."""
    runs = []
    for task in tasks:
        items = task.items()
        available = len(items)
        notes: tuple[str, ...] = tuple(task.option_notes)  # options given that the task does not use
        if sample is not None and sample < len(items):
            keep = np.random.default_rng([task.options.seed, SAMPLE_STREAM]).choice(len(items), sample, replace=False)
            items = [items[k] for k in sorted(keep)]
        elif sample is not None and sample > len(items):
            notes += (f"--sample {sample} asks for more items than the task has: all {len(items)} were scored",)
        if limit is not None:
            items = items[:limit]
        if not items:
            raise DataError(f"task {task.key}: the data holds no items")
        seen: set[str] = set()
        for it in items:
            if it.id in seen:
                raise DataError(f"task {task.key}: item id {it.id!r} appears twice in the data")
            seen.add(it.id)
        if shard is not None:
            items = shard.take(items)
            if not items:
                raise UsageError(f"task {task.key}: shard {shard} holds no item ({len(seen)} items in all)")
        runs.append(TaskRun(task, tuple(items), None if sample is None else min(sample, len(seen)), notes,
                            available))
    return runs


@dataclass(frozen=True)
class RunPlan:
    model: ModelRef
    backend: str
    backend_options: ScoringOptions
    task_options: TaskOptions
    runs: tuple[TaskRun, ...]
    data: dict  # task -> [{"path", "sha256"}]
    limit: int | None
    force: bool
    sample: int | None = None
    shard: Shard | None = None
    skipped: tuple[Skipped, ...] = ()
    margin: float | None = None  # run --margin: the published verdict's margin (None: each task's)

    @property
    def model_label(self) -> str:
        return self.model.label

    @property
    def model_path(self) -> str | None:  # None for a backend that reads no model file
        return str(self.model.path) if self.model.path else None

    @property
    def model_sha256(self) -> str | None:
        return self.model.sha256

    @property
    def model_alias(self) -> str | None:
        return self.model.alias

    @property
    def reproduces(self) -> str:  # the registry entry's ``reproduces`` field
        return self.model.reproduces

    @property
    def quant(self) -> str:  # the registry entry's quant, else the file's
        return self.model.quant

    def config(self) -> dict:
        """Every option that can change a number (recorded, and compared on --resume)."""
        return {
            "model": self.model.config_name,
            "backend": self.backend,
            "tasks": [r.task.key for r in self.runs],
            "limit": self.limit,
            "sample": self.sample,
            **({"shard": str(self.shard)} if self.shard else {}),
            **self.task_options.config(),
            **backend_class(self.backend).config(self.backend_options),
        }

    def manifest(self) -> dict:
        return {
            "config": self.config(),
            "model_sha256": self.model_sha256,
            "data_sha256": {k: [f["sha256"] for f in v] for k, v in self.data.items()},
            "task_versions": {r.task.key: r.task.version for r in self.runs},
        }


def select_tasks(task_spec: str | None, options: TaskOptions) -> tuple[list[Task], tuple[Skipped, ...]]:
    """The tasks of ``--tasks``; with none given, every registered task whose data is given,
    found, or can be fetched now (the others are skipped, each with its reason)."""
    if task_spec:
        names = task_names(task_spec)
        refuse_unused([task_class(n) for n in names], options)
        uses.refuse_unknown_variants([task_class(n) for n in names], options.prompt_variant)
        uses.refuse_unknown_protocols([task_class(n) for n in names], options.protocol)
        return [make_task(n, options) for n in names], ()
    chosen, skipped, errors = [], [], []
    for name in all_task_names():
        task = make_task(name, options)
        try:
            task.data_path()
            chosen.append(task)
        except MissingDataError as err:
            errors.append(err)
            skipped.append(Skipped(name, recorded(err.what), recorded(err.advice())))
        except (DataError, DownloadError) as err:
            skipped.append(Skipped(name, recorded(err.raw()), recorded(task.data.how)))
    if not chosen:
        raise no_task_data(errors) if len(errors) == len(skipped) else DataError(
            "no task has its data here: " + "; ".join(dict.fromkeys(s.reason for s in skipped)))
    refuse_unused([type(t) for t in chosen], options)
    uses.refuse_unknown_variants([type(t) for t in chosen], options.prompt_variant)
    uses.refuse_unknown_protocols([type(t) for t in chosen], options.protocol)
    return chosen, tuple(skipped)


def recorded(text: str) -> str:
    """A text a run records (a skipped task's reason), the options it names in the record's words."""
    from abricot_local.errors import recorded_words, render

    return render(text, recorded_words)


def no_task_data(errors: list[MissingDataError]) -> MissingDataError:
    """One error for every task's missing data: the tasks and where they were looked for, one
    command line that gets them all, the offline alternatives (each once)."""
    import os

    wheres = [e.where for e in errors if e.where]
    where = os.path.commonpath(wheres) if wheres else ""
    reasons = list(dict.fromkeys(e.reason for e in errors if e.reason))
    looked = "; ".join([f"looked in {where}"] * bool(where) + reasons)
    what = f"no task has its data here: {', '.join(e.task for e in errors)}" + (f" ({looked})" if looked else "")
    gets = list(dict.fromkeys(e.get for e in errors if e.get))
    downloads = tuple({(d.folder, d.urls): d for e in errors  # tasks sharing their data (ABRICOT's): its files once
                       for d in (e.download if isinstance(e.download, tuple) else (e.download,))
                       if d is not None}.values())
    return MissingDataError(what, " && ".join(gets) or None, " or ".join(dict.fromkeys(e.offline for e in errors)),
                            download=downloads or None)


def plan_run(*, model: str, given: Given, task_spec: str | None, task_options: TaskOptions,
             limit: int | None, models_file: str | None = None, force: bool = False, sample: int | None = None,
             shard: Shard | None = None, notify=None, fresh: bool = False,
             model_dirs: tuple[str, ...] = (), margin: float | None = None) -> RunPlan:
    """Validate tasks, data, model and memory before anything heavy is loaded or downloaded
    (a model that is not there fails first; a download waits until the tasks and data are found).
    ``given``: the backend options as given (the registry's n_ctx applies unless given);
    ``fresh`` (--resume): every file is hashed from its bytes."""
    with hashing.afresh(fresh):
        ref = before_download(model, backend=given.backend, given=given, models_file=models_file,
                              model_dirs=model_dirs, force=force, notify=notify, fresh=fresh)
        tasks, skipped = select_tasks(task_spec, task_options)
        reproduces = ref.reproduces if ref is not None else registry_reproduces(model, models_file)
        runs = prepare(instances(tasks, reproduces, task_options.prompt_variant, task_options.protocol), limit,
                       sample, shard)
        data = {r.task.key: [{"path": str(f.path), "sha256": f.sha256} for f in r.task.data_files()] for r in runs}
        opened = Opened.of(ref, given) if ref is not None else open_model(
            model, given, models_file=models_file, force=True, notify=notify, fresh=fresh,
            model_dirs=model_dirs)  # memory and disk: checked above
    ref = opened.ref
    return RunPlan(ref, backend=ref.backend, backend_options=opened.options, task_options=task_options, runs=tuple(runs),
                   data=data, limit=limit, force=force, sample=sample, shard=shard, skipped=skipped, margin=margin)


def registry_reproduces(model: str, models_file: str | None = None) -> str:
    """The ``reproduces`` field of the registry entry ``model`` names ("" for any other name)."""
    from abricot_local.models.registry import load_registry

    try:
        spec = load_registry(models_file).get(model)
    except AbricotError:  # a broken user registry is reported where the model is resolved
        return ""
    return spec.reproduces if spec is not None else ""

