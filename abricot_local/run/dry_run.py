"""The cost of a run's plan before anything runs (``run --dry-run``, and the lines every real run
prints first): per model and task the items and the tokens to evaluate, the download, the memory
needed against what is available, and the predicted time on this machine. The plan is plan.py's, the one a run
executes: ``--dry-run`` makes it ``dry`` (nothing fetched), a run costs its own once its model is loaded
(:func:`of_run`). Each model's cost is one pipeline: its plan (plan.make_plan), its tasks' work (dry_count.py),
its facts, memory and speed (machine_cost.py), a --until-settled plan's looks (:func:`_looks`: by settle.rule_of), what its --out
holds (saved.held_items), then the other selections' cost (:func:`_dry_run`).

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
from abricot_local.run.cost import Speed, Work
from abricot_local.run.dry_count import counted, counted_by, estimated
from abricot_local.run.dry_plan import Alternative, DryRun, ModelPlan, TaskPlan
from abricot_local.run.machine_cost import MachineCost, machine_cost
from abricot_local.run.kept import Held, held
from abricot_local.run.saved import held_items


def plan_of(request, *, calibrate: bool = False, with_memory: bool = True,
            notify: Callable[[str], None] | None = None) -> DryRun:
    """The cost of each model's plan in ``request`` (a run.request.RunRequest), as `run --dry-run` and
    ``abricot_local.plan`` ask for it: each plan ``dry`` (plan.py: nothing fetched or downloaded; a task
    whose data is not here kept with its problem), costed (:func:`model_cost`), then as a run's (:func:`_left`: its
    --until-settled looks, less what its --out holds: saved.held_items, the run's own rule: a folder it refuses is
    its error; a --resume's items kept left out, a --until-settled run stopped where it settled: nothing scored). In
    a sweep, a model that cannot be planned is reported in its row, else its error is raised (a task's error is the
    command's). --limit's caution is said first (``notify``). Nothing is written on the way: files hashed are
    remembered in this process only."""
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
                out.append(_left(p, model_cost(p, calibrate=calibrate, with_memory=with_memory, notify=notify),
                                 request.reference,  # (a --until-settled ladder's reference, else None)
                                 lambda p=p, folder=folder: _found(folder, p, request, notify)))
            except AbricotError as err:
                if not sweep:
                    raise
                out.append(ModelPlan(name, name, p.backend, problem=err.raw().splitlines()[0]))
    return _dry_run(out, request)


def _found(folder: Path | None, plan, request, notify) -> Held:
    """What ``folder`` (``request``'s --out for ``plan``'s model) holds as the dry run finds it (saved.held_items:
    the run's refusals first), where a --resume starts said (``notify``)."""
    held = held_items(folder, plan, resume=request.resume, sweep=request.sweep) if folder is not None else Held()
    if held.starts and notify:
        notify(held.starts)
    return held


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
    first lines), then as the dry run's (:func:`_left`). ``folder`` (a --resume): the items it holds are left out
    (kept.held: the dry run's reading), the work and time of those left in proportion. ``reference``: a
    --until-settled ladder's, the plan a rung's (its looks and expected stop against it, as --dry-run gives them)."""
    ref, opts = plan.model, plan.backend_options
    tasks = counted_by(backend, opts, plan.runs, plan.task_options.chat_template)
    cost = machine_cost(plan.backend, opts, ref=ref, with_memory=False)
    model = _model_plan(ref.as_written, ref.label, plan.backend, ref, tasks, cost)
    return _dry_run([_left(plan, model, reference, lambda: held(folder, plan))], plan)


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


def _model_plan(name: str, label: str, kind: str, ref: ModelRef | None, tasks, cost: MachineCost, **more) -> ModelPlan:
    """A model's plan from its tasks' work and its facts, memory and speed (``ref``: its model here): each task's
    seconds at its speed (its work counted)."""
    speed = cost.speed
    return ModelPlan(name, label, kind, str(ref.path) if ref is not None and ref.path else None, cost.facts,
                     memory=cost.memory, memory_estimated=cost.estimated, speed=speed, speed_note=cost.note,
                     tasks=tuple(replace(t, seconds=speed.seconds(t.work)) if speed and t.work else t for t in tasks),
                     **more)


def _left(plan, model: ModelPlan, reference: str | None, found: Callable[[], Held]) -> ModelPlan:
    """``model`` (costed) as the run of ``plan`` would find it: its ``--until-settled`` looks (:func:`_looks`;
    ``reference``: a ladder's), then less the items its folder holds (``found()``: kept.Held, read once the looks
    are made; none for a model not planned); a --until-settled run there stopped where it settled, this one: every
    item left out, those it scored said as saved."""
    model = _looks(plan, model, reference)
    if model.problem:
        return model
    kept = found()
    if not kept.saved:
        return model
    saved = kept.saved
    return replace(model, tasks=tuple(_less(t, t.items, model.speed, saved.get(t.task, 0)) if kept.stopped else
                                      _less(t, saved.get(t.task, 0), model.speed) for t in model.tasks))


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


def _looks(plan, model: ModelPlan, reference: str | None) -> ModelPlan:
    """``model`` (the dry_plan.ModelPlan of ``plan``) with each ``--until-settled`` task's looks (items, the seconds
    of its first n items: its work in proportion), where its rule would stop if each published value were true
    (sequential.expected_stop: question, items, verdict) and each verdict its last look cannot show within the
    margin (settled.plan_reach, the rule the run's advice follows: the look its rule could first show it, however
    the answers fall, past that look; with its figure, the bound that could, or a wider margin), by the plan's one
    rule (settle.rule_of: nothing to settle is refused, as the run refuses it; the data hashed as the run hashes
    it, a task's data_files: small, hashed once, so a row on data not the release is not waited for, as in the run:
    tasks/release.py). ``reference``: a ladder's (its rungs' verdicts are against it; it waits for none). A plan
    not ``--until-settled``, or a model not planned (its problem, taken as recorded), as it is."""
    if not plan.settle.on or model.problem or model.recorded or (reference is not None and model.model == reference):
        return model
    from abricot_local.analysis import sequential as sq  # (scipy: loaded only for a --until-settled plan)
    from abricot_local.analysis.settled import plan_reach
    from abricot_local.record.schema import DataFile
    from abricot_local.run.settle import Pairs, rule_of

    runs = tuple(r for r in plan.runs if not r.problem)
    data = plan.data or {r.task.key: tuple(DataFile(path=str(f.path), sha256=f.sha256) for f in r.task.data_files())
                         for r in runs}
    rule = rule_of(replace(plan, runs=runs, data=data), Pairs(reference, Path(), 0) if reference is not None else None)
    tasks, last = [], "the plan's last look"
    for t in model.tasks:
        r = rule.rules.get(t.task)
        if r is None or t.work is None:
            tasks.append(t)
            continue
        looks = tuple((n, model.speed.seconds(_with_items(t.work, n)) if model.speed else None) for n in r.state.planned)
        stops = [(q.name, sq.expected_stop(r.state, q)) for q in r.state.questions]
        far = [(q.name, plan_reach(r.state, q)) for q in r.state.questions] if looks else []
        tasks.append(replace(t, looks=looks, expected=tuple((q, *stop) for q, stop in stops if stop is not None),
                             reach=tuple(f"{q}: {f.words(last)}" for q, f in far if f is not None)))
    return replace(model, tasks=tuple(tasks))


def _with_items(work: Work, items: int) -> Work:
    """``work`` for ``items`` items of the same kind, in proportion (alternatives to a run)."""
    f = items / work.items if work.items else 0.0
    return replace(work, items=items, tokens=round(work.tokens * f), calls=round(work.calls * f),
                   rows=round(work.rows * f), positions=round(work.positions * f))
