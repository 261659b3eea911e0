"""How many items a task holds: the N of a verdict's finite-population correction.

A published row, and the value a comparison is about, is a number on a finite set of items
(ABRICOT's 127 rows, DISCOTEX's 1,600 test rows). :func:`task_total` reads N off the runs
compared: a run that scored the whole task holds N items (its record names no ``--limit``,
``--sample`` or ``--shard``; an lm-eval log is not taken for a whole task, since its own
``--limit`` is not in the record); else the task's items are counted from its data when that is
here (where the run recorded it, or where `run` finds it) and is the data the run recorded (the same
SHA-256). Where the recorded files are not here (a run folder copied from another machine), the data the
user gave (:class:`GivenData`: `compare --data KEY=PATH`, `--data-dir DIR`) is where they are counted. None:
not known here, or a run compared scored --limit's first items (no draw of the task), and a verdict then
speaks of items like these only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from abricot_local.errors import AbricotError

SELECTION = ("limit", "sample", "shard")  # what a run records when it scored only some items
LM_EVAL_KEY = "lm_eval_task"  # a task config read from an lm-eval log (analysis/lm_eval_input.py)


@dataclass(frozen=True)
class GivenData:
    """The data a user gave a command reading finished runs (TaskOptions' ``data`` and ``data_dir``: `--data
    KEY=PATH`, `--data-dir DIR`): where a task's items are counted when the files a run recorded are not here."""

    data: tuple[tuple[str, str], ...] = ()  # (data key or task, path)
    data_dir: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", tuple((str(k), str(v)) for k, v in self.data))
        object.__setattr__(self, "data_dir", None if self.data_dir is None else str(self.data_dir))

    def __bool__(self) -> bool:
        return bool(self.data) or self.data_dir is not None


NOTHING_GIVEN = GivenData()


def given_data(data: Sequence[tuple[str, str]] = (), data_dir: str | None = None) -> GivenData:
    """The data a command was given (--data pairs, parsed; --data-dir), each path checked here: one that is not
    here is a DataError naming its option, not an N silently unknown."""
    from pathlib import Path

    from abricot_local.errors import DataError, opt

    for key, path in data:
        if not Path(path).expanduser().exists():
            raise DataError(f"{opt('data', (key, path))}: not found")
    if data_dir is not None and not Path(data_dir).expanduser().is_dir():
        raise DataError(f"{opt('data_dir', data_dir)}: folder not found")
    return GivenData(tuple(data), data_dir)


def whole(config) -> bool:
    """Whether a run's task (its config: the run's with the task's over it) scored every item."""
    return all(config.get(k) is None for k in SELECTION) and LM_EVAL_KEY not in config


def _recorded(run) -> tuple[tuple[str, str], ...]:
    """``--data`` pairs finding again the data files ``run`` (a runs.Run) recorded (none: not here)."""
    from abricot_local.analysis.lm_eval_input import recorded_data

    try:
        return recorded_data([run])
    except AbricotError:
        return ()


def counted(view, task: str, given: GivenData = NOTHING_GIVEN) -> int | None:
    """The items of ``task`` as built from its data here: the files ``view`` recorded where they are here, else
    the data ``given`` (its --data, then its --data-dir), else the cache; None: no data, or not the data
    ``view`` recorded (its SHA-256)."""
    return _count(view, task, given)[0]


def _count(view, task: str, given: GivenData) -> tuple[int | None, str]:
    """:func:`counted`, with why the data ``given`` counted nothing ("": none given, or the items counted)."""
    t = view.task(task)
    recorded = _recorded(view)
    mine = replace(t.options, data=given.data, data_dir=given.data_dir)
    tries = [replace(mine, data=(*given.data, *recorded)), mine] if given else []  # a key's last pair counts
    why = ""
    for options in dict.fromkeys([*tries, replace(t.options, data=recorded)]):  # then the recorded, else the cache
        n = _items(view, t, options)
        if isinstance(n, int):
            return n, ""
        why = n if options == mine else why
    return None, why


def _given_for(t, given: GivenData) -> str:
    """What of ``given`` names the data of ``view``'s task ``t`` (its --data-dir, its --data pairs; "": none)."""
    from abricot_local.tasks import task_class

    try:
        cls = task_class(t.own_key)
        keys = (cls.data.key, cls.name)
    except AbricotError:
        keys = ()
    return ", ".join([*(f"{k}={v}" for k, v in given.data if k in keys), *filter(None, [given.data_dir])])


def _items(view, t, options) -> int | str:
    """The items of ``view``'s task ``t`` built with ``options``, else why not: not the data it recorded (another
    SHA-256), or the task could not be built from it (its error's first line)."""
    from abricot_local.errors import recorded_text
    from abricot_local.tasks import make_task

    try:
        made = make_task(t.own_key, options)
        recorded = view.settings.get(f"{t.own_key}.data_sha256")
        files = made.data_files()
        if recorded and sorted(str(f.sha256) for f in files) != sorted(map(str, recorded)):
            other = [f.path.name for f in files if str(f.sha256) not in map(str, recorded)]
            return f"not the data the runs recorded (another SHA-256: {', '.join(other) or 'the files it holds'})"
        return len(made.items())
    except (AbricotError, OSError, ValueError, KeyError) as err:
        text = recorded_text(err) if isinstance(err, AbricotError) else str(err) or type(err).__name__
        return f"the task could not be built from it ({(text.splitlines() or [''])[0]})"


def drawn(config) -> bool:
    """Whether a run's task items are a draw of the task (every item, --sample's, a shard of either), not
    --limit's first ones (the FPC, and a verdict on the task's own value, want a draw)."""
    return config.get("limit") is None


def task_total(views: Sequence, task: str, given: GivenData = NOTHING_GIVEN) -> int | None:
    """The items ``task`` holds, from the runs compared (``views``: the runs.Run compared), else its data (where
    they recorded it, else ``given``); None too when a run compared scored --limit's first items, which are no
    draw of the task (whole ones aside)."""
    return task_count(views, task, given)[0]


def task_count(views: Sequence, task: str, given: GivenData = NOTHING_GIVEN) -> tuple[int | None, str]:
    """:func:`task_total`, and a note where data was given for ``task`` and counted nothing, saying why ("": no
    data given for it, or N known: from a whole run, or counted)."""
    mine = [v for v in views if v.task(task) is not None]
    if any(not whole(v.task(task).config) and not drawn(v.task(task).config) for v in mine):
        return None, _unused(task, mine, given, "a run compared scored the task's first items (a limit), no draw of it")
    scored = [len(v.task(task).samples) for v in mine if whole(v.task(task).config)]
    if scored:
        return max(scored), ""
    why = ""
    for v in mine:
        n, reason = _count(v, task, given)
        if n is not None:
            return n, ""
        why = why or reason
    return None, _unused(task, mine, given, why) if why else ""


def _unused(task: str, views: Sequence, given: GivenData, why: str) -> str:
    """compare's note on the data given for ``task`` that counted none of its items ("": none given for it)."""
    where = _given_for(views[0].task(task), given) if views and given else ""
    return (f"task {task}: its items (N) not counted from the data given ({where}): {why}; its verdicts are for "
            "items like these") if where else ""
