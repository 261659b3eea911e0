"""The data an lm-eval output records for its tasks, found again when it is read back on its own
(lm_eval_input.py's ``read``, hence `report`, `compare`, ``load_run``/``load_runs``). Each task's ``metadata``
(``configs.<task>.metadata`` of the results file) holds it in one of two forms:

- a run's export (`report --format lm-eval`): the data files its run recorded (``metadata.data``: the run's entry's
  ``data``, path and SHA-256 each), found again by the rule every reader of recorded files follows
  (tasks/recorded_data.py: a task whose recorded files are not all here is ``gone``);
- lm-eval run through abricot-local's tasks (`abricot-local lm-eval`, or lm-eval's own ``simple_evaluate`` with
  its ``TaskManager(metadata=...)``): what lm-eval's metadata gave them, which lm-eval keeps in each task's config
  (``data``: {data key or task: path} or one path for every task; ``data_dir``), read back as the tasks read it
  (lm_eval/tasks/loaders.py). lm-eval's metadata carries paths alone: no SHA-256 to hold the files to.

The data the reader is given wins (:func:`given_wins`, by the rule `run`'s data option follows; a ``data_dir``
given: none recorded used), as for every recorded file. A recorded path not here is not used (the data is looked for
where `run` finds it) and, when the task's data is then not found, the error names it, gone (:func:`gone_said`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from abricot_local.analysis.lm_eval_match import DataNotHere
from abricot_local.analysis.runs import RunTask
from abricot_local.errors import AbricotError, ResultsError
from abricot_local.record import DataFile, TaskEntry
from abricot_local.record.codec import Invalid

Pairs = tuple[tuple[str, str], ...]  # (data key or task name, path), as `run`'s data option


@dataclass(frozen=True)
class Gone:
    """A recorded path that is not here: ``key``, the data key or task it was recorded for (None: every task's,
    a recorded data_dir or one path for all), ``path`` as recorded, ``field`` where the output records it."""

    key: str | None
    path: str
    field: str


@dataclass(frozen=True)
class Recorded:
    """What one lm-eval task's output records of its data, the paths here (``pairs``, ``data_dir``) and gone."""

    pairs: Pairs = ()
    data_dir: str | None = None
    gone: tuple[Gone, ...] = ()

    def options(self, data: Pairs, data_dir: str | None) -> tuple[Pairs, str | None]:
        """The data pairs and data_dir the task's items are built from: the given ones winning over the recorded
        (a ``data_dir`` given: the given alone, as for an export's recorded files)."""
        if data_dir is not None:
            return tuple(data), data_dir
        return given_wins(self.pairs, data), self.data_dir

    def gone_for(self, keys: tuple[str, ...], data: Pairs, data_dir: str | None) -> tuple[Gone, ...]:
        """The gone paths the task would have read (its data ``keys``: DataNotHere's), the data given not
        naming them (:func:`given_wins`' rule: what it would leave out of the recorded, given none is gone)."""
        if data_dir is not None:
            return ()
        kept = set(given_wins(tuple((g.key, g.path) for g in self.gone if g.key is not None), data))
        return tuple(g for g in self.gone if g.key is None
                     or (_data_key(g.key) in keys and (g.key, g.path) in kept))


def recorded(configs: Mapping, names, exported: bool) -> dict[str, Recorded]:
    """Each lm-eval task's :class:`Recorded` (``names``: the output's tasks; ``exported``: a run's export)."""
    if exported:
        one = _exported_files(configs, names)
        return {name: one for name in names}
    return {name: _given_to_lm_eval(configs.get(name), name) for name in names}


def _exported_files(configs: Mapping, names) -> Recorded:
    """The data files an export's run recorded (each task's ``metadata.data``, as its entry's ``data``), by the
    rule every reader of recorded files follows (tasks/recorded_data.py): an export reads back alone where those
    files still are; a task whose files are not is gone, named by one of them."""
    from abricot_local.tasks.recorded_data import recorded_data

    held = []
    for name in names:
        meta = configs[name]["metadata"]
        files = meta.get("data")
        if not isinstance(files, list):
            continue  # an export written before it carried them
        try:
            own = meta.get("config") if isinstance(meta.get("config"), dict) else {}
            entry = TaskEntry(metrics={}, n=0, config=own, data=tuple(DataFile.from_dict(f) for f in files))
        except (Invalid, TypeError):
            raise ResultsError(f"lm-eval task {name}'s metadata.data is not a run's data files (path, sha256): "
                               "the file was changed") from None
        held.append(RunTask(meta["abricot_local_task"], dict(entry.config), entry=entry))
    found = recorded_data(held)
    return Recorded(found.pairs, gone=tuple(Gone(task, path, "its metadata's data, a file its run read")
                                            for task, path in found.gone))


def _given_to_lm_eval(config: Any, name: str) -> Recorded:
    """What lm-eval's metadata gave an lm-eval task (its config's ``metadata``: ``data``, ``data_dir``), as
    abricot-local's tasks read it (lm_eval/tasks/loaders.py); what they would not read (a key no task reads, a
    value that is no path) is left out: another task's metadata, not abricot-local's."""
    from abricot_local.tasks.options import data_pairs

    meta = config.get("metadata") if isinstance(config, dict) else None
    if not isinstance(meta, dict):
        return Recorded()
    data, folder = meta.get("data"), meta.get("data_dir")
    pairs, gone = [], []
    if isinstance(data, dict):
        for key, path in data.items():
            try:
                ((k, p),) = data_pairs({key: path})
            except (AbricotError, TypeError):
                continue
            if not p:
                continue
            if _here(p):
                pairs.append((k, p))
            else:
                gone.append(Gone(k, p, f"its metadata's data for {k}"))
    elif isinstance(data, str) and data:  # one path for every task, each reading it by its data key
        if _here(data):
            pairs = [(key, data) for key in _keys()]
        else:
            gone = [Gone(None, data, "its metadata's data, for every task")]
    if isinstance(folder, str) and folder and not Path(folder).expanduser().is_dir():
        gone.append(Gone(None, folder, "its metadata's data_dir"))
        folder = None
    return Recorded(tuple(pairs), folder if isinstance(folder, str) and folder else None, tuple(gone))


def gone_said(err: DataNotHere, lm_task: str, found: Recorded, data: Pairs, data_dir: str | None) -> DataNotHere:
    """``err`` (an lm-eval task's data not here) told as what it is when the output records where the data was
    and that path is gone: the path, where the output records it, and that it is gone."""
    gone = found.gone_for(tuple(err.keys), data, data_dir)
    if not gone:
        return err
    said = "; ".join(f"{g.path} ({g.field}{_relative(g.path)}) no longer exists" for g in gone)
    return DataNotHere(f"cannot read lm-eval task {lm_task} as a run: the data its output records is gone: {said}, "
                       "and no other copy of it is here (abricot-local data pull TASK, or give where it is now)",
                       err.keys)


def given_wins(found, given) -> Pairs:
    """The data pairs ``found`` (what runs recorded: lm_eval_input.recorded_data, an output's own: :func:`recorded`)
    and ``given`` (the user's), the data given winning for every task it names: a task's name is looked up before
    its data key (tasks.options.TaskOptions.data_for), so a pair given by name wins over a found one by key as it
    stands; a found pair by a task's name (``abricot_abs``) whose data key is given (``abricot``) is left out."""
    named = {k for k, _ in given}
    return (*[(k, p) for k, p in found if _data_key(k) not in named], *given)


def _data_key(name: str) -> str:
    """The data key of a task's name (a data key, not a task's name: itself)."""
    from abricot_local.errors import TaskError
    from abricot_local.tasks import task_class

    try:
        return str(task_class(name).data.key).lower()
    except (TaskError, AttributeError):  # a data key, not a task's name
        return name


def _keys() -> list[str]:
    """Every registered task's data key (one path for every task: each reads it by its own)."""
    from abricot_local.tasks import all_task_names

    return list(dict.fromkeys(_data_key(n) for n in all_task_names()))


def _here(path: str) -> bool:
    return Path(path).expanduser().exists()


def _relative(path: str) -> str:
    return "" if os.path.isabs(os.path.expanduser(path)) else f", a relative path, looked for from {os.getcwd()}"
