"""How many items a task holds: the N of a verdict's finite-population correction.

A published row, and the value a comparison is about, is a number on a finite set of items
(ABRICOT's 127 rows, DISCOTEX's 1,600 test rows). :func:`task_total` reads N off the runs
compared, by the published verdict's rule (baselines.items_total): the N a run recorded (its task entry's
``available``, else its verdict's ``items_total``), so the same runs give the same N wherever their data is;
two runs that recorded different Ns give none (a note says so). A record without it (lm-eval's, an older run's):
a run that scored the whole task holds N items (its record names no ``--limit``, ``--sample`` or ``--shard``;
an lm-eval log is not taken for a whole task, since its own ``--limit`` is not in the record); else the
task's items are counted from its data when that is here (where the run recorded it, or where `run` finds
it) and is the data the run recorded (the same SHA-256). Where the recorded files are not here (a run folder
copied from another machine), the data the user gave (:class:`GivenData`: `compare --data KEY=PATH`,
`--data-dir DIR`) is where they are counted. None: not known here, or a run compared scored --limit's first
items (no draw of the task), and a verdict then speaks of items like these only; compare's notes say why once
per task (:func:`task_count`: the data given that counted none, else the data here, and the option that gives it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from abricot_local.analysis.baselines import items_total
from abricot_local.errors import AbricotError, opt
from abricot_local.record.settings import subset

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

    from abricot_local.errors import DataError

    for key, path in data:
        if not Path(path).expanduser().exists():
            raise DataError(f"{opt('data', (key, path))}: not found")
    if data_dir is not None and not Path(data_dir).expanduser().is_dir():
        raise DataError(f"{opt('data_dir', data_dir)}: folder not found")
    return GivenData(tuple(data), data_dir)


def whole(view, task: str) -> bool:
    """Whether run ``view`` (a runs.Run) scored every item of its ``task``: its config selects none
    (record.settings.subset) and the task is no lm-eval log's (whose own --limit the record may not hold)."""
    entry = view.task(task).entry
    return not subset(view.record.config) and LM_EVAL_KEY not in (entry.config if entry is not None else {})


def drawn(view) -> bool:
    """Whether run ``view``'s task items are a draw of the task (every item, --sample's, a shard of either), not
    --limit's first ones (the FPC, and a verdict on the task's own value, want a draw)."""
    return "limit" not in subset(view.record.config)


def recorded_total(view, task: str) -> int | None:
    """``task``'s N as run ``view`` recorded it, by the published verdict's rule (baselines.items_total: its
    entry's ``available``, else its verdict's ``items_total``), else, a run that scored the whole task, the items
    it scored; None: not recorded (an lm-eval output, an older record), to be counted from the data."""
    t = view.task(task)
    scored = len(t.samples) if whole(view, task) else None
    return items_total(t.own_key, t.entry, view.record.published, scored)


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
    """:func:`counted`, with why nothing was counted ("": the items counted): why the data ``given`` counted
    none, else (none given) why the data here (the recorded files, the cache) counted none."""
    t = view.task(task)
    recorded = _recorded(view)
    mine = replace(t.options, data=given.data, data_dir=given.data_dir)
    tries = [replace(mine, data=(*given.data, *recorded)), mine] if given else []  # a key's last pair counts
    why, here = "", ""
    for options in dict.fromkeys([*tries, replace(t.options, data=recorded)]):  # then the recorded, else the cache
        n = _items(view, t, options)
        if isinstance(n, int):
            return n, ""
        why, here = (n if given and options == mine else why), n
    return None, why or here


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
        recorded = [f.sha256 for f in t.entry.data] if t.entry is not None else []
        files = made.data_files()
        if recorded and sorted(str(f.sha256) for f in files) != sorted(map(str, recorded)):
            other = [f.path.name for f in files if str(f.sha256) not in map(str, recorded)]
            return f"not the data the runs recorded (another SHA-256: {', '.join(other) or 'the files it holds'})"
        return len(made.items())
    except (AbricotError, OSError, ValueError, KeyError) as err:
        text = recorded_text(err) if isinstance(err, AbricotError) else str(err) or type(err).__name__
        return f"the task could not be built from it ({(text.splitlines() or [''])[0]})"


def task_total(views: Sequence, task: str, given: GivenData = NOTHING_GIVEN) -> int | None:
    """The items ``task`` holds, as the runs compared (``views``: the runs.Run compared) recorded it
    (:func:`recorded_total`), else counted from its data (where they recorded it, else ``given``); None when the
    runs recorded different Ns, or a run compared scored --limit's first items, which are no draw of the task
    (whole ones aside)."""
    return task_count(views, task, given)[0]


def task_count(views: Sequence, task: str, given: GivenData = NOTHING_GIVEN) -> tuple[int | None, str]:
    """:func:`task_total`, and a note where the runs recorded different Ns for ``task``, where data was given
    for it and counted nothing, or where none was and the data here counts nothing (with the option that gives
    it), saying why ("": N known, or --limit's runs with no data given for it)."""
    mine = [v for v in views if v.task(task) is not None]
    if any(not drawn(v) for v in mine):
        return None, _unused(task, mine, given, "a run compared scored the task's first items (a limit), no draw of it")
    recorded = {v.label or v.path: n for v in mine if (n := recorded_total(v, task)) is not None}
    if len(set(recorded.values())) > 1:
        said = ", ".join(f"{label} {n:,}" for label, n in recorded.items())
        return None, (f"task {task}: the runs compared recorded different numbers of items in it ({said}: different "
                      "data), so no N; its verdicts are for items like these")
    if recorded:
        return next(iter(recorded.values())), ""
    why = ""
    for v in mine:
        n, reason = _count(v, task, given)
        if n is not None:
            return n, ""
        why = why or reason
    return None, (_unused(task, mine, given, why) or _unknown(task, why)) if why else ""


def _unknown(task: str, why: str) -> str:
    """compare's note on a drawn ``task`` whose N neither the runs recorded nor the data here counts (``why``):
    no verdict on the task's own value, and the option that gives its data, in the door's words (errors.opt)."""
    return (f"task {task}: its items (N) not known here, so no interval for the task's own value: the runs compared "
            f"recorded no count of them, and the data here counts none: {why}; {opt('data_dir', 'DIR')} (the folder "
            "holding the data they recorded) counts them; its verdicts are for items like these")


def _unused(task: str, views: Sequence, given: GivenData, why: str) -> str:
    """compare's note on the data given for ``task`` that counted none of its items ("": none given for it)."""
    where = _given_for(views[0].task(task), given) if views and given else ""
    return (f"task {task}: its items (N) not counted from the data given ({where}): {why}; its verdicts are for "
            "items like these") if where else ""
