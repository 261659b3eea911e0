"""The ``--data`` pairs that find again the data files runs recorded: one rule for every reader of them (merge's
advice, run/merge_advice.py; the lm-eval outputs read beside runs, analysis/lm_eval_input.py).

Each task that recorded data files, all of them here, is found again by its data key (``Task.data.key``) where
every task of that key recorded the same files (``Task.data_ref``), all here; else by each task's name (which
``--data`` takes too: tasks.options.TaskOptions.data_for, the name first): one key pair would send every task of
the key to the first one's files, a task whose files are not here too. A task seen twice (several runs) keeps its
first run's files. A task whose recorded files are not all here is named with one of them (``gone``); one not
registered here (its instance cannot be made) is left out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from abricot_local.errors import AbricotError


@dataclass(frozen=True)
class RecordedData:
    """``pairs``: (key, path) for ``--data``, by data key where one path serves its tasks, else by task name;
    ``gone``: (task name, a recorded path) of the tasks whose recorded files are not here."""

    pairs: tuple[tuple[str, str], ...]
    gone: tuple[tuple[str, str], ...]


def recorded_data(tasks: Iterable) -> RecordedData:
    """The data ``tasks`` (analysis.runs.RunTask: its ``entry``, a TaskEntry or None, and ``instance()``, the
    task it ran as) recorded, as :class:`RecordedData`."""
    refs: dict[str, dict[str, str]] = {}  # data key -> task name -> its data_ref
    gone: dict[str, str] = {}
    short: set[str] = set()  # the data keys of the tasks whose files are not here
    for t in tasks:
        files = [Path(f.path) for f in t.entry.data] if t.entry is not None else []
        if not files:
            continue
        try:
            task = t.instance()
            if not all(f.exists() for f in files):
                gone.setdefault(task.name, str(files[0]))
                short.add(task.data.key)
                continue
            ref = task.data_ref(files)
        except AbricotError:  # a task not registered here; no file to name
            continue
        refs.setdefault(task.data.key, {}).setdefault(task.name, ref)
    pairs: dict[str, str] = {}
    for key, by_task in refs.items():
        one = len(set(by_task.values())) == 1 and key not in short
        pairs.update({key: next(iter(by_task.values()))} if one else by_task)
    return RecordedData(tuple(pairs.items()), tuple((name, path) for name, path in gone.items() if not any(
        name in by_task for by_task in refs.values())))
