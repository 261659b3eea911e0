"""Tasks x backend -> samples and metrics. No printing: progress goes to a callback."""

from __future__ import annotations

import platform
import re
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from abricot_local import __version__, fetch, memory
from abricot_local.backends import BACKENDS, open_backend
from abricot_local.backends.base import Backend, BackendOptions
from abricot_local.errors import DataError, UsageError
from abricot_local.metrics import CI_LEVEL, N_BOOT
from abricot_local.registry import load_registry, lookup
from abricot_local.results import SCHEMA_VERSION, OutputDir
from abricot_local.tasks import make_task, task_names
from abricot_local.tasks.base import Item, Task, TaskOptions

Progress = Callable[[str, int, int], None]  # (task, done, total)
SAMPLE_STREAM = 101  # --sample's generator: [seed, 101], apart from the tasks' own draws


@dataclass(frozen=True)
class TaskRun:
    task: Task
    items: tuple[Item, ...]


@dataclass(frozen=True)
class TaskResult:
    name: str
    samples: tuple[dict, ...]
    metrics: dict
    seconds: float
    scored_now: int  # items scored in this process (the rest came from a checkpoint)


def prepare(tasks: Iterable[Task], limit: int | None, sample: int | None = None) -> list[TaskRun]:
    """Build every task's items, checking ids are unique: the first ``limit`` in release
    order, or ``sample`` of them drawn with the task's seed (kept in release order)."""
    runs = []
    for task in tasks:
        items = task.items()
        if sample is not None and sample < len(items):
            keep = np.random.default_rng([task.options.seed, SAMPLE_STREAM]).choice(len(items), sample, replace=False)
            items = [items[k] for k in sorted(keep)]
        if limit is not None:
            items = items[:limit]
        if not items:
            raise DataError(f"task {task.name}: the data holds no items")
        seen: set[str] = set()
        for it in items:
            if it.id in seen:
                raise DataError(f"task {task.name}: item id {it.id!r} appears twice in the data")
            seen.add(it.id)
        runs.append(TaskRun(task, tuple(items)))
    return runs


def apply_chat(runs: list[TaskRun], backend: Backend) -> list[TaskRun]:
    """Wrap every prompt as the user turn of the model's chat template; the answer follows
    the generation prompt directly, so continuations lose their leading space ("1", not " 1")."""
    head, tail = backend.chat_wrap()
    out = []
    for run in runs:
        items = tuple(
            replace(it, prefix=head + it.prefix, context=head + it.context + tail, parse_special=True,
                    continuations=tuple(c.lstrip(" ") for c in it.continuations))
            for it in run.items
        )
        out.append(TaskRun(run.task, items))
    return out


def check_fits(runs: list[TaskRun], backend: Backend) -> None:
    """Tokenize every request before scoring, so a prompt over n_ctx fails before any work."""
    for run in runs:
        for item in run.items:
            backend.schedule(item.request())


def run_task(
    run: TaskRun,
    backend: Backend,
    *,
    done: dict[str, dict] | None = None,
    on_sample: Callable[[str, dict], None] | None = None,
    progress: Progress | None = None,
) -> TaskResult:
    """Score the items not in ``done`` (id -> sample), in input order; metrics over all."""
    done = dict(done or {})
    start = time.perf_counter()
    total = len(run.items)
    scored_now = 0
    finished = sum(1 for it in run.items if it.id in done)
    if progress:
        progress(run.task.name, finished, total)
    # Items sharing a prefix are scored together so its KV cache is reused; the per-item
    # engines give the same numbers in any order (batched: see backends/batched.py), and
    # the samples come back in input order. Chunks of batch_size() go to score_many.
    todo = [it for it in sorted(run.items, key=lambda it: it.prefix) if it.id not in done]
    size = max(1, backend.batch_size())
    for k in range(0, len(todo), size):
        chunk = todo[k : k + size]
        for item, scored in zip(chunk, backend.score_many([it.request() for it in chunk]), strict=True):
            sample = run.task.sample(item, scored)
            done[item.id] = sample
            scored_now += 1
            finished += 1
            if on_sample:
                on_sample(run.task.name, sample)
            if progress:
                progress(run.task.name, finished, total)
    samples = tuple(done[it.id] for it in run.items)
    return TaskResult(
        name=run.task.name,
        samples=samples,
        metrics=run.task.metrics(list(samples)),
        seconds=time.perf_counter() - start,
        scored_now=scored_now,
    )


# -- a whole run: plan (cheap, validates input), then execute (loads the model) -------------
@dataclass(frozen=True)
class RunPlan:
    model_label: str
    model_path: str | None  # None for the fake backend
    model_sha256: str | None
    model_alias: str | None
    backend: str
    backend_options: BackendOptions
    task_options: TaskOptions
    runs: tuple[TaskRun, ...]
    data: dict  # task -> [{"path", "sha256"}]
    limit: int | None
    force: bool
    sample: int | None = None

    def config(self) -> dict:
        """Every option that can change a number (recorded, and compared on --resume)."""
        b, t = self.backend_options, self.task_options
        return {
            "model": self.model_alias or self.model_path or self.model_label,
            "backend": self.backend,
            "tasks": [r.task.name for r in self.runs],
            "limit": self.limit,
            "sample": self.sample,
            "seed": t.seed,
            "shots": t.shots,
            "prompt_variant": t.prompt_variant,
            "chat_template": t.chat_template,
            "n_ctx": b.n_ctx,
            "n_batch": b.n_batch,
            "n_gpu_layers": b.n_gpu_layers,
            "flash_attn": b.flash_attn,
            "engine": b.engine,
            # only for batched, so the manifests of earlier runs (and --resume) stay the same
            **({"parallel": b.parallel} if b.engine == "batched" else {}),
            **({"repack": False} if not b.repack else {}),  # only when off: earlier manifests stay the same
        }

    def manifest(self) -> dict:
        return {
            "config": self.config(),
            "model_sha256": self.model_sha256,
            "data_sha256": {k: [f["sha256"] for f in v] for k, v in self.data.items()},
            "task_versions": {r.task.name: r.task.version for r in self.runs},
        }


@dataclass(frozen=True)
class Outcome:
    path: Path
    results: dict


def plan_run(*, model: str, backend: str, task_spec: str, task_options: TaskOptions,
             backend_options: BackendOptions, limit: int | None, models_file: str | None = None,
             force: bool = False, n_ctx_given: bool = True, sample: int | None = None) -> RunPlan:
    """Validate tasks, data and model before anything heavy is loaded."""
    names = task_names(task_spec)
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    if backend != "fake" and not model.lower().endswith(".gguf") and not Path(model).exists():
        lookup(model, load_registry(models_file))  # an unknown alias fails before any download
    runs = prepare([make_task(n, task_options) for n in names], limit, sample)
    data = {
        r.task.name: [{"path": str(f.path), "sha256": f.sha256} for f in r.task.data_files()] for r in runs
    }
    if backend == "fake":
        return RunPlan(model, None, None, None, backend, backend_options, task_options, tuple(runs),
                       data, limit, force, sample)
    resolved = fetch.resolve_model(model, models_file=models_file)
    label = resolved.alias or Path(resolved.path).stem
    if not n_ctx_given and resolved.spec is not None and resolved.spec.n_ctx:
        backend_options = replace(backend_options, n_ctx=resolved.spec.n_ctx)  # the registry's default
    return RunPlan(label, str(resolved.path), fetch.sha256_file(Path(resolved.path)), resolved.alias,
                   backend, backend_options, task_options, tuple(runs), data, limit, force, sample)


def _results(plan: RunPlan, backend: Backend, task_results: list[TaskResult], wall: float) -> dict:
    tasks = {}
    for res, run in zip(task_results, plan.runs):
        warnings = [*getattr(run.task, "warnings", []), *metric_warnings(res.metrics)]
        tasks[res.name] = {
            "metrics": res.metrics,
            "n": len(res.samples),
            "version": run.task.version,
            "config": run.task.config(),
            "prompt_hash": run.task.prompt_hash(),
            "data": plan.data[res.name],
            "samples_file": f"samples-{res.name}.jsonl",
            "seconds": round(res.seconds, 3),
            "scored_now": res.scored_now,
            "warnings": warnings,
        }
    size = Path(plan.model_path).stat().st_size if plan.model_path else None
    chat = dict(zip(("head", "tail"), backend.chat_wrap())) if plan.task_options.chat_template else None
    return {
        "schema_version": SCHEMA_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": {"name": plan.model_label, "alias": plan.model_alias, "path": plan.model_path,
                  "size": size, "sha256": plan.model_sha256},
        "config": plan.config(),
        "manifest": plan.manifest(),
        "provenance": {
            "abricot_local": __version__,
            "python": platform.python_version(),
            **backend.provenance(),
            "bootstrap": {"n_boot": N_BOOT, "level": CI_LEVEL, "seed": plan.task_options.seed},
            "chat_template": chat,
        },
        "tasks": tasks,
        "wall_seconds": round(wall, 3),
    }


def metric_warnings(metrics: dict) -> list[str]:
    return [f"{k} is undefined (NaN): a constant prediction or gold vector"
            for k, v in metrics.items() if isinstance(v, float) and v != v]


def model_bytes(path: Path) -> int:
    """Size of a GGUF, every part of a split one (name-0000k-of-0000N.gguf) included."""
    m = re.match(r"(.*)-\d{5}-of-(\d{5})\.gguf$", path.name)
    if not m:
        return path.stat().st_size
    parts = [path.with_name(f"{m.group(1)}-{k:05d}-of-{m.group(2)}.gguf") for k in range(1, int(m.group(2)) + 1)]
    return sum(p.stat().st_size for p in parts if p.exists())


def check_memory(plan: RunPlan) -> None:
    """Refuse (unless --force) a model whose weights + KV cache clearly exceed RAM (+ free VRAM)."""
    if plan.backend != "llama.cpp" or plan.force or not plan.model_path:
        return
    from abricot_local.backends.llama_cpp import kv_cache_bytes, resolved_gpu_layers
    from abricot_local.doctor import nvidia_gpus

    vram = 0
    if resolved_gpu_layers(plan.backend_options) > 0:
        vram = sum(g.get("memory_free") or 0 for g in nvidia_gpus().get("gpus", []))
    remote = 0
    if plan.backend_options.rpc:  # the RPC servers' free memory, asked of them before anything loads
        from abricot_local.backends.rpc import add_servers

        remote = sum(d.memory_free for d in add_servers(plan.backend_options.rpc))
    path = Path(plan.model_path)
    memory.check_memory(model_bytes(path), kv_cache_bytes(path, plan.backend_options.n_ctx), vram=vram, remote=remote)


def open_plan_backend(plan: RunPlan) -> Backend:
    return open_backend(plan.backend, plan.model_path or plan.model_label, plan.backend_options)


def execute(plan: RunPlan, out_dir: Path, *, resume: bool = False, progress: Progress | None = None,
            backend: Backend | None = None) -> Outcome:
    """Load the model once, score every task, write the output folder."""
    start = time.perf_counter()
    own = backend is None
    if own:
        check_memory(plan)
    backend = backend or open_plan_backend(plan)
    try:
        runs = list(plan.runs)
        if plan.task_options.chat_template:
            runs = apply_chat(runs, backend)
        check_fits(runs, backend)
        with OutputDir(out_dir) as out:
            out.start(plan.manifest(), resume=resume)
            results = []
            for run in runs:
                done = out.done(run.task.name) if resume else {}
                results.append(run_task(run, backend, done=done, on_sample=out.append, progress=progress))
            doc = _results(plan, backend, results, time.perf_counter() - start)
            path = out.finalize(doc, {r.name: list(r.samples) for r in results})
    finally:
        if own:
            backend.close()
    return Outcome(path, doc)


def pull_data(task: str) -> list[tuple[Path, str]]:
    """Download a task's data into the user cache; (path, sha256) of each file."""
    from abricot_local.tasks import pull_data as pull

    key = "abricot" if task.lower().startswith("abricot") else task.lower()
    paths = pull(key, fetch.cache_dir() / "data" / key)
    return [(Path(p), fetch.sha256_file(Path(p))) for p in paths]


def label_map(model: str, backend: str, task_name: str, task_options: TaskOptions,
              backend_options: BackendOptions, models_file: str | None = None) -> dict:
    """How the first item's continuations map to token ids (vocab-only load)."""
    names = task_names(task_name)
    item = prepare([make_task(names[0], task_options)], 1)[0].items[0]
    path = model if backend == "fake" else str(fetch.resolve_model(model, models_file=models_file).path)
    be = open_backend(backend, path, backend_options)
    try:
        sch = be.schedule(item.request())
        rows = []
        for cont, seq, c in zip(item.continuations, sch.seqs, sch.ctx_lens):
            ids = list(seq[c:])
            rows.append({"continuation": cont, "ids": ids, "pieces": [be.piece(t) for t in ids]})
        return {"model": model, "task": names[0], "item": item.id, "n_context_tokens": min(sch.ctx_lens),
                "prefix_len": sch.prefix_len, "trunk_len": sch.trunk_len, "fast_path": sch.fast_path,
                "choices": rows}
    finally:
        be.close()
