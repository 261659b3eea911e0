"""What a dry run's plan holds (``run --dry-run``, the API's ``plan``, the lines a run prints first): per model
its facts, download, memory fit, speed and tasks (:class:`ModelPlan`, :class:`TaskPlan`), the whole command's
alternatives, and the JSON ``run --dry-run --json`` prints. Frozen data; dry_run.py makes it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from abricot_local.errors import render
from abricot_local.memory import Fit
from abricot_local.models.sources import Pending as Download
from abricot_local.run.cost import Speed, Work
from abricot_local.run.model_facts import ModelFacts


@dataclass(frozen=True)
class TaskPlan:
    task: str
    items: int  # to score
    available: int  # in the task's data
    work: Work | None = None
    seconds: float | None = None
    problem: str = ""
    saved: int = 0  # items a resumed run's folder holds already (``items``: those left)
    looks: tuple[tuple[int, float | None], ...] = ()  # --until-settled: each look's items, their seconds
    expected: tuple[tuple[str, int, str], ...] = ()  # --until-settled: (verdict, items, kind) if published were true
    notes: tuple[str, ...] = ()  # what preparing the task did that a reader must know (the run warns them)
    reach: tuple[str, ...] = ()  # --until-settled: each verdict the last look cannot show (settled.plan_reach)


@dataclass(frozen=True)
class ModelPlan:
    model: str  # as written
    label: str
    backend: str
    path: str | None = None  # the file on this machine
    facts: ModelFacts | None = None
    download: Download | None = None
    memory: Fit | None = None
    memory_estimated: str = ""  # the file is not here: what the estimate is made from ("": its header's)
    speed: Speed | None = None
    speed_note: str = ""
    tasks: tuple[TaskPlan, ...] = ()
    problem: str = ""  # why it cannot be planned (a sweep goes on)
    refused: str = ""  # planned, but the run refuses it as planned: its memory does not fit, without force
    recorded: str = ""  # a finished run's --resume takes it as recorded, its file not here: the note (run.plan.TAKEN)

    @property
    def seconds(self) -> float | None:
        """Load and every task that could be counted (None without a speed; a model taken as recorded: 0, nothing
        loaded or scored)."""
        if self.recorded and not self.problem:
            return 0.0
        if self.speed is None or self.problem:
            return None
        return self.speed.load + sum(t.seconds or 0.0 for t in self.tasks)


@dataclass(frozen=True)
class Alternative:
    option: str  # errors.opt's sample 100, shard K/4 (a door's namer writes it: "--sample 100"), or "every item"
    seconds: float | None  # the whole command with it (per part for a shard)


@dataclass(frozen=True)
class DryRun:
    models: tuple[ModelPlan, ...]
    alternatives: tuple[Alternative, ...] = ()

    @property
    def seconds(self) -> float | None:
        secs = [m.seconds for m in self.models]
        return None if not secs or None in secs else sum(secs)

    def rendered(self, namer) -> "DryRun":
        """This plan, the options its problems name (errors.opt) written by a door's ``namer``."""
        def task(t: TaskPlan) -> TaskPlan:
            return replace(t, problem=render(t.problem, namer), notes=tuple(render(n, namer) for n in t.notes),
                           reach=tuple(render(n, namer) for n in t.reach))

        return replace(self, models=tuple(replace(m, problem=render(m.problem, namer), refused=render(m.refused, namer),
                                                  speed_note=render(m.speed_note, namer),
                                                  tasks=tuple(task(t) for t in m.tasks)) for m in self.models),
                       alternatives=tuple(replace(a, option=render(a.option, namer)) for a in self.alternatives))

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
        "problem": m.problem or m.refused or None,  # (cannot be planned, or the run refuses it as planned)
        "recorded": m.recorded or None,  # (its file not here: a finished run's --resume takes it as recorded)
        "tasks": [{"task": t.task, "items": t.items, "available": t.available, "seconds": t.seconds,
                   "tokens": t.work.tokens if t.work else None, "decode_calls": t.work.calls if t.work else None,
                   "rows": t.work.rows if t.work else None, "exact": t.work.exact if t.work else None,
                   "counted_by": t.work.basis if t.work else None, "problem": t.problem or None,
                   "notes": list(t.notes),
                   **({"looks": [{"items": n, "seconds": sec} for n, sec in t.looks],
                       "expected_stop": [{"verdict": q, "items": n, "kind": k} for q, n, k in t.expected],
                       "cannot_settle": list(t.reach)}
                      if t.looks else {})} for t in m.tasks],
        "download": None if m.download is None else {"what": m.download.what, "bytes": m.download.bytes,
                                                     "to": m.download.to, "free_bytes": m.download.free,
                                                     "refused_offline": m.download.fetches and m.download.refused
                                                     or None, "refused": m.download.refused or None,
                                                     "run_fetches": m.download.fetches},
        "memory": None if fit is None else {**fit.to_json(), "estimated": bool(m.memory_estimated)},
        "speed": None if speed is None else speed.to_json(),
        "speed_note": m.speed_note or None,
    }
