"""Each task's work in a plan, as the dry run counts it (``run --dry-run``, the lines every run prints first,
``kld --dry-run``): counted with the model's own tokenizer (:func:`counted`: a vocabulary-only load; the run's
open backend: :func:`counted_by`), the run's own schedule and loop (cost.count_work), else (:func:`estimated`)
from the text, cut every chars/token characters of the tokenizer family (chars_per_token.py). A prompt over the
context the backend will allocate is that task's problem, at the item the run would stop at. Names no task and no
backend."""

from __future__ import annotations

from dataclasses import replace

from abricot_local.backends import open_backend, reads_model_file
from abricot_local.backends.base import schedule as make_schedule
from abricot_local.errors import AbricotError
from abricot_local.models.ref import ModelRef
from abricot_local.run.chars_per_token import ratio
from abricot_local.run.cost import count_work, counting_progress, text_tokenizer
from abricot_local.run.dry_plan import TaskPlan


def counted(ref: ModelRef, kind: str, opts, runs, chat: bool, notify=None) -> list[TaskPlan]:
    """Every task's work with the model's own tokenizer (a vocabulary-only load) or the
    synthetic backend itself (`kld --dry-run` counts its passes' items so too)."""
    reads = reads_model_file(kind)  # (--verbose shows the log of the run's own load, not this one)
    be = open_backend(kind, str(ref.path) if reads else ref.label,
                      replace(opts, vocab_only=True, verbose=False) if reads else opts)
    try:
        return counted_by(be, opts, runs, chat, notify)
    finally:
        be.close()


def counted_by(be, opts, runs, chat: bool, notify=None) -> list[TaskPlan]:
    """Every task's work with an open backend's own schedule (the run's: what it counts here,
    it scores without tokenizing again)."""
    from abricot_local.run.execute import apply_chat

    wrap = (lambda t: apply_chat([t], be)[0]) if chat else None
    return [_task_plan(r, be.schedule, opts, "", chat, notify, wrap=wrap) for r in runs]


def estimated(runs, opts, family: str, chat: bool, notify=None) -> list[TaskPlan]:
    """Every task's work estimated from its text (the model's file not here: ``family``, its tokenizer family's
    chars/token), each prompt against the context the backend will allocate (its options' ``context_window``)."""
    return [_task_plan(r, None, opts, family, chat, notify, window=opts.context_window) for r in runs]


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
