"""Executing a planned run: tasks x backend -> samples and metrics. No printing: progress
goes to a callback. Names no task and no backend (see planning.py for the plan)."""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, Sequence

from abricot_local import __version__
from abricot_local.analysis import baselines
from abricot_local.models import fetch
from abricot_local.backends.base import Backend
from abricot_local.core import Scored
from abricot_local.errors import AbricotError
from abricot_local.metrics import CI_LEVEL, N_BOOT, require_finite
from abricot_local.models.given import Given, load
from abricot_local.models.ref import open_model
from abricot_local.run.planning import RunPlan, TaskRun, prepare
from abricot_local.record import (SCHEMA_VERSION, DataFile, Manifest, Model, Provenance, Published, Record,
                                  RunConfig, Sample, SkippedTask, TaskEntry, metric_items)
from abricot_local.record.schema import check_metrics
from abricot_local.run.owned import samples_name
from abricot_local.run.results import RESULTS, OutputDir, finished_run, tidy_finished
from abricot_local.tasks import make_task, task_names
from abricot_local.tasks.base import Item, TaskOptions

Progress = Callable[[str, int, int], None]  # (task, done, total)


@dataclass(frozen=True)
class TaskResult:
    name: str
    samples: tuple[Sample, ...]
    metrics: dict
    seconds: float
    scored_now: int  # items scored in this process (the rest came from a checkpoint)


@dataclass(frozen=True)
class Outcome:
    path: Path
    record: Record
    complete: bool = False  # --resume found the run already finished: nothing was scored or written


def apply_chat(runs: list[TaskRun], backend: Backend) -> list[TaskRun]:
    """Wrap every prompt as the user turn of the model's chat template; the answer follows
    the generation prompt directly, so continuations lose their leading space ("1", not " 1")."""
    head, tail = backend.chat_wrap()
    out = []
    for run in runs:
        items = tuple(
            replace(it, context=head + it.context + tail, parse_special=True,
                    continuations=tuple(c.lstrip(" ") for c in it.continuations))
            for it in run.items
        )
        out.append(replace(run, items=items))
    return out


def check_fits(runs: list[TaskRun], backend: Backend) -> None:
    """Tokenize every request before scoring, so a prompt over n_ctx fails before any work."""
    for run in runs:
        for item in run.items:
            backend.schedule(item.request())


def score_items(items: Sequence[Item], backend: Backend) -> Iterator[tuple[Item, Scored]]:
    """Score items, yielding each as soon as its chunk is done. Items sharing a prefix are
    scored together so its KV cache is reused; the exact engines give the same numbers in
    any order, and a batched engine's groups depend only on this order (prefix, then input
    order), so `run` and `check` group alike. Chunks of ``batch_size()`` go to score_many."""
    todo = sorted(items, key=lambda it: it.prefix)
    size = max(1, backend.batch_size())
    for k in range(0, len(todo), size):
        chunk = todo[k : k + size]
        yield from zip(chunk, backend.score_many([it.request() for it in chunk]), strict=True)


def run_task(run: TaskRun, backend: Backend, *, done: dict[str, Sample] | None = None,
             on_sample: Callable[[str, Sample], None] | None = None, progress: Progress | None = None) -> TaskResult:
    """Score the items not in ``done`` (id -> sample); samples in input order, metrics over all."""
    done = dict(done or {})
    start = time.perf_counter()
    total = len(run.items)
    finished = sum(1 for it in run.items if it.id in done)
    scored_now = 0
    if progress:
        progress(run.task.key, finished, total)
    for item, scored in score_items([it for it in run.items if it.id not in done], backend):
        sample = run.task.sample(item, scored)
        done[item.id] = sample
        scored_now += 1
        finished += 1
        if on_sample:
            on_sample(run.task.key, sample)
        if progress:
            progress(run.task.key, finished, total)
    samples = tuple(done[it.id] for it in run.items)
    require_finite(list(samples), run.task.key)
    return TaskResult(run.task.key, samples, run.task.metrics(list(samples)), time.perf_counter() - start, scored_now)


def data_warnings(task, samples: Sequence[Sample], *, limit: int | None = None, sample: int | None = None) -> list[str]:
    """What makes a task's numbers misleading: one gold class only (with the advice that fits how
    the items were chosen: ``limit``, ``sample``), a source not scored."""
    out = []
    golds = {s.gold for s in samples}
    if len(samples) > 1 and len(golds) == 1:
        only = samples[0].gold if samples[0].gold_label is None else samples[0].gold_label
        advice = ("; use --sample N (a seeded draw over the whole release) instead of --limit" if limit is not None
                  else "; a larger --sample N draws more of the release" if sample is not None else "")
        out.append(f"every scored item has the same gold answer ({only!r}): the metrics describe one class "
                   f"only{advice}")
    missing = [src for src in task.sources if src not in {s.source for s in samples}]
    if missing:
        out.append(f"no item from source(s) {', '.join(missing)} was scored")
    return out


def metric_warnings(metrics: dict) -> list[str]:
    return [f"{name} is undefined (NaN): a constant prediction or gold vector"
            for name, value, _ in metric_items(metrics) if isinstance(value, float) and value != value]


def verdict(plan: RunPlan, tasks: dict[str, TaskEntry], runs: Sequence[TaskRun] = (),
            results: Sequence[TaskResult] = ()) -> Published:
    """The published rows the model's registry entry reproduces, each with its reproduction verdict
    (analysis/baselines.py: the run's 90% CI against the margin, ``--margin`` or the task's)."""
    wanted = {r.task for r in baselines.parse_reproduces(plan.reproduces)[0]} if plan.reproduces else set()
    evidence = {res.name: baselines.evidence(run.task, res.samples, len(run.task.items()))
                for run, res in zip(runs, results) if run.task.name in wanted}
    return baselines.verdict(plan.reproduces, tasks, evidence, plan.margin)


def as_json(obj):
    """``obj`` as results.json holds it (tuples as lists): what a read-back record compares equal to."""
    return json.loads(json.dumps(obj))


def plan_manifest(plan: RunPlan) -> Manifest:
    """What a resume of this plan must match (the record's manifest)."""
    return Manifest.from_dict(as_json(plan.manifest()), "manifest")


def task_entry(plan: RunPlan, run: TaskRun, res: TaskResult) -> TaskEntry:
    """One task's results as results.json records them (the task's metrics checked at this edge)."""
    metrics = as_json(res.metrics)
    check_metrics(metrics, f"tasks.{res.name}.metrics")
    return TaskEntry(
        metrics=metrics, n=len(res.samples), version=run.task.version, config=run.task.config(),
        prompt_hash=run.task.prompt_hash(), data=tuple(DataFile(**d) for d in plan.data[res.name]),
        samples_file=samples_name(res.name), seconds=round(res.seconds, 3), scored_now=res.scored_now,
        chance=dict(run.task.chance),
        warnings=(*run.notes, *run.task.warnings(),
                  *data_warnings(run.task, res.samples, limit=plan.limit, sample=plan.sample), *metric_warnings(metrics)),
        sampled=run.sampled)  # config's sample is as given; this is what was drawn


def build_record(plan: RunPlan, backend: Backend, runs: list[TaskRun], task_results: list[TaskResult],
                 wall: float) -> Record:
    tasks = {res.name: task_entry(plan, run, res) for res, run in zip(task_results, runs)}
    chat = dict(zip(("head", "tail"), backend.chat_wrap())) if plan.task_options.chat_template else None
    provenance = {
        "abricot_local": __version__,
        "python": platform.python_version(),
        **backend.provenance().to_dict(),
        "bootstrap": {"n_boot": N_BOOT, "level": CI_LEVEL, "seed": plan.task_options.seed},
        "chat_template": chat,
    }
    return Record(
        schema_version=SCHEMA_VERSION,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        model=Model.from_dict(as_json(plan.model.record()), "model"),  # ModelRef: the one source of it
        config=RunConfig.from_dict(as_json(plan.config()), "config"),
        manifest=plan_manifest(plan),
        provenance=Provenance.from_dict(as_json(provenance), "provenance"),  # the backend's record is an edge
        tasks=tasks,
        skipped=tuple(SkippedTask(task=s.task, reason=s.reason, how=s.how) for s in plan.skipped),
        published=verdict(plan, tasks, runs, task_results),
        wall_seconds=round(wall, 3),
    )


def open_plan_backend(plan: RunPlan) -> Backend:
    """The plan's model opened, after the memory check (remote RPC memory included) unless --force."""
    return load(plan.model, plan.backend_options, force=plan.force)


def execute(plan: RunPlan, out_dir: Path, *, resume: bool = False, progress: Progress | None = None,
            backend: Backend | None = None, on_loaded: Callable[[Backend], None] | None = None) -> Outcome:
    """Take the output folder (its lock, and what it refuses) before the model loads, then load
    it once, score every task, write the output folder."""
    start = time.perf_counter()
    manifest = plan_manifest(plan)
    if resume:
        done = finished_run(out_dir, manifest)
        if done is not None:  # nothing to score: the finished run stays as it is (leftovers of its tidy-up go)
            tidy_finished(Path(out_dir), done)
            return Outcome(Path(out_dir) / RESULTS, done, complete=True)
    with OutputDir(out_dir) as out:  # a second run on this folder is refused before any load
        out.check(manifest, resume=resume)
        own = backend is None
        backend = backend or open_plan_backend(plan)
        try:
            if on_loaded:
                on_loaded(backend)
            runs = list(plan.runs)
            if plan.task_options.chat_template:
                runs = apply_chat(runs, backend)
            check_fits(runs, backend)
            path, record = _score_into(out, plan, backend, runs, manifest, resume=resume, progress=progress,
                                       start=start)
        finally:
            if own:
                backend.close()
    return Outcome(path, record)


def _score_into(out: OutputDir, plan: RunPlan, backend: Backend, runs: list[TaskRun], manifest: Manifest, *,
                resume: bool, progress: Progress | None, start: float) -> tuple[Path, Record]:
    """Score the runs into the held folder: RUNNING, the checkpoint, results.json; a failure
    leaves FAILED with its reason, Ctrl-C INTERRUPTED; Ctrl-C once results.json is written
    finishes the tidy-up and the run (it is complete)."""
    out.running({run.task.key: len(run.items) for run in runs})
    record = None
    try:
        out.start(manifest, resume=resume)
        results = []
        for run in runs:
            done = out.done(run.task.key) if resume else {}
            results.append(run_task(run, backend, done=done, on_sample=out.append, progress=progress))
        record = build_record(plan, backend, runs, results, time.perf_counter() - start)
        return out.finalize(record, {r.name: list(r.samples) for r in results}), record
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM as the CLI turns it
        if record is not None and out.finished():
            out.tidy_finished(record.tasks)
            return out.path / RESULTS, record
        out.interrupted()
        raise
    except Exception as err:
        out.failed(str(err) if isinstance(err, AbricotError) else f"{type(err).__name__}: {err}")
        raise


def pull_data(task: str) -> list[tuple[Path, str]]:
    """Download a task's (or group's) data into the user cache; (path, sha256) of each file."""
    from abricot_local.tasks import pull_data as pull

    return [(Path(p), fetch.sha256_file(Path(p))) for p in pull(task)]


def pull_test_data() -> list[tuple[Path, str]]:
    """Download every file the test suite reads where it looks (`data pull --tests`); (path, sha256)."""
    from abricot_local.tasks.test_data import pull_test_data as pull

    return [(Path(p), fetch.sha256_file(Path(p))) for p in pull()]


def label_map(model: str, given: Given, task_name: str, task_options: TaskOptions,
              models_file: str | None = None, model_dirs: tuple[str, ...] = ()) -> dict:
    """How the first item's continuations map to token ids (vocab-only load)."""
    names = task_names(task_name)
    item = prepare([make_task(names[0], task_options)], 1)[0].items[0]
    opened = open_model(model, Given(given.backend, {**given.values, "vocab_only": True}),
                        models_file=models_file, model_dirs=model_dirs)
    be = opened.load(force=True)  # vocab only: no weights are loaded
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
