"""Task registry: tasks are plugins found through the entry-point group ``abricot_local.tasks``.

Each entry point maps a task name to ``module:Class`` (a :class:`Task`
subclass); the shipped tasks are registered the same way in pyproject.toml,
as simonw/llm and pytest find their plugins. A task's ``group`` attribute puts
it in a group (``--tasks abricot`` runs ``abricot_abs`` and ``abricot_inc``). A task written
for another version of the task contract (``Task.contract``), or whose declarations do not hold together
(:mod:`tasks.contract`), is refused by name, as is a plugin that fails to load: when it is asked for, so that
it blocks no other task. A plugin cannot take a shipped task's name, nor two plugins one name.
"""

from __future__ import annotations

import functools
from importlib.metadata import EntryPoint, entry_points

from abricot_local.errors import TaskError, opt
from abricot_local.names import Clashes, did_you_mean, plugin_entries
from abricot_local.tasks.base import CONTRACT, Task, TaskOptions
from abricot_local.tasks.item_check import where

GROUP = "abricot_local.tasks"
CLASHES = Clashes(  # a task name is case-blind: plugins' names are folded to lower case
    ignored="task plugin entry {entries} is ignored: {name!r} is a task shipped with abricot-local (it runs that one); "
            "the plugin must register its task under another name",
    several="task {name!r} is registered by several plugins ({entries}): uninstall one of them, or have one register "
            "its task under another name")


@functools.cache
def _entries() -> tuple[dict[str, EntryPoint], dict[str, str], dict[str, str]]:
    """(name -> its entry point: the shipped tasks in registration order, then the plugins' by name;
    name -> why a name two plugins register is refused; name -> why a plugin's entry that takes a
    shipped task's name is ignored). A package found twice (the same ``module:Class``) is no clash."""
    shipped: dict[str, EntryPoint] = {}
    others: list[EntryPoint] = []
    for ep in entry_points(group=GROUP):
        if ep.value.partition(":")[0].split(".")[0] == "abricot_local":
            shipped.setdefault(ep.name.lower(), ep)
        else:
            others.append(ep)
    plugins = plugin_entries(others, shipped, CLASHES, str.lower)
    if not shipped and not plugins.entries:
        raise TaskError("no task is registered: abricot-local's entry points are missing "
                        "(install the package: pip install -e .)")
    return plugins.over(shipped), plugins.several, plugins.ignored


def _registry() -> dict[str, object]:
    return _entries()[0]


def refused() -> tuple[str, ...]:
    """Why a plugin's entry is not run: one that takes a shipped task's name (ignored: the shipped task
    runs), a name several plugins register (refused when that name is used)."""
    _, clashes, ignored = _entries()
    return (*clashes.values(), *ignored.values())


def split_key(key: str) -> tuple[str, str, str]:
    """A run's task key ``TASK[@PROTOCOL][~VARIANT]`` as (task, protocol, variant), "" for a part
    it lacks (``abricot_abs@calamita~paper`` -> ``abricot_abs``, ``calamita``, ``paper``)."""
    main, _, variant = key.partition("~")
    name, _, protocol = main.partition("@")
    return name, protocol, variant


def base_name(key: str) -> str:
    """The task a run's task key names (``abricot_abs@calamita~paper`` -> ``abricot_abs``)."""
    return split_key(key)[0]


def base_names(keys) -> tuple[str, ...]:
    """The tasks a run's task keys name (:func:`base_name`), each once, in the keys' order
    (``discotex~card``, ``discotex``, ``abricot_abs@calamita`` -> ``discotex``, ``abricot_abs``): what a call that
    names the run's tasks gives."""
    return tuple(dict.fromkeys(base_name(k) for k in keys))


def without_variant(key: str) -> str:
    """A run's task key without its prompt variant (``discotex~ita-bench`` -> ``discotex``): the
    instance the variants of one task under one protocol are variants of."""
    return key.partition("~")[0]


def task_class(name: str) -> type[Task]:
    """The class of a task name, or of a run's task key (``TASK@PROTOCOL``), its contract and its
    declarations checked (:mod:`tasks.contract`)."""
    from abricot_local.tasks.contract import checked

    return checked(written_for_today(_loaded(name)))


def _loaded(name: str) -> type[Task]:
    """The class an entry point names, loaded, not yet checked: a :class:`TaskError` naming the plugin
    when it fails to load, is no Task, or its name is registered by several plugins."""
    name = base_name(name)
    ep = _registry().get(name)
    if ep is None:
        raise _unknown(name)
    if name in _entries()[1]:
        raise TaskError(_entries()[1][name])
    try:
        cls = ep.load()
    except Exception as exc:  # a broken plugin names itself
        raise TaskError(f"task plugin {name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}; "
                        "fix or reinstall its package (or uninstall it)") from None
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise TaskError(f"task plugin {name!r} ({ep.value}) is not a Task subclass")
    return cls


def written_for_today(cls: type[Task]) -> type[Task]:
    """``cls`` if it is written for this contract (``contract = CONTRACT``), else a :class:`TaskError`
    naming the task and both versions."""
    if getattr(cls, "contract", None) != CONTRACT:
        raise TaskError(f"{where(cls)} is written for task contract "
                        f"{getattr(cls, 'contract', None)!r}; this abricot-local runs contract {CONTRACT} "
                        f"(`contract = {CONTRACT}` in the class, samples as record.Sample): upgrade abricot-local "
                        "or the task's package")
    return cls


def all_task_names() -> list[str]:
    """Every registered task: the shipped ones in registration order, then the plugins' by name."""
    return list(_registry())


@functools.cache
def groups() -> dict[str, tuple[str, ...]]:
    """group -> its tasks. A plugin whose class does not load is in none (it is named when it is asked for,
    or when an unknown name is given: :func:`_unknown`); one that loads and is refused is in its group, so
    that the group names its refusal."""
    out: dict[str, list[str]] = {}
    for name in all_task_names():
        try:
            group = getattr(_loaded(name), "group", None)
        except TaskError:
            continue
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
    return TaskError(f"unknown task {name!r}.{did_you_mean(name, known)} Known tasks: {', '.join(known)}"
                     + "".join(f"; {why}" for why in _unloaded()))


def _unloaded() -> list[str]:
    """Why each plugin that does not load fails (its group, if any, is not known)."""
    return _failures(_loaded)


def broken() -> list[str]:
    """Why each registered task that cannot be run is refused (its plugin does not load, is outdated, or what it
    declares does not hold together): what a message that could be about its task names (its rows unknown)."""
    return _failures(task_class)


def _failures(load) -> list[str]:
    out = []
    for name in _registry():
        try:
            load(name)
        except TaskError as err:
            out.append(str(err))
    return out


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
