"""Planning a run: tasks, data, model and memory are checked before anything heavy loads.

No task or backend is named here: tasks come from the registry (entry points)
and declare their data; a backend class declares whether it reads a model
file, its options and what its config records, and gives its memory facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from abricot_local import fetch, memory
from abricot_local.backends import backend_class
from abricot_local.backends.options import ScoringOptions
from abricot_local.errors import DataError, DownloadError, MissingDataError, UsageError
from abricot_local.tasks import all_task_names, make_task, task_names
from abricot_local.tasks.base import Item, Task, TaskOptions

SAMPLE_STREAM = 101  # --sample's generator: [seed, 101], apart from the tasks' own draws


@dataclass(frozen=True)
class TaskRun:
    task: Task
    items: tuple[Item, ...]
    sampled: int | None = None  # with --sample: the items drawn (all of them when the task has fewer)
    notes: tuple[str, ...] = ()  # what preparing did that a reader must know (recorded as warnings)


@dataclass(frozen=True)
class Skipped:
    """A task left out of a run with no --tasks: why, and the command that gets its data."""

    task: str
    reason: str
    how: str


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    @classmethod
    def parse(cls, text: str | None) -> "Shard | None":
        if not text:
            return None
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
            raise UsageError(f"--shard expects K/N with 1 <= K <= N (like 2/4), got {text!r}")
        return cls(int(m.group(1)), int(m.group(2)))

    def take(self, items: list) -> list:
        """The K-th of N disjoint parts: every N-th item from the K-th, in order."""
        return items[self.index - 1 :: self.count]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def prepare(tasks, limit: int | None, sample: int | None = None, shard: Shard | None = None) -> list[TaskRun]:
    """Build every task's items, checking ids are unique: the first ``limit`` in release
    order, or ``sample`` of them drawn with the task's seed (kept in release order);
    then the shard's part of those."""
    runs = []
    for task in tasks:
        items = task.items()
        notes: tuple[str, ...] = ()
        if sample is not None and sample < len(items):
            keep = np.random.default_rng([task.options.seed, SAMPLE_STREAM]).choice(len(items), sample, replace=False)
            items = [items[k] for k in sorted(keep)]
        elif sample is not None and sample > len(items):
            notes = (f"--sample {sample} asks for more items than the task has: all {len(items)} were scored",)
        if limit is not None:
            items = items[:limit]
        if not items:
            raise DataError(f"task {task.name}: the data holds no items")
        seen: set[str] = set()
        for it in items:
            if it.id in seen:
                raise DataError(f"task {task.name}: item id {it.id!r} appears twice in the data")
            seen.add(it.id)
        if shard is not None:
            items = shard.take(items)
            if not items:
                raise UsageError(f"task {task.name}: shard {shard} holds no item ({len(seen)} items in all)")
        runs.append(TaskRun(task, tuple(items), None if sample is None else min(sample, len(seen)), notes))
    return runs


@dataclass(frozen=True)
class RunPlan:
    model_label: str
    model_path: str | None  # None for a backend that reads no model file
    model_sha256: str | None
    model_alias: str | None
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
    reproduces: str = ""  # the registry entry's ``reproduces`` field
    quant: str = ""  # the registry entry's quant, else read from the file name

    def config(self) -> dict:
        """Every option that can change a number (recorded, and compared on --resume)."""
        return {
            "model": self.model_alias or self.model_path or self.model_label,
            "backend": self.backend,
            "tasks": [r.task.name for r in self.runs],
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
            "task_versions": {r.task.name: r.task.version for r in self.runs},
        }


def select_tasks(task_spec: str | None, options: TaskOptions) -> tuple[list[Task], tuple[Skipped, ...]]:
    """The tasks of ``--tasks``; with none given, every registered task whose data is given,
    found, or can be fetched now (the others are skipped, each with its reason)."""
    if task_spec:
        return [make_task(n, options) for n in task_names(task_spec)], ()
    chosen, skipped, errors = [], [], []
    for name in all_task_names():
        task = make_task(name, options)
        try:
            task.data_path()
            chosen.append(task)
        except MissingDataError as err:
            errors.append(err)
            skipped.append(Skipped(name, err.what, err.advice()))
        except (DataError, DownloadError) as err:
            skipped.append(Skipped(name, str(err), task.data.how))
    if not chosen:
        raise no_task_data(errors) if len(errors) == len(skipped) else DataError(
            "no task has its data here: " + "; ".join(dict.fromkeys(s.reason for s in skipped)))
    return chosen, tuple(skipped)


def no_task_data(errors: list[MissingDataError]) -> MissingDataError:
    """One error for every task's missing data: the tasks and where they were looked for, one
    command line that gets them all, the offline alternatives (each once)."""
    import os

    wheres = [e.where for e in errors if e.where]
    where = os.path.commonpath(wheres) if wheres else ""
    reasons = list(dict.fromkeys(e.reason for e in errors if e.reason))
    looked = "; ".join([f"looked in {where}"] * bool(where) + reasons[:1])
    what = f"no task has its data here: {', '.join(e.task for e in errors)}" + (f" ({looked})" if looked else "")
    gets = list(dict.fromkeys(e.get for e in errors if e.get))
    return MissingDataError(what, " && ".join(gets) or None, " or ".join(dict.fromkeys(e.offline for e in errors)))


def plan_run(*, model: str, backend: str, task_spec: str | None, task_options: TaskOptions,
             backend_options: ScoringOptions, limit: int | None, models_file: str | None = None,
             force: bool = False, n_ctx_given: bool = True, sample: int | None = None,
             shard: Shard | None = None, notify=None) -> RunPlan:
    """Validate tasks, data, model and memory before anything heavy is loaded or downloaded."""
    cls = backend_class(backend)
    spec = None
    if cls.reads_model_file and not model.lower().endswith(".gguf") and not Path(model).exists():
        spec = fetch.lookup_alias(model, models_file)  # an unknown alias fails before any download
        if not n_ctx_given and spec.n_ctx:
            backend_options = replace(backend_options, n_ctx=spec.n_ctx)  # the registry's default
        if not force:
            check_memory_before_download(spec, backend_options)
    tasks, skipped = select_tasks(task_spec, task_options)
    runs = prepare(tasks, limit, sample, shard)
    data = {r.task.name: [{"path": str(f.path), "sha256": f.sha256} for f in r.task.data_files()] for r in runs}
    common = dict(backend=backend, backend_options=backend_options, task_options=task_options, runs=tuple(runs),
                  data=data, limit=limit, force=force, sample=sample, shard=shard, skipped=skipped)
    if not cls.reads_model_file:
        return RunPlan(model, None, None, None, **common)
    resolved = fetch.resolve_model(model, models_file=models_file, notify=notify)
    label = resolved.alias or Path(resolved.path).stem
    from abricot_local.report import quant_of

    spec = resolved.spec
    return RunPlan(label, str(resolved.path), fetch.sha256_file(Path(resolved.path)), resolved.alias,
                   reproduces=spec.reproduces if spec else "",
                   quant=(spec.quant if spec else "") or quant_of(str(resolved.path)), **common)


def model_bytes(path: Path) -> int:
    """Size of a GGUF, every part of a split one (name-0000k-of-0000N.gguf) included."""
    m = re.match(r"(.*)-\d{5}-of-(\d{5})\.gguf$", path.name)
    if not m:
        return path.stat().st_size
    parts = [path.with_name(f"{m.group(1)}-{k:05d}-of-{m.group(2)}.gguf") for k in range(1, int(m.group(2)) + 1)]
    return sum(p.stat().st_size for p in parts if p.exists())


def check_memory(plan: RunPlan) -> None:
    """Refuse (unless --force) a model whose weights + KV cache clearly exceed RAM (+ free VRAM)."""
    if plan.force or not plan.model_path:
        return
    path = Path(plan.model_path)
    facts = backend_class(plan.backend).preflight(path, plan.backend_options)
    if facts:
        memory.check_memory(model_bytes(path), facts["kv_bytes"], vram=facts.get("vram", 0),
                            remote=facts.get("remote", 0))


def check_memory_before_download(spec, options: ScoringOptions) -> None:
    """For a registry model not in the cache: its size against RAM and the cache's free disk,
    refused with the numbers before anything downloads (``--force`` skips this)."""
    if fetch.is_cached(spec):
        return
    size = spec.approx_bytes
    if not size:
        return
    memory.check_memory(size, memory.kv_estimate_from_size(size, options.n_ctx))
    memory.check_disk(size, fetch.download_folder(spec))
