"""Task registry: names, groups, and did-you-mean for unknown names."""

from __future__ import annotations

import difflib
from importlib import import_module

from abricot_local.errors import TaskError
from abricot_local.tasks.base import Task, TaskOptions

TASKS = {
    "discotex": ("abricot_local.tasks.discotex", "DiscotexTask"),
    "abricot_abs": ("abricot_local.tasks.abricot", "AbricotAbsTask"),
    "abricot_inc": ("abricot_local.tasks.abricot", "AbricotIncTask"),
}
GROUPS: dict[str, tuple[str, ...]] = {"abricot": ("abricot_abs", "abricot_inc")}
PULLERS = {
    "discotex": ("abricot_local.tasks.discotex", "pull"),
    "abricot": ("abricot_local.tasks.abricot_data", "pull"),
}


def task_names(spec: str) -> list[str]:
    """Expand a comma-separated list of task and group names, keeping order, once each."""
    out: list[str] = []
    for raw in spec.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        if name in GROUPS:
            expanded = GROUPS[name]
        elif name in TASKS:
            expanded = (name,)
        else:
            known = sorted([*TASKS, *GROUPS])
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise TaskError(f"unknown task {name!r}.{hint} Known tasks: {', '.join(known)}")
        out.extend(n for n in expanded if n not in out)
    if not out:
        raise TaskError("no task given; use --tasks with one of: " + ", ".join(sorted([*TASKS, *GROUPS])))
    return out


def pull_data(name: str, folder) -> list:
    """Download a task's data into ``folder``."""
    key = "abricot" if name.startswith("abricot") else name
    if key not in PULLERS:
        raise TaskError(f"no download known for {name!r}; data can be pulled for: {', '.join(PULLERS)}")
    module, fn = PULLERS[key]
    return getattr(import_module(module), fn)(folder)


def make_task(name: str, options: TaskOptions) -> Task:
    module, cls = TASKS[name]
    return getattr(import_module(module), cls)(options)
