"""The plan of a ``run`` command line before anything runs (``run --dry-run``, and the lines
every real run prints first): per model and task the items and the tokens to evaluate, the
download, the memory needed against what is available, and the predicted time on this
machine (cost.py, calibration.py).

Nothing is written and nothing is downloaded: a model not on this machine is planned from
its registry entry (size, parameters, tokenizer family); a file here has its header and its
vocabulary read (a vocabulary-only load: no weights), its SHA-256 taken only if remembered.
Task data that is not here is not fetched: that task is planned as "no data here". Only
``calibrate`` loads a model here, times it and writes the result into the user cache.
Names no task and no backend.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from abricot_local.run import calibration
from abricot_local import memory
from abricot_local.backends import backend_class, open_backend
from abricot_local.backends.base import schedule as make_schedule
from abricot_local.cache import is_offline
from abricot_local.run.chars_per_token import ratio
from abricot_local.errors import AbricotError, MissingDataError, ModelError
from abricot_local.memory import Fit
from abricot_local.gguf.file import model_bytes
from abricot_local.models.given import Given
from abricot_local.models.ref import (ModelRef, before_download, hub_download, local_file, lookup_alias,
                                      resolve_model_ref)
from abricot_local.models.sources import Pending as Download, offline_refusal, source_of
from abricot_local.run.cost import (ModelFacts, Speed, Work, count_work, counting_progress, estimated_facts,
                                     gguf_facts, parse_params, text_tokenizer, with_items)
from abricot_local.run.planning import TaskRun, instances, prepare, registry_reproduces
from abricot_local.models.registry import ModelSpec
from abricot_local.tasks import all_task_names, make_task, task_class, task_names
from abricot_local.tasks.uses import refuse_unknown_variants, refuse_unused

NO_CALIBRATION = ("no calibration yet for these settings: `abricot-local run MODEL --dry-run --calibrate` measures a "
                  "model on this machine (a few seconds for the embedded gemma-3-270m); others are scaled from it")


@dataclass(frozen=True)
class TaskPlan:
    task: str
    items: int  # to score
    available: int  # in the task's data
    work: Work | None = None
    seconds: float | None = None
    problem: str = ""
    saved: int = 0  # items a resumed run's folder holds already (``items``: those left)


@dataclass(frozen=True)
class ModelPlan:
    model: str  # as written
    label: str
    backend: str
    path: str | None = None  # the file on this machine
    facts: ModelFacts | None = None
    download: Download | None = None
    memory: Fit | None = None
    memory_estimated: bool = False  # from the registry's size (the file is not here)
    speed: Speed | None = None
    speed_note: str = ""
    tasks: tuple[TaskPlan, ...] = ()
    problem: str = ""  # why it cannot be planned (a sweep goes on)

    @property
    def seconds(self) -> float | None:
        """Load and every task that could be counted (None without a speed)."""
        if self.speed is None or self.problem:
            return None
        return self.speed.load + sum(t.seconds or 0.0 for t in self.tasks)


@dataclass(frozen=True)
class Alternative:
    option: str  # "--sample 100", "--shard 1/4"
    seconds: float | None  # the whole command with it (per part for a shard)


@dataclass(frozen=True)
class DryRun:
    models: tuple[ModelPlan, ...]
    alternatives: tuple[Alternative, ...] = ()

    @property
    def seconds(self) -> float | None:
        secs = [m.seconds for m in self.models]
        return None if not secs or None in secs else sum(secs)

    def to_json(self) -> dict:
        """The plan as ``run --dry-run --json`` prints it (``seconds``: the whole command, null
        when a model has no speed)."""
        return {"dry_run_version": 1, "seconds": self.seconds,
                "models": [_model_json(m) for m in self.models],
                "alternatives": [{"option": a.option, "seconds": a.seconds} for a in self.alternatives]}


def _model_json(m: ModelPlan) -> dict:
    fit = m.memory
    speed = m.speed
    return {
        "model": m.model, "label": m.label, "backend": m.backend, "seconds": m.seconds, "path": m.path,
        "problem": m.problem or None,
        "tasks": [{"task": t.task, "items": t.items, "available": t.available, "seconds": t.seconds,
                   "tokens": t.work.tokens if t.work else None, "decode_calls": t.work.calls if t.work else None,
                   "rows": t.work.rows if t.work else None, "exact": t.work.exact if t.work else None,
                   "counted_by": t.work.basis if t.work else None, "problem": t.problem or None} for t in m.tasks],
        "download": None if m.download is None else {"what": m.download.what, "bytes": m.download.bytes,
                                                     "to": m.download.to, "free_bytes": m.download.free,
                                                     "refused_offline": m.download.refused or None},
        "memory": None if fit is None else {"need_bytes": fit.need, "weights_bytes": fit.weights, "kv_bytes": fit.kv,
                                            "available_bytes": fit.available, "vram_bytes": fit.vram,
                                            "remote_bytes": fit.remote, "fits": fit.fits,
                                            "estimated": m.memory_estimated},
        "speed": None if speed is None else {
            "source": speed.source, "reference": speed.reference, "calibrated_at": speed.measured,
            "prompt_tokens_per_s": speed.prompt_rate(), "load_s": speed.load, "per_token_s": speed.per_token,
            "per_position_s": speed.per_position, "per_call_s": speed.per_call, "per_row_s": speed.per_row,
            "error": speed.error, "how": speed.how or None},
        "speed_note": m.speed_note or None,
    }


@dataclass(frozen=True)
class _Task:
    task: object
    run: TaskRun | None
    available: int
    problem: str = ""


def plan(models, *, given: Given, task_spec: str | None, task_options,
         limit: int | None = None, sample: int | None = None, shard=None, models_file=None, model_dirs=(),
         calibrate: bool = False, with_memory: bool = True, keep_going: bool = False,
         notify: Callable[[str], None] | None = None) -> DryRun:
    """The plan of ``run MODELS ...`` with these options (see the module's text). ``keep_going``:
    a model that cannot be planned is reported in its row (a sweep), else its error is raised.
    Nothing is written on the way: files hashed are remembered in this process only."""
    from abricot_local.hashing import unwritten

    with unwritten():
        return _plan(models, given=given, task_spec=task_spec, task_options=task_options, limit=limit,
                     sample=sample, shard=shard, models_file=models_file, model_dirs=model_dirs,
                     calibrate=calibrate, with_memory=with_memory, keep_going=keep_going, notify=notify)


def _plan(models, *, given, task_spec, task_options, limit, sample, shard, models_file, model_dirs, calibrate,
          with_memory, keep_going, notify) -> DryRun:
    made: dict[str, list[_Task]] = {}  # per `reproduces`: the tasks under the protocols it names
    out = []
    for name in models:
        reproduces = registry_reproduces(name, models_file)
        if reproduces not in made:
            made[reproduces] = _tasks(task_spec, replace(task_options, allow_download=False), limit, sample, shard,
                                      reproduces)
        tasks = made[reproduces]
        try:
            out.append(_model(name, tasks, given=given, task_options=task_options, models_file=models_file,
                              model_dirs=model_dirs, calibrate=calibrate, with_memory=with_memory, notify=notify))
        except AbricotError as err:
            if not keep_going:
                raise
            out.append(ModelPlan(name, name, given.backend, problem=str(err).splitlines()[0]))
    return DryRun(tuple(out), _alternatives(out, limit, sample, shard))


def _tasks(task_spec, options, limit, sample, shard, reproduces: str = "") -> list[_Task]:
    """The command's tasks and items, each under the protocols a run would hold it (those
    ``reproduces`` names: planning.instances). With no --tasks, every task: one whose data is
    not here is kept with its problem (a run fetches it when it can)."""
    names = task_names(task_spec) if task_spec else all_task_names()
    refuse_unused([task_class(n) for n in names], options)
    refuse_unknown_variants([task_class(n) for n in names], options.prompt_variant)
    out = []
    made = [make_task(n, options) for n in names]
    for task in instances(made, reproduces, options.prompt_variant, options.protocol):
        try:
            items = task.items()
            task.items = lambda items=items: items  # this task object's own: prepare() reads them once
            out.append(_Task(task, prepare([task], limit, sample, shard)[0], len(items)))
        except MissingDataError as err:
            out.append(_Task(task, None, 0, f"no data here ({err.what}); {err.advice()}"))
    return out


def _model(name: str, tasks: list[_Task], *, given: Given, task_options, models_file, model_dirs,
           calibrate, with_memory, notify) -> ModelPlan:
    ref, spec, download = _locate(name, given, models_file, model_dirs)
    kind = ref.backend if ref else (spec.backend or given.backend) if spec else given.backend
    cls = backend_class(kind)
    opts = given.for_model(kind, spec.n_ctx if spec else None)
    here = ref is not None and (ref.path is not None or not cls.reads_model_file)
    family = spec.tokenizer if spec else ""
    facts = None if not cls.reads_model_file else gguf_facts(ref.path) if here else _guess_facts(spec, name, family)
    plans = [_task_plan(t, None, opts, family, task_options.chat_template, notify) for t in tasks] if not here \
        else _counted(ref, kind, opts, tasks, task_options.chat_template, notify)
    fit, estimated = _memory(ref, spec, cls, opts) if with_memory else (None, False)
    speed, note = _speed(name, ref if here else None, cls, opts, facts, calibrate,
                         spec.sha256_for(0) if spec else None, backend=kind,
                         models_file=models_file, model_dirs=model_dirs, notify=notify)
    plans = [replace(p, seconds=speed.seconds(p.work)) if speed and p.work else p for p in plans]
    label = ref.label if ref else spec.name if spec else name
    return ModelPlan(name, label, kind, str(ref.path) if ref and ref.path else None, facts, download, fit, estimated,
                     speed, note, tuple(plans))


def _locate(name, given: Given, models_file, model_dirs):
    """(ModelRef when the model is here or synthetic, its registry entry, what a run downloads)."""
    if not backend_class(given.backend).reads_model_file:
        return resolve_model_ref(name, backend=given.backend, models_file=models_file), None, None
    ref = before_download(name, backend=given.backend, given=given, models_file=models_file,
                          model_dirs=model_dirs, force=True, digest=False)
    if ref is not None:  # (a file that is a registry entry's byte for byte keeps the run's own options)
        return ref, ref.spec, None
    offline = is_offline()
    hub = hub_download(name, backend=given.backend, models_file=models_file)
    if hub is not None:
        return None, None, hub
    spec = lookup_alias(name, models_file)
    path = local_file(spec)
    if path is None and not source_of(spec).fetches:
        raise ModelError(f"model '{spec.name}': file not found: {spec.path}")
    if path is not None:
        from abricot_local import hashing

        sha = spec.sha256_for(0) or hashing.remembered(path)
        return ModelRef(name, "registry", spec.backend or given.backend, spec.name, spec=spec, path=path, sha256=sha,
                        quant=spec.quant), spec, None
    source = source_of(spec)
    refused = ""
    if offline and source.downloads:  # the run's own refusal, naming the file not in the cache: said, not raised
        refused = offline_refusal(lambda: source.fetch(spec, offline=True, progress=False, notify=None, fresh=False))
    return None, spec, replace(source.pending(spec), refused=refused)


def _guess_facts(spec: ModelSpec | None, name: str, family: str) -> ModelFacts | None:
    params = parse_params(spec.params if spec else name)
    if params is None:
        return None
    size = f"{spec.approx_bytes / 1e9:.2f} GB" if spec and spec.approx_bytes else "size unknown"
    basis = f"its registry entry ({spec.params}, {size})" if spec else \
        f"the parameters its name gives ({name})"
    return estimated_facts(params, spec.approx_bytes if spec else None, ratio(family).n_vocab, basis)


def _counted(ref: ModelRef, kind: str, opts, tasks: list[_Task], chat: bool, notify=None) -> list[TaskPlan]:
    """Every task's work with the model's own tokenizer (a vocabulary-only load) or the
    synthetic backend itself."""
    reads = backend_class(kind).reads_model_file  # (--verbose shows the log of the run's own load, not this one)
    be = open_backend(kind, str(ref.path) if reads else ref.label,
                      replace(opts, vocab_only=True, verbose=False) if reads else opts)
    try:
        return _counted_by(be, opts, tasks, chat, notify)
    finally:
        be.close()


def _counted_by(be, opts, tasks: list[_Task], chat: bool, notify=None) -> list[TaskPlan]:
    """Every task's work with an open backend's own schedule (the run's: what it counts here,
    it scores without tokenizing again)."""
    from abricot_local.run.runner import apply_chat

    runs = {id(t): (apply_chat([t.run], be)[0] if chat else t.run) for t in tasks if t.run}
    return [_task_plan(t, (be.schedule, runs.get(id(t))), opts, "", chat, notify) for t in tasks]


def of_run(run_plan, backend, folder: Path | None = None) -> DryRun:
    """The plan of a run about to score (a RunPlan, its model open as ``backend``): its own items counted
    with the loaded model's tokenizer, the speed; no other load, no item built again (`run`'s first lines).
    ``folder`` (a --resume): the items it holds are left out, the work and time of those left in proportion."""
    from abricot_local.run.results import saved_counts

    ref, opts, cls = run_plan.model, run_plan.backend_options, backend_class(run_plan.backend)
    plans = _counted_by(backend, opts, [_Task(r.task, r, r.available or len(r.items)) for r in run_plan.runs],
                        run_plan.task_options.chat_template)
    facts = gguf_facts(ref.path) if cls.reads_model_file and ref.path else None
    speed, note = _speed(ref.as_written, ref, cls, opts, facts, False, None)
    plans = [replace(p, seconds=speed.seconds(p.work)) if speed and p.work else p for p in plans]
    done = saved_counts(folder) if folder is not None and folder.is_dir() else {}  # a --resume: the items left
    plans = [_less(p, min(done.get(p.task, 0), p.items), speed) for p in plans]
    model = ModelPlan(ref.as_written, ref.label, run_plan.backend, str(ref.path) if ref.path else None, facts,
                      None, None, False, speed, note, tuple(plans))
    return DryRun((model,), _alternatives([model], run_plan.limit, run_plan.sample, run_plan.shard))


def _task_plan(t: _Task, exact, opts, family: str, chat: bool, notify=None) -> TaskPlan:
    """One task's work: ``exact`` (the model's schedule, its runs) or estimated from the text."""
    name = t.task.key
    if t.run is None:
        return TaskPlan(name, 0, 0, problem=t.problem)
    if exact is not None:
        schedule, run = exact
        basis, is_exact = "the model's tokenizer", True
    else:
        r = ratio(family, t.task)
        tokenize = text_tokenizer(r.chars_per_token)
        schedule, run = (lambda req: make_schedule(req, tokenize, opts.n_ctx)), t.run
        basis, is_exact = r.basis + (" (chat template not counted)" if chat else ""), False
    try:
        work = count_work(run.items, schedule, opts, exact=is_exact, basis=basis,
                          progress=counting_progress(name, len(run.items), notify))
    except AbricotError as err:  # a prompt over n_ctx: the run would stop there
        return TaskPlan(name, len(t.run.items), t.available,
                        problem=str(err) if is_exact else f"may not fit (estimated): {err}")
    return TaskPlan(name, len(t.run.items), t.available, work)


def _memory(ref: ModelRef | None, spec: ModelSpec | None, cls, opts) -> tuple[Fit | None, bool]:
    """The model's weights + KV cache against RAM (+ VRAM, + the RPC servers': asked here)."""
    if ref is not None and ref.path is not None:
        facts = cls.preflight(ref.path, opts)
        return (None if facts is None else facts.fit(model_bytes(ref.path))), False
    size = spec.approx_bytes if spec else None
    if not size:
        return None, False
    return memory.fit(size, memory.kv_estimate_from_size(size, opts.n_ctx)), True


def _speed(name, ref: ModelRef | None, cls, opts, facts, calibrate: bool, pinned: str | None,
           **resolve) -> tuple[Speed | None, str]:
    """The speed: this model's calibration (its file here, or the registry's pinned SHA-256),
    else one scaled from the nearest calibrated model; with ``calibrate``, a model here is
    measured first."""
    settings = cls.speed_settings(opts)
    if settings is None:
        return None, "this backend has no calibration"
    settings = json.loads(json.dumps(settings))
    sha = ref.sha256 or (None if cls.reads_model_file else f"synthetic:{ref.label}") if ref else pinned
    note = ""
    if calibrate and ref is not None:
        notify = resolve.pop("notify", None)
        if notify:
            notify(f"calibrating {ref.label} on this machine (its load is timed too) ...")
        full = resolve_model_ref(name, offline=True, **resolve) if cls.reads_model_file else ref
        cal = calibration.calibrate(full, opts, settings, facts)
        sha, note = cal.sha256, f"calibrated now ({calibration.cache_file()})" + _busy()
    elif calibrate:
        note = "not calibrated: the model is not on this machine (a dry run downloads nothing)"
    speed = calibration.speed_for(sha, settings, facts)
    note = note or ("" if speed else NO_CALIBRATION)
    return speed, "; ".join([*([note] if note else []), *calibration.read().notes])  # entries ignored, named


def _busy() -> str:
    """A note when the machine was busy while a calibration ran (its speed is a busy machine's)."""
    import os

    try:
        load, cores = os.getloadavg()[0], os.cpu_count() or 1
    except (OSError, AttributeError):
        return ""
    return (f"; the machine was busy (load average {load:.1f} on {cores} cores): this speed is a busy machine's, "
            "calibrate again when it is idle") if load > cores else ""


def _alternatives(models: list[ModelPlan], limit, sample, shard) -> tuple[Alternative, ...]:
    """What other item selections would cost: --sample 100/400 (or every item, when the run
    takes a part), and each part of --shard 1/2, 1/4."""
    tasks = [t for m in models for t in m.tasks if t.work]
    if not tasks:
        return ()
    choices: list[tuple[str, Callable[[TaskPlan], int]]] = []
    if limit is None and sample is None and shard is None:
        choices += [(f"--sample {n}", lambda t, n=n: min(n, t.available)) for n in (100, 400)
                    if any(t.available > n for t in tasks)]
    elif any(t.items < t.available for t in tasks):
        choices.append(("every item", lambda t: t.available))
    if shard is None:
        choices += [(f"--shard K/{k} (each part)", lambda t, k=k: -(-t.items // k)) for k in (2, 4)
                    if any(t.items >= k for t in tasks)]
    out = []
    for option, items in choices:
        secs = [None if m.seconds is None else m.speed.load + sum(m.speed.seconds(with_items(t.work, items(t)))
                                                                  for t in m.tasks if t.work) for m in models]
        out.append(Alternative(option, None if None in secs else sum(secs)))
    return tuple(out)


def _less(t: TaskPlan, saved: int, speed: Speed | None) -> TaskPlan:
    if not saved:
        return t
    work = replace(with_items(t.work, t.items - saved), exact=False) if t.work else None
    return replace(t, items=t.items - saved, saved=saved, work=work,
                   seconds=speed.seconds(work) if speed and work else None)


def plan_of(request, *, calibrate: bool = False, with_memory: bool = True, keep_going: bool = False,
            notify: Callable[[str], None] | None = None) -> DryRun:
    """:func:`plan` of a run as `run` and ``abricot_local.evaluate`` ask for it (an
    run.request.RunRequest)."""
    r = request
    return plan(r.models, given=r.given, task_spec=r.task_spec, task_options=r.task_options, limit=r.limit,
                sample=r.sample, shard=r.shard, models_file=r.models_file, model_dirs=r.model_dirs, calibrate=calibrate,
                with_memory=with_memory, keep_going=keep_going, notify=notify)
