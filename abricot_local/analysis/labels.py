"""One label per run, unique among the runs shown together: the model, plus the shortest
part that tells apart runs of the same model (the quant, the items it scored: ``sample 20``,
``limit 5``, ``all 1600``; a recorded option, the folder or the time the run was written). The text report, the HTML page, the figures and compare
all name runs through :func:`unique_labels` (compare over the tasks it compares: matching.compared_runs). An option
a run's tasks record with several values (``shots`` 3 and 0: RunIdentity.mixed) names no label: "no shots" is an option
not set, never "mixed". Pure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import PurePath
from typing import Any, Callable, Collection, Mapping, Sequence

MAX_OPTION = 24  # an option longer than this as `key=value` does not make a label



@dataclass(frozen=True)
class RunIdentity:
    """What a label may say of a run."""

    model: str  # the model's label (registry alias, else file name or the fake's label)
    quant: str = ""
    folder: str = ""
    created: str = ""  # when results.json was written (ISO 8601)
    # the recorded options (flat), not the item selection, each as it resolved where the record holds that
    # (record.settings.options: `flash_attn` as llama.cpp ran it, never the `auto` asked)
    options: Mapping[str, Any] = field(default_factory=dict)
    names_quant: bool = False  # the model's label already says its quant
    scored: str = ""  # the items it scored: "sample 20", "limit 5", "all 1600"
    # what every task of the run records it ran with (:func:`task_values`): an option left unset (None) reads
    # its value here (`prompt_variant` null beside each task's `card` is a run of `card`; a default is the value)
    resolved: Mapping[str, Any] = field(default_factory=dict)
    mixed: frozenset[str] = frozenset()  # what its tasks record with several values (:func:`task_settings`)

    def option(self, key: str) -> Any:
        """The option ``key`` as the run ran it: as given, else as every task records it resolved (None: neither)."""
        given = self.options.get(key)
        return self.resolved.get(key) if given is None else given


def task_values(configs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The settings every one of a run's tasks records with one value (their configs as recorded): the
    options they resolved alike (RunIdentity.resolved)."""
    if not configs:
        return {}
    first = configs[0]
    return {k: v for k, v in first.items()
            if v is not None and all(k in c and json.dumps(c[k], sort_keys=True, default=str) ==
                                     json.dumps(v, sort_keys=True, default=str) for c in configs[1:])}


def per_task_options(run_configs: Sequence[Mapping[str, Any]], compared: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """The options of a run judged task by task over the tasks compared (``compared``: their own configs as recorded;
    ``run_configs``: every task's of the run), never as the run's option as given: one every task compared records
    (record.settings.per_task's rule, over them), and one that reaches only a task that uses it (tasks.uses.declared:
    `protocol`, `shots`...) where a task of the run records it: a task compared that records none does not
    use it (DISCOTEX beside ABRICOT's `protocol`). The one rule of the settings compare says differ
    (analysis.differing.compared_settings) and of the labels (analysis.runs.Run.identity)."""
    from abricot_local.tasks.uses import declared

    every = set.intersection(*(set(c) for c in compared)) if compared else set()
    return frozenset(every | {k for k in declared() if any(k in c for c in run_configs)})


def options_over(run_configs: Sequence[Mapping[str, Any]], configs: Sequence[Mapping[str, Any]],
                 options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], frozenset[str]]:
    """:func:`task_settings` over the tasks compared (``configs``; ``run_configs``: every task's of the run), each
    option judged by :func:`per_task_options`: the label of a run over the tasks compare compares (Run.identity)."""
    return task_settings(configs, options, per_task_options(run_configs, configs))


def task_settings(configs: Sequence[Mapping[str, Any]], options: Mapping[str, Any],
                  per_task: Collection[str]) -> tuple[dict[str, Any], dict[str, Any], frozenset[str]]:
    """A run's options for its label (RunIdentity's ``options``, ``resolved``, ``mixed``) from its tasks' configs as
    recorded and its ``options`` as given: one judged task by task (``per_task``: :func:`per_task_options`) as the
    tasks that record it resolved it, their one value (None where they differ or none records it), never the value
    given; and the settings its tasks record with several values (`shots` 3 on abricot_abs, 0 on
    abricot_abs@calamita: no one value for a label to name)."""
    every = set.intersection(*(set(c) for c in configs)) if configs else set()
    seen = {k: [c[k] for c in configs if k in c] for k in every | set(per_task)}
    mixed = {k for k, vs in seen.items() if len({json.dumps(v, sort_keys=True, default=str) for v in vs}) > 1}
    resolved = task_values(configs) | {k: vs[0] for k, vs in seen.items()
                                       if k in per_task and k not in mixed and vs and vs[0] is not None}
    return {k: resolved.get(k) if k in per_task else v for k, v in options.items()}, resolved, frozenset(mixed)


def _value(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def _quant(runs: Sequence[RunIdentity]) -> list[str] | None:
    if any(r.names_quant for r in runs):
        return None
    return [r.quant or "no quant" for r in runs]


def _scored(runs: Sequence[RunIdentity]) -> list[str] | None:
    return [r.scored for r in runs] if all(r.scored for r in runs) else None


def _option(runs: Sequence[RunIdentity]) -> list[str] | None:
    """The option that tells most of ``runs`` apart, the shortest such one, each run's as it ran it
    (RunIdentity.option: a value left unset that its tasks resolved is that value); not one a run's tasks record
    with several values (RunIdentity.mixed: a label would say one)."""
    keys = dict.fromkeys(k for r in runs for k in r.options if k != "model")
    best = None
    for key in keys:
        if any(key in r.mixed for r in runs):
            continue
        texts = [f"{key}={_value(v)}" if (v := r.option(key)) is not None else f"no {key}" for r in runs]
        if max(map(len, texts)) > MAX_OPTION or len(set(texts)) < 2:
            continue
        rank = (-len(set(texts)), max(map(len, texts)))
        if best is None or rank < best[0]:
            best = (rank, texts)
    return best[1] if best else None


def _folder(runs: Sequence[RunIdentity]) -> list[str] | None:
    """The shortest ending of the folders' paths (whole components) that tells them apart."""
    parts = [PurePath(r.folder).parts for r in runs]
    for k in range(1, max(map(len, parts), default=0) + 1):
        tails = ["/".join(p[-k:]) for p in parts]
        if len(set(tails)) == len(set(map(tuple, parts))):
            return tails
    return None


def _time(runs: Sequence[RunIdentity]) -> list[str] | None:
    times = [re.sub(r"(\.\d+)?([+-]\d\d:\d\d|Z)?$", "", r.created).replace("T", " ") for r in runs]
    for cut in (slice(11, 16), slice(11, 19), slice(0, 16), slice(0, 19)):  # HH:MM, HH:MM:SS, dates
        short = [t[cut] for t in times]
        if all(short) and len(set(short)) == len(set(times)):
            return short
    return None


def _shortest(runs: Sequence[RunIdentity]) -> list[str] | None:
    """The folder or the time, whichever is shorter."""
    found = [x for x in (_folder(runs), _time(runs)) if x and len(set(x)) > 1]
    return min(found, key=lambda x: max(map(len, x))) if found else None


TELLERS: tuple[Callable[[Sequence[RunIdentity]], list[str] | None], ...] = (_quant, _scored, _option, _option,
                                                                             _shortest)


def unique_labels(runs: Sequence[RunIdentity]) -> tuple[str, ...]:
    """A label per run, in order: ``model``, or ``model (part, ...)`` for runs of one model,
    the parts added one kind at a time (quant, the items scored, an option, a second option, the
    folder or the time) to the runs still sharing a label; ``#k`` (the run's position) when nothing tells
    them apart (one folder given twice)."""
    parts: list[list[str]] = [[] for _ in runs]

    def label(k: int) -> str:
        return runs[k].model + (f" ({', '.join(parts[k])})" if parts[k] else "")

    for tell in TELLERS:
        order = sorted(range(len(runs)), key=label)
        for _, same in groupby(order, key=label):
            same = list(same)
            if len(same) < 2:
                continue
            texts = tell([runs[k] for k in same])
            if texts and len(set(texts)) > 1:
                for k, t in zip(same, texts):
                    parts[k].append(t)
    labels = [label(k) for k in range(len(runs))]
    return tuple(lab if labels.count(lab) == 1 else f"{lab} #{k + 1}" for k, lab in enumerate(labels))
