"""The cost of a run's plan before anything runs (``run --dry-run``, and the lines every real run
prints first): per model and task the items and the tokens to evaluate, the download, the memory
needed against what is available, and the predicted time on this machine. The plan is plan.py's, the one a run
executes: ``--dry-run`` makes it ``dry`` (nothing fetched), a run costs its own once its model is loaded
(:func:`of_run`). Each model's cost is one pipeline: its plan (plan.make_plan), its tasks' work (dry_count.py),
its facts, memory and speed (machine_cost.py), a --until-settled plan's looks (settle.costed), what its --out
holds (saved.held_items), then the other selections' cost (:func:`_alternatives`).

Nothing is written and nothing is downloaded: a model not on this machine is planned from
its registry entry (size, parameters, tokenizer family); a file here has its header and its
vocabulary read (a vocabulary-only load: no weights), its SHA-256 taken only if remembered. A prompt is judged
against the context the backend will allocate (its options' ``context_window``: llama.cpp rounds n_ctx up), in the run's words.
Task data that is not here is not fetched: that task is planned as "no data here". Only
``calibrate`` loads a model here, times it and writes the result into the user cache.
Names no task and no backend. What it makes (DryRun, ModelPlan, TaskPlan) is dry_plan.py's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from abricot_local import memory
from abricot_local.backends import reads_model_file
from abricot_local.errors import AbricotError, opt
from abricot_local.models.ref import ModelRef
from abricot_local.models.sources import sibling_here
from abricot_local.run.cost import Speed, with_items
from abricot_local.run.dry_count import counted, counted_by, estimated
from abricot_local.run.dry_plan import Alternative, DryRun, ModelPlan, TaskPlan
from abricot_local.run.machine_cost import machine_cost


def plan_of(request, *, calibrate: bool = False, with_memory: bool = True,
            notify: Callable[[str], None] | None = None) -> DryRun:
    """The cost of each model's plan in ``request`` (a run.request.RunRequest), as `run --dry-run` and
    ``abricot_local.plan`` ask for it: each plan ``dry`` (plan.py: nothing fetched or downloaded; a task
    whose data is not here kept with its problem), costed (:func:`model_cost`), its --until-settled looks
    (settle.costed: a ladder's rungs against its reference), then less what its --out holds (saved.held_items, the
    run's own rule: a folder it refuses is its error; a --resume's items kept left out, a --until-settled run
    stopped where it settled: nothing scored). In a sweep, a model that cannot be planned is reported in its row,
    else its error is raised (a task's error is the command's). --limit's caution is said first (``notify``).
    Nothing is written on the way: files hashed are remembered in this process only."""
    from abricot_local.hashing import unwritten
    from abricot_local.run.plan import make_plan
    from abricot_local.run.saved import held_items
    from abricot_local.run.settle import costed

    if request.caution and notify:
        notify(request.caution)
    sweep = request.sweep
    out = []
    with unwritten():
        for name in request.models:
            folder = request.out_folder(name)  # a sweep's --out refused whole where the run refuses it
            p = make_plan(request, name, dry=True, notify=notify, keep_going=sweep)
            try:
                model = costed(p, model_cost(p, calibrate=calibrate, with_memory=with_memory, notify=notify),
                               request.reference)  # (a --until-settled ladder's reference, else None)
                if folder is not None and not model.problem:
                    held = held_items(folder, p, resume=request.resume, sweep=sweep)
                    if held.starts and notify:
                        notify(held.starts)
                    model = _left(model, held.saved, held.stopped)
                out.append(model)
            except AbricotError as err:
                if not sweep:
                    raise
                out.append(ModelPlan(name, name, p.backend, problem=err.raw().splitlines()[0]))
    return DryRun(tuple(out), () if request.settle.on else _alternatives(out, request.limit, request.sample,
                                                                         request.shard))


def model_cost(plan, *, calibrate: bool = False, with_memory: bool = True, notify=None) -> ModelPlan:
    """The cost of a dry plan (plan.py) of one model: its work counted with the model's own tokenizer
    (a vocabulary-only load) when its file is here, else with another quant's of the same model (an entry of the
    same base in the registry it was located in, here: not exact, another conversion may tokenize otherwise), else
    estimated from the text; the download; the facts, memory and speed (machine_cost.py); a model that could not
    be located (``plan.problem``), its row; a finished run's model taken as recorded, its file not here (the plan's
    ``taken``: the run loads and scores nothing), its tasks' items, nothing read, counted or loaded (what its folder
    holds is left out later, as for a model here)."""
    located, ref, opts, kind = plan.located, plan.model, plan.backend_options, plan.backend
    if plan.problem:
        return ModelPlan(located.name, located.name, kind, problem=plan.problem)
    if plan.taken:
        return ModelPlan(located.name, located.label, kind, recorded=plan.taken,
                         tasks=tuple(TaskPlan(t.task.key, len(t.items), t.available or len(t.items), problem=t.problem,
                                              notes=t.notes) for t in plan.runs))
    spec = located.spec or (ref.spec if ref else None)
    reads, chat = reads_model_file(kind), plan.task_options.chat_template
    here = ref is not None and (ref.path is not None or not reads)
    # a registry model to be downloaded: another quant of it that is here, found in the registry it was located in
    sibling = sibling_here(spec, located.registry) if reads and not here and located.pending is not None and \
        located.registry else None
    if here:
        tasks = counted(ref, kind, opts, plan.runs, chat, notify)
    elif sibling is not None:  # counted by that quant's tokenizer
        other, path = sibling
        by = ModelRef(other.name, other.source, kind, other.name, spec=other, path=path)
        tasks = [replace(p, work=replace(p.work, exact=False, basis=f"the tokenizer of {other.name} (the same model)"))
                 if p.work else p for p in counted(by, kind, opts, plan.runs, chat, notify)]
    else:
        tasks = estimated(plan.runs, opts, spec.tokenizer if spec else "", chat, notify)
    cost = machine_cost(kind, opts, ref=ref if here else None, spec=spec, name=located.name, sibling=sibling,
                        with_memory=with_memory, calibrate=calibrate, notify=notify)
    return ModelPlan(located.name, located.label, kind, str(ref.path) if here and ref.path else None, cost.facts,
                     located.pending, cost.memory, cost.estimated, cost.speed, cost.note, _timed(tasks, cost.speed),
                     refused="" if plan.force else memory.refusal(cost.memory))  # the run's check_memory, unless --force


def of_run(plan, backend, folder: Path | None = None, reference: str | None = None) -> DryRun:
    """The cost of a plan about to be executed (plan.py's Plan, its model open as ``backend``): its own
    items counted with the loaded model's tokenizer, the speed; no other load, no item built again (`run`'s
    first lines). ``folder`` (a --resume): the items it holds are left out (saved.kept_counts: the dry run's rule),
    the work and time of those left in proportion. ``reference``: a --until-settled ladder's, the plan a rung's (its
    looks and expected stop against it, as --dry-run gives them)."""
    from abricot_local.run.saved import kept_counts
    from abricot_local.run.settle import costed

    ref, opts, chat = plan.model, plan.backend_options, plan.task_options.chat_template
    tasks = counted_by(backend, opts, plan.runs, chat)
    cost = machine_cost(plan.backend, opts, ref=ref, with_memory=False)
    held = kept_counts(folder, plan.runs, chat=chat) if folder is not None and folder.is_dir() else {}
    tasks = [_less(t, held.get(t.task, 0), cost.speed) for t in _timed(tasks, cost.speed)]
    model = ModelPlan(ref.as_written, ref.label, plan.backend, str(ref.path) if ref.path else None, cost.facts,
                      speed=cost.speed, speed_note=cost.note, tasks=tuple(tasks))
    return DryRun((costed(plan, model, reference),),
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


def _timed(tasks: list[TaskPlan], speed: Speed | None) -> tuple[TaskPlan, ...]:
    """Each task's seconds at ``speed`` (its work counted)."""
    return tuple(replace(t, seconds=speed.seconds(t.work)) if speed and t.work else t for t in tasks)


def _left(model: ModelPlan, saved, stopped: bool) -> ModelPlan:
    """``model`` less the items its --out holds (``saved``: per task, saved.Held's); ``stopped``: a --until-settled
    run there stopped where it settled, this one (every item left out, those it scored said as saved)."""
    if not saved:
        return model
    return replace(model, tasks=tuple(_less(t, t.items, model.speed, saved.get(t.task, 0)) if stopped else
                                      _less(t, saved.get(t.task, 0), model.speed) for t in model.tasks))


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
