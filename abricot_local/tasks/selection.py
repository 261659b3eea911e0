"""Which tasks a run holds and which of their items: the tasks asked for (or every task whose data is
here), each under the protocols and prompt variants asked (``TASK@PROTOCOL~VARIANT`` instances), their
items after --limit, --sample and --shard (:func:`select`: run/plan.py's one call). Names no task."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache
from typing import TYPE_CHECKING, Sequence

import numpy as np

from abricot_local.errors import DataError, DownloadError, MissingDataError, TaskError, UsageError, opt
from abricot_local.tasks import all_task_names, base_name, groups, make_task, release, task_class, task_names, uses
from abricot_local.tasks.base import Item, Task, TaskOptions
from abricot_local.tasks.uses import refuse_unused

if TYPE_CHECKING:
    from abricot_local.record import Record

SAMPLE_STREAM = 101  # --sample's generator: [seed, 101], apart from the tasks' own draws


class Count(Enum):
    """What asked for the ``sample`` items :func:`prepare` takes of each task (its note names it when a task holds
    fewer): ``--sample N``; ``--until-settled``'s bound (``--max-items N``, or ``--sample N`` with it: run/request.py
    maps it onto the sample); the look a ``--until-settled`` run stopped at (run/settle.py), which no option named."""

    SAMPLE = "sample"
    BOUND = "bound"
    LOOK = "look"

    def beyond(self, n: int, available: int) -> str:
        """The note of a task holding fewer than the ``n`` items asked this way: all ``available`` taken."""
        if self is Count.LOOK:
            return (f"{opt('until_settled', True)} stopped at its look of {n} items, more than the task has: "
                    f"all {available} were scored")
        if self is Count.BOUND:
            return (f"{opt('max_items', n)} ({opt('until_settled', True)}'s bound) asks for more items than the task "
                    f"has: at most all {available} are scored")
        return f"{opt('sample', n)} asks for more items than the task has: all {available} are scored"


@dataclass(frozen=True)
class TaskRun:
    task: Task
    items: tuple[Item, ...]
    sampled: int | None = None  # with --sample: the items drawn (all of them when the task has fewer)
    notes: tuple[str, ...] = ()  # what preparing did that a reader must know (recorded as warnings)
    available: int = 0  # the items in the task's data, before --limit/--sample/--shard
    problem: str = ""  # a dry (or held: select) plan's task whose data is not here: why, how to get it (no items)
    positions: tuple[int, ...] = ()  # each item's place in the task's data (release order), as prepare left
    # them (a run cut afterwards keeps them): only :meth:`sharded` reads them

    def sharded(self, shard) -> "TaskRun":
        """This run's part ``shard`` (a run.request.Shard) takes (:func:`dealt`; its items' places known)."""
        if len(self.positions) != len(self.items):
            raise ValueError("a TaskRun's items are dealt to shards by their places in the data (prepare's)")
        places = shard.places(dealt(self.positions, self.available, self.task.options.seed))
        return replace(self, items=tuple(self.items[i] for i in places),
                       positions=tuple(self.positions[i] for i in places))

    def nested(self) -> tuple[str, ...]:
        """The item ids (its items: the first ``len(items)`` of the task's seeded order, kept in release order, or
        every item) in the nested order: the first n of them are ``--sample n``'s items (:func:`sample_order`)."""
        first = sample_order(self.available or len(self.items), self.task.options.seed)[:len(self.items)]
        rank = {p: i for i, p in enumerate(sorted(first))}
        return tuple(self.items[rank[p]].id for p in first)


@dataclass(frozen=True)
class Skipped:
    """A task left out of a run with no --tasks: why, and the command that gets its data (or mends it); ``said``,
    the few words a run says it with (``skipped TASK: SAID (HOW)``)."""

    task: str
    reason: str
    how: str
    said: str = "no data"

    @classmethod
    def broken(cls, name: str, err: TaskError) -> "Skipped":
        """A plugin's task that does not load, is outdated or is refused: skipped with its error."""
        return cls(name, err.raw(), "fix, upgrade or uninstall its package", said=err.raw())


def select(options: TaskOptions, *, spec: str | None = None, keys: tuple[str, ...] = (),
           named: dict[str, tuple[str, ...]] | None = None, limit: int | None = None, sample: int | None = None,
           shard=None, dry: bool = False, count: Count = Count.SAMPLE,
           held: Record | None = None) -> tuple[list[TaskRun], tuple[Skipped, ...]]:
    """The task runs of a plan: ``keys`` (a recorded run's instances, as they were), else the tasks of
    ``spec`` (--tasks) under the protocols ``named`` and the variants asked, their items selected (``shard``:
    a run.request.Shard). A run skips a task whose data is not here (no --tasks given) or fetches it; a
    ``dry`` plan fetches nothing and keeps every task, one without its data with its problem; ``held`` (a
    --resume's of a folder holding this finished run, which needs no data: run/plan.py) fetches nothing either and
    keeps a task whose data is not here (given or not; no --tasks: one of the run's) that the run records with its
    problem and the items its record counts (``available``). ``count``: what asked for
    ``sample`` (:class:`Count`), named when a task holds fewer items."""
    if keys:
        return prepare([make_task(k, options) for k in keys], limit, sample, shard, count), ()
    refuse_empty(spec)
    if not dry and held is None:
        chosen, skipped = select_tasks(spec, options)
        return prepare(instances(chosen, named, options.prompt_variant, options.protocol), limit, sample, shard,
                       count), skipped
    options = replace(options, allow_download=False)
    if held is not None:
        chosen, skipped = select_tasks(spec, options, held={base_name(k) for k in held.tasks})
        return _kept(instances(chosen, named, options.prompt_variant, options.protocol), limit, sample, shard,
                     count, held=held), skipped
    names, broken = (task_names(spec), []) if spec else _loading(all_task_names())
    refuse_options([task_class(n) for n in names], options)
    return _kept(instances([make_task(n, options) for n in names], named, options.prompt_variant, options.protocol),
                 limit, sample, shard, count, given=bool(spec)), tuple(broken)


def _kept(tasks: list[Task], limit: int | None, sample: int | None, shard, count: Count, *,
          given: bool = False, held: Record | None = None) -> list[TaskRun]:
    """:func:`prepare` of each of ``tasks``, one whose data is not here kept with its problem (no items); ``given``
    (a dry plan's --tasks): one whose data was given and is not there is refused, as the run refuses it; ``held``
    (select's): one it records kept with the items it counts, one the finished run does not record kept with no item
    (the resume's own refusal of a run of other options speaks first: run.session.run_plan, its data needed else)."""
    runs = []
    for task in tasks:
        try:
            runs += prepare([task], limit, sample, shard, count)
        except MissingDataError as err:
            if given and (task.options.data_dir or task.options.data_for(task.data.key, task.name)):
                raise  # a task named whose data was given and is not there: the run refuses it too (no download)
            entry = held.tasks.get(task.key) if held is not None else None  # (one it does not record: kept too)
            runs.append(TaskRun(task, (), problem=f"no data here ({err.what}); {err.advice()}",
                                available=(entry.available or 0) if entry is not None else 0))
    return runs


def _loading(names: list[str]) -> tuple[list[str], list[Skipped]]:
    """Of every registered task (no --tasks), those whose class loads, and a broken plugin's skipped with its reason,
    as a run skips it (select_tasks)."""
    out, broken = [], []
    for name in names:
        try:
            task_class(name)
            out.append(name)
        except TaskError as err:
            broken.append(Skipped.broken(name, err))
    return out, broken


def instances(tasks: list[Task], named: dict[str, tuple[str, ...]] | None = None, variants=None,
              protocols: str | None = None) -> list[Task]:
    """Each task under every protocol ``named`` gives it (task -> protocols: those whose published rows a
    registry entry's ``reproduces`` names, analysis.baselines.protocols_named), in the task's order of protocols (``--protocol`` given: that one only; a list, or ``all``:
    each of those the task has, whatever ``reproduces`` names), and under
    each prompt variant ``variants`` (``--prompt-variant all`` or a list) names
    (:func:`variant_instances`); instances whose settings come out the same (a flag overriding
    what told them apart) run once. A protocol a task lacks, on a task that declares none,
    leaves it as it is (noted in its run)."""
    named = named or {}
    out: list[Task] = []
    for task in tasks:
        wanted = named.get(task.name, ()) if task.options.protocol is None else ()
        if uses.several(protocols):
            wanted = uses.protocols_for(type(task), protocols)
        order = [p.name for p in task.protocols if p.name in wanted]
        made = [make_task(task.name, replace(task.options, protocol=p)) for p in order] or [task]
        made = [v for t in made for v in variant_instances(t, variants)]
        seen: list[dict] = []
        for t in made:
            if t.settings() not in seen or not t.settings():
                seen.append(t.settings())
                out.append(t)
    return out


def variant_instances(task: Task, spec: str | None) -> list[Task]:
    """``task`` under each prompt variant ``spec`` (``--prompt-variant all`` or a list) names of it:
    its default variant (its protocol's, else the task's first) keeps its key, another is keyed
    ``KEY~VARIANT`` (tasks.make_task). A variant other than the one its protocol fixes is scored with
    the protocol's other settings, said in its warnings: the published rows are checked against the
    instance with the protocol's own variant only (baselines.entry_for)."""
    wanted = uses.variants_for(type(task), spec) if uses.several(spec) else ()
    if not wanted:
        return [task]
    default = task.resolved_variant()
    protocol = task.protocol
    out = []
    for v in sorted(wanted, key=lambda v: v != default):
        t = task if v == default else make_task(f"{task.key}~{v}", task.options)
        t.option_notes = task.option_notes
        if protocol is not None and protocol.fixes("prompt_variant") and protocol.value("prompt_variant") != v:
            asked = opt("prompt_variant", ",".join(uses.names(spec)))
            t.option_notes = (*t.option_notes, f"prompt variant {v} ({asked}) where protocol "
                              f"{protocol.name} fixes {protocol.value('prompt_variant')}: scored with the protocol's "
                              "other settings; no published row is checked against it")
        out.append(t)
    return out


def sample_order(count: int, seed: int) -> tuple[int, ...]:
    """The order --sample draws a task's ``count`` items in (their release positions): one permutation,
    from the generator [seed, SAMPLE_STREAM]. ``--sample n`` scores its first n, so a sample lies inside
    every larger one of the same seed (a run grows with ``--resume --sample M``), and a look at the first
    n items, for any n, is a look at ``--sample n``'s items."""
    return _permutation(count, seed, SAMPLE_STREAM)


@lru_cache(maxsize=64)  # a pure function: prepare (kept, then dealt for a shard) and TaskRun.nested ask again
def _permutation(count: int, seed: int, stream: int) -> tuple[int, ...]:
    return tuple(np.random.default_rng([seed, stream]).permutation(count).tolist())


def kept(available: int, seed: int, limit: int | None = None, sample: int | None = None) -> tuple[int, ...]:
    """The places (in release order) of the items --limit or --sample keep of a task's ``available``: the first
    ``limit``, or the first ``sample`` of :func:`sample_order` (every item when it has no more), in release order."""
    places = sorted(sample_order(available, seed)[:sample]) if sample is not None else range(available)
    return tuple(places[:limit] if limit is not None else places)


def dealt(positions: Sequence[int], available: int, seed: int) -> tuple[int, ...]:
    """The order --shard K/N deals a task's items in: the indices of ``positions`` (its items' places among the
    ``available`` of its data, after --limit/--sample) sorted by their rank in :func:`sample_order` (the nested
    order, one permutation of every item); shard K takes ranks K-1, K-1+N, ... of it (run.request.Shard.places).
    A fixed set of ranks of a uniform permutation is a simple random draw of the items, so each shard is one
    (of --sample n's items: their first n ranks; of --limit's: the same order restricted to them); and shard K
    of --sample n lies inside shard K of every larger sample (a grown shard keeps every item it scored)."""
    rank = {p: r for r, p in enumerate(sample_order(available, seed))}
    return tuple(sorted(range(len(positions)), key=lambda i: rank[positions[i]]))


def prepare(tasks, limit: int | None, sample: int | None = None, shard=None,
            count: Count = Count.SAMPLE) -> list[TaskRun]:
    """Build every task's items, checking ids are unique: the first ``limit`` in release
    order, or the ``sample`` first of the task's seeded order (:func:`kept`: kept in release
    order); then the shard's part of those (``shard``: a run.request.Shard, dealt in the nested order:
    :func:`dealt`, :meth:`TaskRun.sharded`). A task holding fewer than ``sample`` items is noted, naming what
    asked for them (``count``), and one whose data is not the release its published rows were made on
    (tasks/release.py)."""
    runs = []
    for task in tasks:
        every = task.items()
        available = len(every)
        # options given that the task does not use; data that is not the release its published rows were made on
        notes: tuple[str, ...] = (*task.option_notes, *release.notes(task))
        if sample is not None and sample > available:
            notes += (count.beyond(sample, available),)
        positions = kept(available, task.options.seed, limit, sample)
        items = [every[p] for p in positions]
        if not items:
            raise DataError(f"task {task.key}: the data holds no items")
        seen: set[str] = set()
        for it in items:
            if it.id in seen:
                raise DataError(f"task {task.key}: item id {it.id!r} appears twice in the data")
            seen.add(it.id)
        run = TaskRun(task, tuple(items), None if sample is None else min(sample, len(seen)), notes, available,
                      positions=positions)
        if shard is not None:
            run = run.sharded(shard)
            if not run.items:
                raise UsageError(f"task {task.key}: shard {shard} holds no item ({len(seen)} items in all): split "
                                 f"them into at most {len(seen)} parts ({opt('shard', f'K/{len(seen)}')})")
        runs.append(run)
    return runs


def refuse_empty(spec: str | None) -> None:
    """An empty --tasks (``""``, the API's ``[]``) is refused: only none given (None) means every task whose
    data is here."""
    if spec is not None and not spec.strip():
        raise UsageError(f"{opt('tasks')} is empty: give one or more task names (one of: "
                         f"{', '.join(sorted([*all_task_names(), *groups()]))}), or leave it out (None, the "
                         "default) for every task whose data is here")


def select_tasks(task_spec: str | None, options: TaskOptions,
                 held: set[str] = frozenset()) -> tuple[list[Task], tuple[Skipped, ...]]:
    """The tasks of ``--tasks``; with none given, every registered task whose data is given,
    found, or can be fetched now, or that ``held`` names (select's: the tasks of the finished run a --resume finds;
    the others are skipped, each with its reason); an empty one refused (:func:`refuse_empty`)."""
    refuse_empty(task_spec)
    if task_spec:
        names = task_names(task_spec)
        refuse_options([task_class(n) for n in names], options)
        return [make_task(n, options) for n in names], ()
    chosen, skipped, errors = [], [], []
    for name in all_task_names():
        try:
            task = make_task(name, options)
        except TaskError as err:  # a broken or outdated plugin: skipped with its reason, as a task without data is
            skipped.append(Skipped.broken(name, err))
            continue
        try:
            task.data_path()
            chosen.append(task)
        except MissingDataError as err:
            if name in held:
                chosen.append(task)
                continue
            errors.append(err)
            skipped.append(Skipped(name, err.what, err.advice()))
        except (DataError, DownloadError) as err:
            skipped.append(Skipped(name, err.raw(), task.data.how))
    if not chosen:
        raise no_task_data(errors) if len(errors) == len(skipped) else DataError(
            "no task has its data here: " + "; ".join(dict.fromkeys(s.reason for s in skipped)))
    refuse_options([type(t) for t in chosen], options)
    return chosen, tuple(skipped)


def refuse_options(classes, options: TaskOptions) -> None:
    """:class:`UsageError` for an option no task of ``classes`` (the run's) uses, a prompt variant or protocol none
    of them has, or a protocol named twice: a run's and a dry run's one check (select_tasks', select's)."""
    refuse_unused(classes, options)
    uses.refuse_unknown_variants(classes, options.prompt_variant)
    spec = options.protocol
    parts = [] if spec is None else [n.strip() for n in (spec.split(",") if isinstance(spec, str) else map(str, spec))]
    if twice := next((n for i, n in enumerate(parts) if n and n in parts[:i]), None):
        raise UsageError(f"{opt('protocol', spec)} names the protocol {twice!r} twice: give each protocol once")
    uses.refuse_unknown_protocols(classes, spec)



def no_task_data(errors: list[MissingDataError]) -> MissingDataError:
    """One error for every task's missing data: the tasks and where they were looked for, one
    command line that gets them all, the offline alternatives (each once)."""
    import os

    wheres = [e.where for e in errors if e.where]
    where = os.path.commonpath(wheres) if wheres else ""
    reasons = list(dict.fromkeys(e.reason for e in errors if e.reason))
    looked = "; ".join([f"looked in {where}"] * bool(where) + reasons)
    what = f"no task has its data here: {', '.join(e.task for e in errors)}" + (f" ({looked})" if looked else "")
    gets = list(dict.fromkeys(e.get for e in errors if e.get))
    downloads = tuple({(d.folder, d.urls): d for e in errors  # tasks sharing their data (ABRICOT's): its files once
                       for d in (e.download if isinstance(e.download, tuple) else (e.download,))
                       if d is not None}.values())
    return MissingDataError(what, " && ".join(gets) or None, " or ".join(dict.fromkeys(e.offline for e in errors)),
                            download=downloads or None)
