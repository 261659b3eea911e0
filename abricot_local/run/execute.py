"""Executing a plan: the one loop over a backend's ``score_many`` (:func:`scored`), every door's:
`run`'s tasks into their folder (:func:`execute`), `check`'s recorded items against the record,
`kld`'s paired models, the lm-eval model's loglikelihood requests, and the plan's cost (a backend
that counts). No printing: progress goes to a callback. Names no task and no backend."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Protocol, Sequence

from abricot_local.backends.base import Backend
from abricot_local.core import Request, Scored
from abricot_local.errors import ContextOverflowError
from abricot_local.metrics import require_finite
from abricot_local.record import Sample
from abricot_local.run.plan import Plan
from abricot_local.tasks.selection import TaskRun
from abricot_local.tasks.base import Item

Progress = Callable[..., None]  # (task, done, total[, note]): note, a --until-settled run's next look and open verdicts


class Sink(Protocol):
    """Where :func:`execute` puts each sample as it is scored (an output folder, check's comparison). A sink
    that keeps which thread count scored what (a run's folder: docs/numerics.md#threads) has
    ``scored_with(threads, counted)``: told, before any item, the backend's thread count and its decode calls
    so far that depend on it (two callables)."""

    def done(self, task: str) -> dict[str, Sample]:
        """The samples it holds already for ``task`` (id -> sample): not scored again."""
        ...

    def append(self, task: str, sample: Sample) -> None: ...


class Stages(Protocol):
    """A rule that reads every task's first items at planned points and may stop the run there (run/settle.py's,
    ``--until-settled``): the items are taken in its order, all tasks to its next point, then it looks."""

    def order(self, task: str) -> Sequence[str]:
        """The task's item ids in the order they are taken."""
        ...

    def next(self) -> int | None:
        """The items (of each task, at most all of them) its next look reads; None: it has stopped."""
        ...

    def look(self, n: int, tasks: dict, samples: dict[str, list[Sample]]) -> bool:
        """The look at ``n`` items (``samples``: per task its first, in its order); whether it read any."""
        ...

    def note(self, task: str) -> str:
        """What the task's progress line adds (the next look, the open verdicts)."""
        ...


@dataclass(frozen=True)
class TaskResult:
    name: str
    samples: tuple[Sample, ...]
    metrics: dict
    seconds: float
    scored_now: int  # items scored in this process (the rest came from a checkpoint)


def scored(requests: Sequence[Request], backend) -> Iterator[tuple[int, Scored]]:
    """Score ``requests``, yielding (its index in ``requests``, Scored) as soon as its chunk is done:
    the only loop over a backend's ``score_many``. Requests sharing a prefix are scored together so
    its KV cache is reused: the order is the cached prefix, then as given (a caller's canonical order
    kept), so `run`, `check`, `kld` and the cost group alike; the exact engines give the same numbers
    in any order, and a batched engine's groups depend only on this order. Chunks of
    ``batch_size()`` go to ``score_many``."""
    order = sorted(range(len(requests)), key=lambda k: requests[k].prefix)
    size = max(1, backend.batch_size())
    for k in range(0, len(order), size):
        chunk = order[k : k + size]
        yield from zip(chunk, backend.score_many([requests[i] for i in chunk]), strict=True)


def score_items(items: Sequence[Item], backend) -> Iterator[tuple[Item, Scored]]:
    """Score items through :func:`scored`, yielding each (item, Scored) as soon as its chunk is done."""
    for k, s in scored([it.request() for it in items], backend):
        yield items[k], s


def open_backend(plan: Plan, *, lost=None) -> Backend:
    """The plan's model opened, after the memory check (remote RPC memory included) unless --force; ``lost``
    (a run's folder's: run_folder.RunFolder.lost) told when a remote device goes away."""
    from abricot_local.models.given import load

    return load(plan.model, plan.backend_options, force=plan.force, lost=lost)


def prepared(plan: Plan, backend: Backend, fits: Plan | None = None) -> list[TaskRun]:
    """The plan's task runs as ``backend`` scores them: wrapped in the model's chat template when the
    plan says so, every request scheduled (tokenized once: the backend keeps it), so a prompt over
    n_ctx fails before any work; ``fits``' items first (a plan whose items must fit too, though this one scores
    only some of them: a ladder's reference, every item its looks may reach, as each rung's plan holds them), one
    that does not fit and is not the plan's own refused saying so."""
    runs = _chat(plan, backend)
    own = {r.task.key: {it.id for it in r.items} for r in runs}
    for run in _chat(fits, backend) if fits is not None else ():
        for item in run.items:
            try:
                backend.schedule(item.request())
            except ContextOverflowError as err:
                if item.id in own.get(run.task.key, ()):
                    raise
                raise ContextOverflowError(
                    f"{err.raw()} (not one of the {len(own.get(run.task.key, ())):,} items of {run.task.key} scored "
                    "now, but a later look may reach it, and every item a look may reach is checked before any is "
                    "scored)") from err
    for run in runs:
        for item in run.items:
            backend.schedule(item.request())
    return runs


def _chat(plan: Plan, backend: Backend) -> list[TaskRun]:
    """The plan's task runs, wrapped in the model's chat template when the plan says so."""
    return apply_chat(list(plan.runs), backend) if plan.task_options.chat_template else list(plan.runs)


def apply_chat(runs: list[TaskRun], backend: Backend) -> list[TaskRun]:
    """Every prompt as the one user turn of the model's chat template, rendered through it as lm-eval's
    ``--apply_chat_template`` renders it (a template's own ``| trim`` included: Gemma 3's drops a prompt's last
    newline); the answer follows the generation prompt directly, so continuations lose their leading space
    ("1", not " 1")."""
    return [replace(run, items=tuple(it.in_chat(backend.render_chat([{"role": "user", "content": it.context}]))
                                     for it in run.items)) for run in runs]


def execute(plan: Plan, backend: Backend, sink: Sink, *, progress: Progress | None = None,
            measure: bool = True, stages: Stages | None = None, fits: Plan | None = None) -> list[TaskResult]:
    """Every task of ``plan`` scored through ``backend`` (:func:`prepared`: ``fits``' items checked too) into
    ``sink`` (what it holds already is not scored again): each task's samples and (``measure``) metrics, in
    ``stages``' order to each of its looks until it stops (``--until-settled``'s rule; default :class:`Whole`: every
    item, task after task)."""
    stages = stages or Whole(plan)
    scored_with = getattr(sink, "scored_with", None)
    if scored_with is not None:
        scored_with(lambda: _threads(backend), lambda: backend.counters.thread_dependent)
    runs = prepared(plan, backend, fits)
    return staged(runs, backend, sink, stages, progress, measure)


def _threads(backend: Backend) -> int | None:
    """The thread count the backend's kernels record (None: it records none)."""
    kernels = backend.provenance().kernels
    return kernels.threads if kernels is not None else None


@dataclass
class Whole:
    """A run taken whole: every item of every task in release order, task after task, and no look (the Stages of
    a run that is not ``--until-settled``: run/settle.py's ``Grown``, which adds what a run asks of its stages
    besides; its ``Rule`` is the other)."""

    plan: Plan
    taken: bool = False  # its one stage is given

    def order(self, key: str) -> Sequence[str]:
        return next(tuple(it.id for it in r.items) for r in self.plan.runs if r.task.key == key)

    def next(self) -> int | None:
        if self.taken:
            return None
        self.taken = True
        return max((len(r.items) for r in self.plan.runs), default=0)

    def look(self, n: int, tasks: dict, samples: dict[str, list[Sample]]) -> bool:
        return False

    def note(self, key: str) -> str:
        return ""


def staged(runs: list[TaskRun], backend: Backend, sink: Sink, stages: Stages, progress: Progress | None = None,
           measure: bool = True) -> list[TaskResult]:
    """Every task's items in ``stages``' order, all tasks to its next look, then the look, until it stops: each
    task's first n items (n: the last look's, at most the task's), in release order, and (``measure``: a check of a
    subset computes none) their metrics. Items the sink holds already are not scored again (a resume), nor kept
    past n."""
    orders, done, seconds, now = {}, {}, {}, {}
    for run in runs:
        key, by_id = run.task.key, {it.id: it for it in run.items}
        orders[key] = [by_id[i] for i in stages.order(key)]
        done[key], seconds[key], now[key] = dict(_vouched(sink, run)), 0.0, 0
    n = 0
    while (step := stages.next()) is not None:
        n = step
        for run in runs:
            key, order, start = run.task.key, orders[run.task.key], time.perf_counter()
            now[key] += _score_into(run, order, order[:n], backend, done[key], sink.append, progress,
                                    lambda key=key: _noted(stages.note(key)))
            seconds[key] += time.perf_counter() - start
        looked = stages.look(n, {r.task.key: r.task for r in runs},
                             {key: [done[key][it.id] for it in order[:n]] for key, order in orders.items()})
        if progress and looked:
            for key, order in orders.items():
                progress(key, sum(1 for it in order if it.id in done[key]), len(order), stages.note(key))
    out = []
    for run in runs:
        key = run.task.key
        kept = {it.id for it in orders[key][:n]}
        samples = tuple(done[key][it.id] for it in run.items if it.id in kept)
        require_finite(list(samples), key)
        out.append(TaskResult(key, samples, run.task.metrics(list(samples)) if measure else {}, seconds[key],
                              now[key]))
    return out


def _vouched(sink: Sink, run: TaskRun) -> dict[str, Sample]:
    """What ``sink`` holds already for ``run``'s task; a sink that can (a run's folder: ``vouched(run)``) keeps only
    the saved samples ``run``'s items give (run/saved.py), the rest scored again."""
    vouched = getattr(sink, "vouched", None)
    return vouched(run) if vouched is not None else sink.done(run.task.key)


def _score_into(run: TaskRun, every: Sequence[Item], upto: Sequence[Item], backend: Backend, done: dict[str, Sample],
                on_sample: Callable[[str, Sample], None] | None, progress: Progress | None,
                note: Callable[[], tuple] = tuple) -> int:
    """The items of ``upto`` not in ``done`` scored into it (and ``on_sample``), the progress counted over ``every``
    (``note()``: the progress call's further arguments); how many were scored."""
    key, total = run.task.key, len(every)
    finished, scored = sum(1 for it in every if it.id in done), 0
    if progress:
        progress(key, finished, total, *note())
    for item, s in score_items([it for it in upto if it.id not in done], backend):
        done[item.id] = sample = run.task.sample(item, s)
        scored += 1
        finished += 1
        if on_sample:
            on_sample(key, sample)
        if progress:
            progress(key, finished, total, *note())
    return scored


def _noted(note: str) -> tuple:
    """A progress call's further arguments: the stage's note, when it has one."""
    return (note,) if note else ()
