"""Task instances paired by what they scored, not only by their key.

One prompt can be recorded under several keys: ``--prompt-variant ita-bench`` keys DISCOTEX
``discotex``, ``--prompt-variant ita-bench,card`` keys the same prompts ``discotex~ita-bench`` (and
the card's ``discotex``), and an lm-eval output's tasks get the key of the first instance whose
items they match (lm_eval_input.py). :func:`align` pairs each task of the first run with the other
run's instance of the same task that scored the most of its items alike (same id, same scored
context and continuations: :func:`items.scored_key`), the same key winning a tie. An instance
paired under another key is compared under the first run's (its own kept in ``RunTask.key``),
with a note naming both; one it displaces is named ``TASK~VARIANT`` by its prompt variant (else
its key and the run's label), so it pairs with nothing by mistake. Instances of different tasks,
or with no item scored alike, are never paired.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from abricot_local.analysis.items import scored_key
from abricot_local.analysis.runs import Run, RunTask
from abricot_local.tasks import base_name, without_variant


def _keys(t: RunTask) -> set[tuple[str, str]]:
    return {(s.id, scored_key(s.context, s.continuations or s.choices)) for s in t.samples}


def _displaced(u: RunTask, run: Run, taken: set[str]) -> str:
    variant = u.config.get("prompt_variant")
    name = f"{without_variant(u.name)}~{variant}" if isinstance(variant, str) and variant else u.name
    return name if name not in taken else f"{u.name} ({run.label})"


def _align_one(first: Run, run: Run, notes: list[str]) -> Run:
    """``run``'s instances paired with ``first``'s: the pairs sharing most items first (the same key
    winning a tie), each instance once."""
    mine = [_keys(t) for t in first.run_tasks]
    theirs = [_keys(u) for u in run.run_tasks]
    scored = sorted(((len(mine[i] & theirs[k]), t.name == u.name, -i, -k) for i, t in enumerate(first.run_tasks)
                     for k, u in enumerate(run.run_tasks) if base_name(u.name) == base_name(t.name)), reverse=True)
    paired: dict[int, int] = {}  # run's instance -> first's task
    for n, _, i, k in scored:
        if n and -k not in paired and -i not in paired.values():
            paired[-k] = -i
    names = {first.run_tasks[i].name for i in paired.values()}
    tasks = list(run.run_tasks)
    for k, u in enumerate(run.run_tasks):
        t = first.run_tasks[paired[k]] if k in paired else None
        if t is not None and t.name != u.name:
            tasks[k] = u.renamed(t.name)
            n = len(mine[paired[k]] & theirs[k])
            notes.append(f"task {t.name}: run {run.label} recorded it as {u.name}; paired on the {n} item(s) "
                         "both scored alike (same id, same scored context)")
        elif t is None and u.name in names:  # its key is another instance's now: named by its variant
            tasks[k] = u.renamed(_displaced(u, run, {x.name for x in first.run_tasks}))
    return replace(run, run_tasks=tuple(tasks))


def align(runs: Sequence[Run]) -> tuple[list[Run], list[str]]:
    """The runs with each other run's task instances paired to the first run's by what they
    scored (see the module), and a note per instance paired under another key."""
    notes: list[str] = []
    if len(runs) < 2:
        return list(runs), notes
    return [runs[0], *(_align_one(runs[0], r, notes) for r in runs[1:])], notes
