"""How many items a task holds: the N of a verdict's finite-population correction.

A published row, and the value a comparison is about, is a number on a finite set of items
(ABRICOT's 127 rows, DISCOTEX's 1,600 test rows). :func:`task_total` reads N off the runs
compared: a run that scored the whole task holds N items (its record names no ``--limit``,
``--sample`` or ``--shard``; an lm-eval log is not taken for a whole task, since its own
``--limit`` is not in the record); else the task's items are counted from its data when that is
here (where the run recorded it, or where `run` finds it) and is the data the run recorded (the same
SHA-256). None: not known here, or a run compared scored --limit's first items (no draw of the task), and
a verdict then speaks of items like these only.
"""

from __future__ import annotations

from typing import Sequence

from abricot_local.errors import AbricotError

SELECTION = ("limit", "sample", "shard")  # what a run records when it scored only some items
LM_EVAL_KEY = "lm_eval_task"  # a task config read from an lm-eval log (analysis/lm_eval_input.py)


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


def counted(view, task: str) -> int | None:
    """The items of ``task`` as built from its data here (None: no data, or not the data ``view`` recorded)."""
    from dataclasses import replace

    from abricot_local.tasks import make_task

    t = view.task(task)
    try:
        made = make_task(t.own_key, replace(t.options, data=_recorded(view)))
        recorded = view.settings.get(f"{t.own_key}.data_sha256")
        if recorded and sorted(str(f.sha256) for f in made.data_files()) != sorted(map(str, recorded)):
            return None
        return len(made.items())
    except (AbricotError, OSError, ValueError, KeyError):
        return None


def drawn(config) -> bool:
    """Whether a run's task items are a draw of the task (every item, --sample's, a shard of either), not
    --limit's first ones (the FPC, and a verdict on the task's own value, want a draw)."""
    return config.get("limit") is None


def task_total(views: Sequence, task: str) -> int | None:
    """The items ``task`` holds, from the runs compared (``views``: the runs.Run compared), else its data; None
    too when a run compared scored --limit's first items, which are no draw of the task (whole ones aside)."""
    if any(v.task(task) is not None and not whole(v.task(task).config) and not drawn(v.task(task).config)
           for v in views):
        return None
    scored = [len(v.task(task).samples) for v in views if v.task(task) is not None and whole(v.task(task).config)]
    if scored:
        return max(scored)
    for v in views:
        if v.task(task) is not None:
            n = counted(v, task)
            if n is not None:
                return n
    return None
