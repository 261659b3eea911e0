"""Task registry: tasks are plugins found through the entry-point group ``abricot_local.tasks``.

Each entry point maps a task name to ``module:Class`` (a :class:`Task`
subclass); the shipped tasks are registered the same way in pyproject.toml,
as simonw/llm and pytest find their plugins. A task's ``group`` attribute puts
it in a group (``--tasks abricot`` runs ``abricot_abs`` and ``abricot_inc``). A task written
for another version of the task contract (``Task.contract``) is refused by name.
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points

from abricot_local.errors import TaskError, opt
from abricot_local.names import did_you_mean
from abricot_local.tasks.base import CONTRACT, Task, TaskOptions

GROUP = "abricot_local.tasks"


@functools.cache
def _registry() -> dict[str, object]:
    eps = {ep.name.lower(): ep for ep in entry_points(group=GROUP)}
    if not eps:
        raise TaskError("no task is registered: abricot-local's entry points are missing "
                        "(install the package: pip install -e .)")
    return eps


def split_key(key: str) -> tuple[str, str, str]:
    """A run's task key ``TASK[@PROTOCOL][~VARIANT]`` as (task, protocol, variant), "" for a part
    it lacks (``abricot_abs@calamita~paper`` -> ``abricot_abs``, ``calamita``, ``paper``)."""
    main, _, variant = key.partition("~")
    name, _, protocol = main.partition("@")
    return name, protocol, variant


def base_name(key: str) -> str:
    """The task a run's task key names (``abricot_abs@calamita~paper`` -> ``abricot_abs``)."""
    return split_key(key)[0]


def without_variant(key: str) -> str:
    """A run's task key without its prompt variant (``discotex~ita-bench`` -> ``discotex``): the
    instance the variants of one task under one protocol are variants of."""
    return key.partition("~")[0]


def task_class(name: str) -> type[Task]:
    """The class of a task name, or of a run's task key (``TASK@PROTOCOL``)."""
    name = base_name(name)
    ep = _registry().get(name)
    if ep is None:
        raise _unknown(name)
    try:
        cls = ep.load()
    except Exception as exc:  # a broken plugin names itself
        raise TaskError(f"task plugin {name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise TaskError(f"task plugin {name!r} ({ep.value}) is not a Task subclass")
    return written_for_today(cls)


def written_for_today(cls: type[Task]) -> type[Task]:
    """``cls`` if it is written for this contract (``contract = CONTRACT``), else a :class:`TaskError`
    naming the task and both versions."""
    if getattr(cls, "contract", None) != CONTRACT:
        raise TaskError(f"task {cls.name!r} ({cls.__module__}.{cls.__qualname__}) is written for task contract "
                        f"{getattr(cls, 'contract', None)!r}; this abricot-local runs contract {CONTRACT} "
                        f"(`contract = {CONTRACT}` in the class, samples as record.Sample): upgrade abricot-local "
                        "or the task's package")
    return cls


def all_task_names() -> list[str]:
    """Every registered task, in registration order (shipped first, then plugins by name)."""
    return list(_registry())


@functools.cache
def groups() -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for name in all_task_names():
        group = getattr(task_class(name), "group", None)
        if group:
            out.setdefault(group.lower(), []).append(name)
    return {g: tuple(v) for g, v in out.items()}


def data_keys() -> list[str]:
    """What ``--data KEY=PATH`` may name: every task's data key (``abricot``, ``discotex``) and every task."""
    keys = set(all_task_names())
    for name in all_task_names():
        try:
            key = getattr(getattr(task_class(name), "data", None), "key", None)
        except TaskError:  # a broken plugin is named when it is run
            continue
        keys.update([key.lower()] if isinstance(key, str) and key else [])
    return sorted(keys)


def declared_choices(option: str) -> tuple[str, ...]:
    """The values the registered tasks declare for ``option`` (``Task.choices``), each once, in order: the
    command line's choices of a TaskOptions field with ``declared_choices`` (a broken plugin: none of its)."""
    out: dict[str, None] = {}
    for name in all_task_names():
        try:
            out.update(dict.fromkeys(getattr(task_class(name), "choices", {}).get(option, ())))
        except TaskError:
            continue
    return tuple(out)


def _unknown(name: str) -> TaskError:
    known = sorted([*_registry(), *groups()])
    return TaskError(f"unknown task {name!r}.{did_you_mean(name, known)} Known tasks: {', '.join(known)}")


def task_names(spec: str) -> list[str]:
    """Expand a comma-separated list of task and group names, keeping order, once each."""
    out: list[str] = []
    for raw in spec.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        if name in groups():
            expanded = groups()[name]
        elif name in _registry():
            expanded = (name,)
        else:
            raise _unknown(name)
        out.extend(n for n in expanded if n not in out)
    if not out:
        raise TaskError(f"no task given; use {opt('tasks')} with one of: " + ", ".join(sorted([*_registry(), *groups()])))
    return out


def make_task(name: str, options: TaskOptions) -> Task:
    """The task ``name`` built with the options it declares it uses (:mod:`tasks.uses`; the ones
    given that it does not use are in its ``option_notes``); a run's key ``TASK@PROTOCOL`` gives
    the task under that protocol, ``TASK[@PROTOCOL]~VARIANT`` with that prompt variant (its key
    keeps it). With several variants given (``--prompt-variant all``), a key naming none gets
    the default one."""
    from dataclasses import replace

    from abricot_local.tasks import uses

    _, protocol, variant = split_key(name)
    if protocol:
        options = replace(options, protocol=protocol)
    cls = task_class(name)
    if variant and variant not in cls.prompt_variants:
        raise TaskError(f"task {cls.name} has no prompt variant {variant!r} (task key {name!r}); its variants: "
                        f"{', '.join(cls.prompt_variants) or 'none'}")
    task = cls(replace(uses.for_task(cls, options), prompt_variant=(variant,)) if variant else uses.for_task(cls, options))
    task.option_notes = uses.notes(cls, options)
    task.key_variant = variant
    return task


def pull_data(name: str) -> list:
    """Download the data of a task (or of a group's tasks) into the user cache."""
    names = task_names(name)
    done: set[str] = set()
    got: list = []
    for n in names:
        task = make_task(n, TaskOptions())
        if task.data.key in done:
            continue
        done.add(task.data.key)
        if task.data.pull is None:
            raise TaskError(f"no download known for {n!r}. {task.data.how}")
        from abricot_local.tasks.data import pull

        got += pull(task, from_run=False)
    return got
