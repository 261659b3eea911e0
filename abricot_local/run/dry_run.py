"""The cost of a run's plan before anything runs (``run --dry-run``, and the lines every real run
prints first): per model and task the items and the tokens to evaluate, the download, the memory
needed against what is available, and the predicted time on this machine (cost.py,
calibration.py). The plan is plan.py's, the one a run executes: ``--dry-run`` makes it ``dry``
(nothing fetched), a run costs its own once its model is loaded (:func:`of_run`).

Nothing is written and nothing is downloaded: a model not on this machine is planned from
its registry entry (size, parameters, tokenizer family); a file here has its header and its
vocabulary read (a vocabulary-only load: no weights), its SHA-256 taken only if remembered. A prompt is judged
against the context the backend will allocate (its options' ``context_window``: llama.cpp rounds n_ctx up), in the run's words.
Task data that is not here is not fetched: that task is planned as "no data here". Only
``calibrate`` loads a model here, times it and writes the result into the user cache.
Names no task and no backend. What it makes (DryRun, ModelPlan, TaskPlan) is dry_plan.py's.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Callable

from abricot_local import hashing, memory
from abricot_local.run import calibration
from abricot_local.backends import backend_class, open_backend, reads_model_file
from abricot_local.backends.base import schedule as make_schedule
from abricot_local.run.chars_per_token import ratio
from abricot_local.errors import AbricotError, opt
from abricot_local.record import RESULTS
from abricot_local.memory import Fit
from abricot_local.gguf.file import model_bytes
from abricot_local.models.ref import ModelRef
from abricot_local.models.sources import sibling_here
from abricot_local.run.dry_plan import Alternative, DryRun, ModelPlan, TaskPlan
from abricot_local.run.cost import (HEADER, ModelFacts, Speed, count_work, counting_progress, estimated_facts,
                                     gguf_facts, text_tokenizer, with_items)
from abricot_local.models.registry import ModelSpec
from abricot_local.models.spec import parse_params

# a plan's speed note where no calibration gives a speed: how to get one, in each door's words (errors.opt: the
# command line's `--dry-run with --calibrate`, Python's `plan(...) with calibrate=True`), said once (console/plan.py)
NO_CALIBRATION = (f"no calibration yet for these settings: {opt('dry_run', True)} with {opt('calibrate', True)} measures a "
                  "model on this machine and caches its speed (the other options as here; a few seconds for the "
                  "embedded gemma-3-270m); a model not calibrated is scaled from one that is")


def plan_of(request, *, calibrate: bool = False, with_memory: bool = True,
            notify: Callable[[str], None] | None = None) -> DryRun:
    """The cost of each model's plan in ``request`` (a run.request.RunRequest), as `run --dry-run` and
    ``abricot_local.plan`` ask for it: each plan ``dry`` (plan.py: nothing fetched or downloaded; a task
    whose data is not here kept with its problem). In a sweep, a model that cannot be planned is
    reported in its row, else its error is raised (a task's error is the command's). --limit's caution is said
    first (``notify``). Nothing is written on the way: files hashed are remembered in this process only."""
    from abricot_local.hashing import unwritten
    from abricot_local.run.plan import make_plan

    if request.caution and notify:
        notify(request.caution)
    sweep = request.sweep
    out = []
    with unwritten():
        reference = request.reference  # a --until-settled ladder's, else None
        for name in request.models:
            folder = request.out_folder(name)  # a sweep's --out refused whole where the run refuses it
            p = make_plan(request, name, dry=True, notify=notify, keep_going=sweep)
            try:
                cost = model_cost(p, calibrate=calibrate, with_memory=with_memory, notify=notify)
                out.append(_in_folder(_settled(p, cost, reference), p, request, folder, notify))
            except AbricotError as err:
                if not sweep:
                    raise
                out.append(ModelPlan(name, name, p.backend, problem=err.raw().splitlines()[0]))
    return DryRun(tuple(out), () if request.settle.on else _alternatives(out, request.limit, request.sample,
                                                                         request.shard))


def _in_folder(model: ModelPlan, plan, request, folder: Path | None, notify=None) -> ModelPlan:
    """The run's --out as the run finds it (run.saved.held_items; ``folder``: RunRequest.out_folder's, a sweep's
    --out refused whole there): a folder it refuses is its error (a sweep's: the model's row), a --resume's refusal
    too (of a run of other options: resume.refusal, the resume's own rule; of a folder that does not exist);
    --resume: the items of ``plan`` it keeps left out (a grown shard's: those still in it; a --until-settled run's:
    its looks counted from the rule's first item, the items left as the resume scores them), each saved line judged
    by the resume's own rule (saved.kept_lines: one edited, damaged or saved twice with other content is scored
    again), against the dry plan's items (no model loaded)."""
    if folder is None or model.problem:
        return model
    from abricot_local.run.resume import recorded_manifest, starts_there
    from abricot_local.run.saved import as_recorded, held_items, holds_no_run

    sweep = request.sweep  # a sweep's model with no folder yet starts; a finished one is complete
    resume = request.resume and (not sweep or folder.is_dir())  # (run.session.sweep)
    judged = None if sweep and (folder / RESULTS).exists() else plan
    done = held_items(folder, resume=resume, runs=plan.runs, chat=plan.task_options.chat_template, plan=judged)
    if resume and notify and holds_no_run(folder):
        notify(starts_there(folder))
    if not done:
        return model
    left = _held(plan.runs, done)
    if request.settle.on and resume and plan.model is not None and (folder / RESULTS).is_file():
        from abricot_local.run.settle import finished

        recorded = recorded_manifest(folder)  # a run stopped where it settled, as this one would: nothing scored
        if recorded is not None and finished(folder, as_recorded(plan, recorded)) is not None:
            return replace(model, tasks=tuple(_less(t, t.items, model.speed, left.get(t.task, 0))
                                              for t in model.tasks))
    return replace(model, tasks=tuple(_less(t, left.get(t.task, 0), model.speed) for t in model.tasks))


def _held(runs, done: dict[str, set]) -> dict[str, int]:
    """Per task run, how many of its items the folder holds (``done``: ids per task, saved.kept_ids)."""
    return {r.task.key: len(done.get(r.task.key, set()) & {it.id for it in r.items}) for r in runs}


def model_cost(plan, *, calibrate: bool = False, with_memory: bool = True, notify=None) -> ModelPlan:
    """The cost of a dry plan (plan.py) of one model: its work counted with the model's own tokenizer
    (a vocabulary-only load) when its file is here, else with another quant's of the same model (an entry of the
    same base in the registry it was located in, here), else estimated from the text; the download, the memory,
    the speed; a model that could not be located (``plan.problem``), its row; a finished run's model taken as
    recorded, its file not here (the plan's ``taken``: the run loads and scores nothing), its tasks' items, nothing
    read, counted or loaded (:func:`_in_folder` leaves out the items its folder holds, as for a model here)."""
    located, ref, opts = plan.located, plan.model, plan.backend_options
    if plan.problem:
        return ModelPlan(located.name, located.name, plan.backend, problem=plan.problem)
    if plan.taken:
        return ModelPlan(located.name, located.label, plan.backend, recorded=plan.taken,
                         tasks=tuple(TaskPlan(t.task.key, len(t.items), t.available or len(t.items), problem=t.problem,
                                              notes=t.notes) for t in plan.runs))
    spec = located.spec or (ref.spec if ref else None)
    # a registry model to be downloaded: another quant of it that is here, found in the registry it was located in
    sibling = sibling_here(spec, located.registry) if located.pending is not None and located.registry else None
    cls, reads = backend_class(plan.backend), reads_model_file(plan.backend)
    here = ref is not None and (ref.path is not None or not reads)
    chat = plan.task_options.chat_template
    if sibling is not None and reads and not here:  # costed by that quant's file
        facts, plans, fit, estimated = _from_sibling(sibling, spec, plan, cls, chat, notify, with_memory)
    else:
        family = spec.tokenizer if spec else ""
        facts = None if not reads else gguf_facts(ref.path) if here else \
            _guess_facts(spec, located.name, family)
        plans = [_task_plan(t, None, opts, family, chat, notify, window=opts.context_window)
                 for t in plan.runs] if not here \
            else counted(ref, plan.backend, opts, plan.runs, chat, notify)
        fit, estimated = _memory(ref if here else None, spec, cls, opts) if with_memory else (None, "")
    speed, note = _speed(ref if here else None, cls, opts, facts, calibrate, spec.sha256_for(0) if spec else None,
                         notify)
    plans = [replace(p, seconds=speed.seconds(p.work)) if speed and p.work else p for p in plans]
    return ModelPlan(located.name, located.label, plan.backend, str(ref.path) if here and ref.path else None, facts,
                     located.pending, fit, estimated, speed, note, tuple(plans),
                     refused="" if plan.force else memory.refusal(fit))  # the run's check_memory, unless --force


def _from_sibling(sibling, spec: ModelSpec, plan, cls, chat: bool, notify, with_memory: bool):
    """A model not here, costed by another quant of it that is (models.sources.sibling_here): that file's header
    gives the shape (this entry's own size kept), its tokenizer the tokens (not exact: another conversion may
    tokenize otherwise), its header the KV cache."""
    other, path = sibling
    opts, size = plan.backend_options, spec.approx_bytes
    head = gguf_facts(path)
    basis = f"the {HEADER} of {other.name}, another quant of {spec.base} that is here"
    facts = None if head is None else replace(head, bytes=size or head.bytes, basis=basis)
    ref = ModelRef(other.name, other.source, plan.backend, other.name, spec=other, path=path)
    plans = [replace(p, work=replace(p.work, exact=False, basis=f"the tokenizer of {other.name} (the same model)"))
             if p.work else p for p in counted(ref, plan.backend, opts, plan.runs, chat, notify)]
    pre = cls.preflight(path, opts) if with_memory and size else None
    fit = None if pre is None else pre.fit(size)
    return facts, plans, fit, f"its KV cache from the {HEADER} of {other.name}" if fit else ""


def model_speed(ref: ModelRef, kind: str, opts) -> tuple[Speed | None, str]:
    """The speed of a model on this machine (its file here) as a plan gives it: its calibration, else
    one scaled from the nearest calibrated model; the note when there is none (`kld --dry-run`'s)."""
    cls = backend_class(kind)
    facts = gguf_facts(ref.path) if reads_model_file(kind) and ref.path else None
    return _speed(ref, cls, opts, facts, False, None)


def _guess_facts(spec: ModelSpec | None, name: str, family: str) -> ModelFacts | None:
    params = parse_params(spec.params if spec else name)
    if params is None:
        return None
    size = f"{spec.approx_bytes / 1e9:.2f} GB" if spec and spec.approx_bytes else "size unknown"
    basis = f"its registry entry ({spec.params}, {size})" if spec else \
        f"the parameters its name gives ({name})"
    return estimated_facts(params, spec.approx_bytes if spec else None, ratio(family).n_vocab, basis)


def counted(ref: ModelRef, kind: str, opts, runs, chat: bool, notify=None) -> list[TaskPlan]:
    """Every task's work with the model's own tokenizer (a vocabulary-only load) or the
    synthetic backend itself (`kld --dry-run` counts its passes' items so too)."""
    reads = reads_model_file(kind)  # (--verbose shows the log of the run's own load, not this one)
    be = open_backend(kind, str(ref.path) if reads else ref.label,
                      replace(opts, vocab_only=True, verbose=False) if reads else opts)
    try:
        return _counted_by(be, opts, runs, chat, notify)
    finally:
        be.close()


def _counted_by(be, opts, runs, chat: bool, notify=None) -> list[TaskPlan]:
    """Every task's work with an open backend's own schedule (the run's: what it counts here,
    it scores without tokenizing again)."""
    from abricot_local.run.execute import apply_chat

    wrap = (lambda t: apply_chat([t], be)[0]) if chat else None
    return [_task_plan(r, be.schedule, opts, "", chat, notify, wrap=wrap) for r in runs]


def of_run(plan, backend, folder: Path | None = None, reference: str | None = None) -> DryRun:
    """The cost of a plan about to be executed (plan.py's Plan, its model open as ``backend``): its own
    items counted with the loaded model's tokenizer, the speed; no other load, no item built again (`run`'s
    first lines). ``folder`` (a --resume): the items it holds are left out, the work and time of those left
    in proportion. ``reference``: a --until-settled ladder's, the plan a rung's (its looks and expected stop
    against it, as --dry-run gives them)."""
    from abricot_local.run.saved import kept_ids

    ref, opts, cls = plan.model, plan.backend_options, backend_class(plan.backend)
    plans = _counted_by(backend, opts, plan.runs, plan.task_options.chat_template)
    facts = gguf_facts(ref.path) if reads_model_file(plan.backend) and ref.path else None
    speed, note = _speed(ref, cls, opts, facts, False, None)
    plans = [replace(p, seconds=speed.seconds(p.work)) if speed and p.work else p for p in plans]
    held = _held(plan.runs, kept_ids(folder, plan.runs, chat=plan.task_options.chat_template)) \
        if folder is not None and folder.is_dir() else {}  # a --resume's: what it keeps (the dry run's rule)
    plans = [_less(p, held.get(p.task, 0), speed) for p in plans]
    model = ModelPlan(ref.as_written, ref.label, plan.backend, str(ref.path) if ref.path else None, facts,
                      None, None, "", speed, note, tuple(plans))
    return DryRun((_settled(plan, model, reference),),
                  () if plan.settle.on else _alternatives([model], plan.limit, plan.sample, plan.shard))


def of_download(plan, warn: Callable[[str], None]) -> DryRun | None:
    """The cost of a dry plan whose model is about to be downloaded (`run`'s first lines then): its registry
    entry's size, the tokens estimated, the time scaled. It only informs: whatever goes wrong making it is one
    warning (None), and the download goes on."""
    try:
        return DryRun((model_cost(plan, with_memory=False),), ())
    except AbricotError as err:  # in its own words, its options left for the door to write
        warn(f"plan: not made before the download: {err.raw()}")
        return None
    except Exception as err:  # noqa: BLE001 - a fault in the plan must not stop the run it describes
        warn(f"plan: not made before the download ({type(err).__name__}: {err})")
        return None


def _settled(plan, model: ModelPlan, reference: str | None = None) -> ModelPlan:
    """--until-settled: each task's looks and expected stop (run/settle.py), and each verdict its plan's last look
    cannot show within the margin (:func:`_reach`); ``reference``: a ladder's (its rungs' verdicts are against it;
    it waits for none)."""
    if not plan.settle.on or model.problem or model.recorded or (reference is not None and model.model == reference):
        return model
    from abricot_local.record.schema import DataFile
    from abricot_local.run.settle import Pairs, costed, rule_of

    pairs = Pairs(reference, Path(), 0) if reference is not None else None
    runs = tuple(r for r in plan.runs if not r.problem)  # the data hashed as settle.costed hashes it (remembered)
    data = plan.data or {r.task.key: tuple(DataFile(path=str(f.path), sha256=f.sha256) for f in r.task.data_files())
                         for r in runs}
    held = replace(plan, runs=runs, data=data)
    return _reach(rule_of(held, pairs), costed(held, model, pairs))


def _reach(rule, model: ModelPlan) -> ModelPlan:
    """``model`` with each task's verdicts its plan cannot settle by its last look, said (settled.plan_reach, the
    rule the run's advice follows: settled.Reach): the look its rule could first show each within the margin, however
    the answers fall, past that look; with its figure, the bound that could (``--max-items``), or a wider margin."""
    from abricot_local.analysis.settled import plan_reach

    tasks, last = [], "the plan's last look"
    for t in model.tasks:
        r = rule.rules.get(t.task)
        far = [(q.name, plan_reach(r.state, q)) for q in r.state.questions] if r is not None and t.looks else []
        tasks.append(replace(t, reach=tuple(f"{q}: {f.words(last)}" for q, f in far if f is not None)))
    return replace(model, tasks=tuple(tasks))


def _task_plan(run, schedule, opts, family: str, chat: bool, notify=None, wrap=None, window=None) -> TaskPlan:
    """One task's work (``run``: a plan.TaskRun): counted with ``schedule`` (the model's; ``wrap``: its chat
    template applied first), else (None) estimated from the text, each prompt against ``window`` (the context the
    backend will allocate: its options' ``context_window``, as a vocabulary-only load's schedule judges it)."""
    name = run.task.key
    available = run.available or len(run.items)
    if run.problem:
        return TaskPlan(name, 0, 0, problem=run.problem, notes=run.notes)
    if schedule is not None:
        basis, is_exact = "the model's tokenizer", True
        run = wrap(run) if wrap else run
    else:
        r = ratio(family, run.task)
        tokenize = text_tokenizer(r.chars_per_token)
        schedule = lambda req: make_schedule(req, tokenize, window or opts.n_ctx, opts.n_ctx)  # noqa: E731
        basis, is_exact = r.basis + (" (chat template not counted)" if chat else ""), False
    try:
        work = count_work(run.items, schedule, opts, exact=is_exact, basis=basis,
                          progress=counting_progress(name, len(run.items), notify))
    except AbricotError as err:  # a prompt over n_ctx: the run would stop there (at its first such item)
        err = _first_refused(run.items, schedule) or err
        return TaskPlan(name, len(run.items), available,
                        problem=err.raw() if is_exact else f"may not fit (estimated): {err.raw()}", notes=run.notes)
    return TaskPlan(name, len(run.items), available, work, notes=run.notes)


def _first_refused(items, schedule) -> AbricotError | None:
    """The error of the first of ``items`` whose schedule fails, in the run's order (execute.prepared schedules every
    item so before it scores any): the item a run stops at. count_work meets them in the scoring order, another."""
    for item in items:
        try:
            schedule(item.request())
        except AbricotError as err:
            return err
    return None


def _memory(ref: ModelRef | None, spec: ModelSpec | None, cls, opts) -> tuple[Fit | None, str]:
    """The model's weights + KV cache against RAM (+ VRAM, + the RPC servers': asked here); before its file is
    here, estimated from its registry entry (and what from)."""
    if ref is not None and ref.path is not None:
        facts = cls.preflight(ref.path, opts)
        return (None if facts is None else facts.fit(model_bytes(ref.path))), ""
    size = spec.approx_bytes if spec else None
    if not size:
        return None, ""
    basis = (f"its KV cache estimated from its {spec.params} parameters (within 2x)" if spec.param_count
             else "its KV cache estimated from the file size")
    return memory.fit(size, memory.kv_estimate(spec.param_count, size, opts.context_window)), basis


def _speed(ref: ModelRef | None, cls, opts, facts, calibrate: bool, pinned: str | None,
           notify=None) -> tuple[Speed | None, str]:
    """The speed: this model's calibration (its file here, or the registry's pinned SHA-256),
    else one scaled from the nearest calibrated model; with ``calibrate``, a model here is
    measured first."""
    settings = cls.speed_settings(opts)
    if settings is None:
        return None, "this backend has no calibration"
    settings = json.loads(json.dumps(settings))
    sha = ref.sha256 or (None if reads_model_file(ref.backend) else calibration.synthetic_key(ref.label)) if ref else pinned
    note = ""
    if calibrate and ref is not None:
        if notify:
            notify(f"calibrating {ref.label} on this machine (its load is timed too) ...")
        full = ref if ref.sha256 or not reads_model_file(ref.backend) else \
            replace(ref, sha256=hashing.file_digest(ref.path).sha256)  # the calibration's key: its SHA-256
        cal = calibration.calibrate(full, opts, settings, facts)
        sha, note = cal.sha256, f"calibrated now ({calibration.cache_file()})" + calibration.busy()
    elif calibrate:
        note = "not calibrated: the model is not on this machine (a dry run downloads nothing)"
    speed = calibration.speed_for(sha, settings, facts)
    note = note or ("" if speed else NO_CALIBRATION)
    return speed, "; ".join([*([note] if note else []), *calibration.read().notes])  # entries ignored, named


def _alternatives(models: list[ModelPlan], limit, sample, shard) -> tuple[Alternative, ...]:
    """What other item selections would cost: --sample 100/400 (or every item, when the run
    takes a part), and each part of --shard 1/2, 1/4."""
    tasks = [t for m in models for t in m.tasks if t.work]
    if not tasks:
        return ()
    choices: list[tuple[str, Callable[[TaskPlan], int]]] = []
    if limit is None and sample is None and shard is None:
        choices += [(opt("sample", n), lambda t, n=n: min(n, t.available)) for n in (100, 400)
                    if any(t.available > n for t in tasks)]
    elif any(t.items < t.available for t in tasks):
        choices.append(("every item", lambda t: t.available))
    if shard is None:
        choices += [(f"{opt('shard', f'K/{k}')} (each part)", lambda t, k=k: -(-t.items // k)) for k in (2, 4)
                    if any(t.items >= k for t in tasks)]
    out = []
    for option, items in choices:
        secs = [None if m.seconds is None or m.recorded else  # (taken as recorded: another selection needs its file)
                m.speed.load + sum(m.speed.seconds(with_items(t.work, items(t))) for t in m.tasks if t.work)
                for m in models]
        out.append(Alternative(option, None if None in secs else sum(secs)))
    return tuple(out)


def _less(t: TaskPlan, skipped: int, speed: Speed | None, saved: int | None = None) -> TaskPlan:
    """``t`` less ``skipped`` of its items, ``saved`` (default: those) said as saved (a run --until-settled that
    stopped where it settled: every item skipped, those it scored saved)."""
    if not skipped:
        return t
    saved = skipped if saved is None else saved
    work = replace(with_items(t.work, t.items - skipped), exact=False) if t.work else None
    return replace(t, items=t.items - skipped, saved=saved, work=work,
                   seconds=speed.seconds(work) if speed and work else None)
