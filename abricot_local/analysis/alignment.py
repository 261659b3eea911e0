"""Task instances paired by what they scored, not only by their key.

One prompt can be recorded under several keys: ``--prompt-variant ita-bench`` keys DISCOTEX
``discotex``, ``--prompt-variant ita-bench,card`` keys the same prompts ``discotex~ita-bench``,
and an lm-eval output's tasks get the key of the first instance whose items they match
(lm_eval_input.py). :func:`align` gives a task of the first run that another run lacks by name the
other run's instance of the same task that scored the same items (same id, same scored context
and continuations: :func:`items.scored_key`), the one sharing the most, under the first run's key
(its own key kept in ``TaskSamples.key``), with a note naming both keys. Nothing else is paired:
instances of different tasks, or with no item scored alike, stay apart.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from abricot_local.analysis.items import scored_key
from abricot_local.analysis.views import RunView, TaskSamples
from abricot_local.tasks import base_name


def _keys(t: TaskSamples) -> set[tuple[str, str]]:
    return {(s.id, scored_key(s.context, s.continuations or s.choices)) for s in t.samples}


def _shared(a: TaskSamples, b: TaskSamples) -> int:
    return len(_keys(a) & _keys(b))


def align(runs: Sequence[RunView]) -> tuple[list[RunView], list[str]]:
    """The runs with each task the first run has and another lacks by name taken from that run's
    instance of the same task that scored the same items, renamed; and a note per renaming."""
    if len(runs) < 2:
        return list(runs), []
    first, out, notes = runs[0], list(runs), []
    for t in first.tasks:
        for k, run in enumerate(out[1:], 1):
            if run.task(t.name):
                continue
            free = [u for u in run.tasks if not u.key and base_name(u.name) == base_name(t.name)
                    and not first.task(u.name)]
            scored = [(n, u) for u in free if (n := _shared(t, u))]
            if not scored:
                continue
            n, u = max(scored, key=lambda p: p[0])
            tasks = tuple(replace(x, name=t.name, key=x.name) if x is u else x for x in run.tasks)
            out[k] = replace(run, tasks=tasks)
            notes.append(f"task {t.name}: run {run.label} recorded it as {u.name}; paired on the {n} item(s) "
                         "both scored alike (same id, same scored context)")
    return out, notes
