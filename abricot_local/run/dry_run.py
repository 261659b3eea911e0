"""The cost of a run's plan before anything runs (``run --dry-run``, and the lines every real run
prints first): per model and task the items and the tokens to evaluate, the download, the memory
needed against what is available, and the predicted time on this machine. The plan is plan.py's, the one a run
executes: ``--dry-run`` makes it ``dry`` (nothing fetched), a run costs its own once its model is loaded
(:func:`of_run`). Each model's cost is one pipeline, its inputs gathered first, then put together once: its plan
(plan.make_plan), its tasks' work (dry_count.py), its facts, memory and speed (machine_cost.py), a --until-settled
plan's looks (settle.forecast: what its rule says of itself), what its --out holds (saved.held_items; a run's:
kept.held), then its tasks as the run would find them (:func:`_left`) and the other selections' cost
(:func:`_dry_run`).

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
from typing import TYPE_CHECKING, Callable, Mapping

from abricot_local import memory
from abricot_local.backends import reads_model_file
from abricot_local.errors import AbricotError, opt
from abricot_local.models.ref import ModelRef
from abricot_local.models.sources import sibling_here
from abricot_local.run.cost import Speed, Work
from abricot_local.run.dry_count import counted, counted_by, estimated
from abricot_local.run.dry_plan import Alternative, DryRun, ModelPlan, TaskPlan
from abricot_local.run.machine_cost import MachineCost, machine_cost
from abricot_local.run.kept import Held, held
from abricot_local.run.saved import held_items

if TYPE_CHECKING:
    from abricot_local.run.settle import Forecast


def plan_of(request, *, calibrate: bool = False, with_memory: bool = True,
            notify: Callable[[str], None] | None = None) -> DryRun:
    """The cost of each model's plan in ``request`` (a run.request.RunRequest), as `run --dry-run` and
    ``abricot_local.plan`` ask for it: each plan ``dry`` (plan.py: nothing fetched or downloaded; a task
    whose data is not here kept with its problem), costed (:func:`model_cost`), its --until-settled looks forecast
    (:func:`_forecast`; a ladder's against its reference), what its --out holds read (saved.held_items, the run's own
    rule: a folder it refuses is its error; where a --resume starts said), then as the run would find them
    (:func:`_left`: a --resume's items kept left out, a --until-settled run stopped where it settled: nothing
    scored). In a sweep, a model that cannot be planned is reported in its row, else its error is raised (a task's
    error is the command's). --limit's caution is said first (``notify``). Nothing is written on the way: files
    hashed are remembered in this process only."""
    from abricot_local.hashing import unwritten
    from abricot_local.run.plan import make_plan

    if request.caution and notify:
        notify(request.caution)
    sweep = request.sweep
    out = []
    with unwritten():
        for name in request.models:
            folder = request.out_folder(name)  # a sweep's --out refused whole where the run refuses it
            p = make_plan(request, name, dry=True, notify=notify, keep_going=sweep)
            try:
                model = model_cost(p, calibrate=calibrate, with_memory=with_memory, notify=notify)
                looks = _forecast(p, model, request.reference)  # (a --until-settled ladder's reference, else None)
                kept = Held()
                if folder is not None and not model.problem:
                    kept = held_items(folder, p, resume=request.resume, sweep=sweep)
                if kept.starts and notify:
                    notify(kept.starts)
                out.append(_left(model, looks, kept))
            except AbricotError as err:
                if not sweep:
                    raise
                out.append(ModelPlan(name, name, p.backend, problem=err.raw().splitlines()[0]))
    return _dry_run(out, request)


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
    return _model_plan(located.name, located.label, kind, ref if here else None, tasks, cost,
                       download=located.pending,
                       refused="" if plan.force else memory.refusal(cost.memory))  # the run's check_memory, unless --force


def of_run(plan, backend, folder: Path | None = None, reference: str | None = None) -> DryRun:
    """The cost of a plan about to be executed (plan.py's Plan, its model open as ``backend``): its own
    items counted with the loaded model's tokenizer, the speed; no other load, no item built again (`run`'s
    first lines, :func:`informing`), then as the dry run's (its --until-settled looks forecast, :func:`_left`).
    ``folder`` (a --resume): the items it holds are left out (kept.held: the dry run's reading), the work and time of
    those left in proportion. ``reference``: a --until-settled ladder's, the plan a rung's (its looks and expected
    stop against it, as --dry-run gives them)."""
    ref, opts = plan.model, plan.backend_options
    tasks = counted_by(backend, opts, plan.runs, plan.task_options.chat_template)
    cost = machine_cost(plan.backend, opts, ref=ref, with_memory=False)
    model = _model_plan(ref.as_written, ref.label, plan.backend, ref, tasks, cost)
    return _dry_run([_left(model, _forecast(plan, model, reference), held(folder, plan))], plan)


def of_download(plan, warn: Callable[[str], None]) -> DryRun | None:
    """The cost of a dry plan whose model is about to be downloaded (`run`'s first lines then): its registry
    entry's size, the tokens estimated, the time scaled. It only informs: whatever goes wrong making it is one
    warning (None), and the download goes on."""
    return informing(lambda: DryRun((model_cost(plan, with_memory=False),), ()), warn, " before the download")


def informing(make: Callable[[], DryRun], warn: Callable[[str], None], when: str = "") -> DryRun | None:
    """``make()``, a cost that only informs (the lines a run prints first: :func:`of_download`'s, :func:`of_run`'s):
    whatever goes wrong making it is one warning (``when``: the moment it was for), an AbricotError in its own words,
    its options left for the door to write, anything else with its type; None then, and the run goes on."""
    try:
        return make()
    except AbricotError as err:
        warn(f"plan: not made{when}: {err.raw()}")
    except Exception as err:  # noqa: BLE001 - a fault in the plan must not stop the run it describes
        warn(f"plan: not made{when} ({type(err).__name__}: {err})")
    return None


def _model_plan(name: str, label: str, kind: str, ref: ModelRef | None, tasks, cost: MachineCost, **more) -> ModelPlan:
    """A model's plan from its tasks' work and its facts, memory and speed (``ref``: its model here): each task's
    seconds at its speed (its work counted)."""
    speed = cost.speed
    return ModelPlan(name, label, kind, str(ref.path) if ref is not None and ref.path else None, cost.facts,
                     memory=cost.memory, memory_estimated=cost.estimated, speed=speed, speed_note=cost.note,
                     tasks=tuple(replace(t, seconds=speed.seconds(t.work)) if speed and t.work else t for t in tasks),
                     **more)


def _left(model: ModelPlan, looks: Mapping[str, Forecast], kept: Held) -> ModelPlan:
    """``model`` (costed) as its run would find it: each ``--until-settled`` task with its forecast (``looks``:
    settle.Forecast, :func:`_forecast`; a task whose work was not counted, none), each look's seconds its work's in
    proportion; less the items its folder holds (``kept``: kept.Held); a --until-settled run there stopped where it
    settled, this one: every item left out, those it scored said as saved."""
    speed, saved = model.speed, kept.saved
    tasks = []
    for t in model.tasks:
        f = looks.get(t.task) if t.work is not None else None
        if f is not None:
            t = replace(t, looks=tuple((n, speed.seconds(_with_items(t.work, n)) if speed else None) for n in f.looks),
                        expected=f.expected, reach=f.reach)
        if saved:  # (stopped where it settled: every item left, those it scored saved)
            t = _less(t, t.items, speed, saved.get(t.task, 0)) if kept.stopped else \
                _less(t, saved.get(t.task, 0), speed)
        tasks.append(t)
    return replace(model, tasks=tuple(tasks))


def _dry_run(models: list[ModelPlan], asked) -> DryRun:
    """``models``, with what other item selections would cost (``asked``: the request, or a run's plan, its
    selection; none for ``--until-settled``): --sample 100/400 (or every item, when the run takes a part), and each
    part of --shard 1/2, 1/4."""
    limit, sample, shard = asked.limit, asked.sample, asked.shard
    tasks = [t for m in models for t in m.tasks if t.work]
    if asked.settle.on or not tasks:
        return DryRun(tuple(models))
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
                m.speed.load + sum(m.speed.seconds(_with_items(t.work, items(t))) for t in m.tasks if t.work)
                for m in models]
        out.append(Alternative(option, None if None in secs else sum(secs)))
    return DryRun(tuple(models), tuple(out))


def _less(t: TaskPlan, skipped: int, speed: Speed | None, saved: int | None = None) -> TaskPlan:
    """``t`` less ``skipped`` of its items, ``saved`` (default: those) said as saved (a run --until-settled that
    stopped where it settled: every item skipped, those it scored saved)."""
    if not skipped:
        return t
    saved = skipped if saved is None else saved
    work = replace(_with_items(t.work, t.items - skipped), exact=False) if t.work else None
    return replace(t, items=t.items - skipped, saved=saved, work=work,
                   seconds=speed.seconds(work) if speed and work else None)


def _forecast(plan, model: ModelPlan, reference: str | None) -> Mapping[str, Forecast]:
    """Each ``--until-settled`` task's forecast (settle.forecast: its looks, where its rule would stop if each
    published value were true, each verdict its last look cannot show; a task whose rule has none, none) of
    ``plan``'s run, ``model`` its dry_plan.ModelPlan. ``reference``: a ladder's (its rungs' verdicts are against it;
    it waits for none). Empty for a plan not ``--until-settled`` and for a model not planned (its problem, taken as
    recorded)."""
    if not plan.settle.on or model.problem or model.recorded or (reference is not None and model.model == reference):
        return {}
    from abricot_local.run.settle import forecast  # (scipy: loaded only for a --until-settled plan)

    return forecast(plan, reference)


def _with_items(work: Work, items: int) -> Work:
    """``work`` for ``items`` items of the same kind, in proportion (alternatives to a run)."""
    f = items / work.items if work.items else 0.0
    return replace(work, items=items, tokens=round(work.tokens * f), calls=round(work.calls * f),
                   rows=round(work.rows * f), positions=round(work.positions * f))
