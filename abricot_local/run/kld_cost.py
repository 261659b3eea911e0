"""`kld --dry-run`: the cost of `kld`'s plan (run/kld.py's :class:`~abricot_local.run.kld.Ladder`) before
any model loads, as `run --dry-run` costs a run (dry_count.py, machine_cost.py).

The plan is the one `kld` executes: REF's items rebuilt, each rung's items, the rungs in reference passes
that fit in memory (each pass's models: weights, KV caches and output rows). Per pass and task, the work is
counted exactly with REF's tokenizer (a vocabulary-only load) through the run's own loop, then paired
(cost.paired: every model of the pass decodes the same calls with a row at every token): the reference's
seconds and each rung's from its own speed (its calibration on this machine, else scaled from the nearest
calibrated model), and the rows compared (tokens x rungs) at the rate :func:`~abricot_local.backends.kld.
compare_seconds` measures here now (the Reducer on the run's threads, random rows of the vocabulary's
length: a fraction of a second). Loads: the reference once, each rung once. The models' files are not
hashed (their recorded SHA-256 names their calibrations; `kld` checks each before it loads it); nothing is
written. Names no task and no backend.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from abricot_local.memory import Fit
from abricot_local.run.cost import Speed, paired
from abricot_local.run.dry_plan import TaskPlan


@dataclass(frozen=True)
class ModelCost:
    """One model of the plan: its label, quant, file and speed (None: no calibration, ``note`` says why)."""

    label: str
    quant: str
    path: str | None
    speed: Speed | None
    note: str = ""
    run: str = ""  # the run folder it is measured for ("" for the reference)


@dataclass(frozen=True)
class PassCost:
    """One reference pass: its rungs (indices into KldCost.rungs), per task the items and the paired work
    (one model's: each model of the pass decodes the same), the seconds of each model (the reference
    first), of the rows compared and of loading the pass's rungs; the memory it needs."""

    rungs: tuple[int, ...]
    tasks: tuple[TaskPlan, ...]  # each task's seconds: every model's and the rows compared
    models: tuple[float | None, ...]
    compare: float | None
    per_row: float | None  # seconds to compare one row with all the pass's rungs (measured now)
    load: float | None
    memory: Fit | None
    rows_bytes: int = 0  # the pass's output rows (in memory.weights)

    @property
    def tokens(self) -> int:
        return sum(t.work.tokens for t in self.tasks if t.work)

    @property
    def seconds(self) -> float | None:
        parts = [*self.models, self.compare, self.load]
        return None if None in parts else sum(parts)


@dataclass(frozen=True)
class KldCost:
    reference: str  # REF's folder
    model: ModelCost
    rungs: tuple[ModelCost, ...]
    passes: tuple[PassCost, ...]
    threads: int

    @property
    def seconds(self) -> float | None:
        """The whole command: the reference's load and every pass (None without every model's speed)."""
        parts = [None if self.model.speed is None else self.model.speed.load, *(p.seconds for p in self.passes)]
        return None if None in parts else sum(parts)

    @property
    def error(self) -> float:
        """The widest error bar of a scaled speed in the plan (0: every model calibrated)."""
        return max((m.speed.error for m in (self.model, *self.rungs) if m.speed and not m.speed.calibrated),
                   default=0.0)

    def to_json(self) -> dict:
        """The plan as ``kld --dry-run --json`` prints it."""
        def model(m: ModelCost) -> dict:
            return {"label": m.label, "quant": m.quant, "path": m.path, "run": m.run or None,
                    "speed": None if m.speed is None else m.speed.to_json(), "speed_note": m.note or None}

        def one(p: PassCost) -> dict:
            f = p.memory
            return {"runs": [self.rungs[k].run for k in p.rungs], "seconds": p.seconds,
                    "model_seconds": list(p.models), "compare_seconds": p.compare, "compare_row_s": p.per_row,
                    "load_seconds": p.load,
                    "tasks": [{"task": t.task, "items": t.items, "tokens": t.work.tokens if t.work else None,
                               "decode_calls": t.work.calls if t.work else None,
                               "rows_compared": t.work.tokens * len(p.rungs) if t.work else None,
                               "seconds": t.seconds} for t in p.tasks],
                    "memory": None if f is None else {**f.to_json(), "weights_bytes": f.weights - p.rows_bytes,
                                                      "rows_bytes": p.rows_bytes}}

        return {"kld_dry_run_version": 1, "reference": self.reference, "seconds": self.seconds,
                "threads": self.threads, "model": model(self.model), "rungs": [model(m) for m in self.rungs],
                "passes": [one(p) for p in self.passes]}


def kld_cost(reference, runs: Sequence, *, data_dir: str | None = None, backend_values: dict | None = None,
             limit: int | None = None, force: bool = False, notify: Callable[[str], None] | None = None,
             data=()) -> KldCost:
    """What ``kld_runs`` with the same arguments would do and cost (see the module's text)."""
    from abricot_local import hashing
    from abricot_local.backends.kld import compare_seconds
    from abricot_local.run.dry_count import counted
    from abricot_local.run.machine_cost import machine_cost
    from abricot_local.run.kld import ladder_of

    with hashing.unwritten():
        lad = ladder_of(reference, runs, data_dir=data_dir, backend_values=backend_values, limit=limit, force=force,
                        dry=True, data=data)
    p, kind = lad.plan, lad.plan.backend
    opts = p.backend_options

    def cost(ref, quant: str, run: str = "") -> ModelCost:
        m = machine_cost(kind, opts, ref=ref, with_memory=False)
        return ModelCost(ref.label, quant, str(ref.path) if ref.path else None, m.speed, m.note, run)

    model = cost(lad.model, lad.model.quant)
    rungs = tuple(cost(r.model, r.quant, str(r.run.path)) for r in lad.rungs)
    chosen = []  # per pass, REF's task runs cut to the pass's items: counted with one load
    for g in lad.groups:
        items = dict(lad.rungs[g[0]].items)
        chosen.append([replace(t, items=tuple(it for it in t.items if it.id in ids))
                       for t in p.runs if (ids := set(items.get(t.task.key, ())))])
    tasks_of = iter(counted(lad.model, kind, opts, [t for c in chosen for t in c], p.task_options.chat_template,
                            notify))
    n_vocab = (lad.ref.record.provenance.n_vocab or 0) if lad.ref.record.provenance else 0
    rates: dict[int, float] = {}
    passes = []
    for g, runs_ in zip(lad.groups, chosen):
        tasks = [next(tasks_of) for _ in runs_]
        if n_vocab and len(g) not in rates:
            rates[len(g)] = compare_seconds(n_vocab, len(g), lad.threads)
        passes.append(_pass(g, tasks, (model, *(rungs[i] for i in g)), rates.get(len(g)), lad.memory))
    return KldCost(str(lad.ref.path), model, rungs, tuple(passes), lad.threads)


def _pass(group, tasks: list[TaskPlan], models: Sequence[ModelCost], per_row: float | None, mem) -> PassCost:
    """A pass's cost: every model's seconds over each task's paired work, the rows compared, the rungs' loads."""
    def seconds(t: TaskPlan, m: ModelCost) -> float | None:
        return None if m.speed is None or t.work is None else m.speed.seconds(paired(t.work))

    def total(xs) -> float | None:
        xs = list(xs)
        return None if None in xs else sum(xs)

    compare = [None if per_row is None or t.work is None else t.work.tokens * per_row for t in tasks]
    tasks = [replace(t, seconds=total([*(seconds(t, m) for m in models), c])) for t, c in zip(tasks, compare)]
    return PassCost(tuple(group), tuple(tasks), tuple(total(seconds(t, m) for t in tasks) for m in models),
                    total(compare), per_row, total(None if m.speed is None else m.speed.load for m in models[1:]),
                    mem.fit(group) if mem else None, mem.rows(group) if mem else 0)
