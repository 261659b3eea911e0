"""`check` holds a run to its data: what the recorded run says it scored, rebuilt from the data files.

A run's samples and results.json agree with each other after any edit that recomputes one from the
other, so `check` does not take them on their word. Each task is rebuilt from the recorded data file
(verified by its SHA-256) and the run's recorded options, with the recorded --limit/--sample/--shard;
then, per item, every field the data decides is compared with the samples line: the context, the
choices, the continuations, the gold (and its label), the source and the task's own fields (an ABRICOT
human mean, the shot ids, the target word); the prediction against the argmax of its log-probs; the
item set and ``n``; the task entry's version, prompt hash and config (each setting, the shots drawn).
The published block is made again from the published rows (the model's registry entry, else the
recorded ``reproduces``; the values from the tasks' own tables) and the recorded samples. Every
difference is one line naming the task, the item and the field. No task or backend is named here.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

from abricot_local.analysis.overview import VerdictTask, published_differences, reproduced_tasks
from abricot_local.core import argmax
from abricot_local.record import Record, Sample, TaskEntry

MAX_LINES = 40  # per task: the differences named, then how many more


def _same(x: Any, y: Any) -> bool:
    """Equal as JSON values, NaN equal to NaN, two floats within 1e-9 relative (a bootstrap's percentiles
    come from numpy, whose vectorised math may differ in the last bits on another CPU)."""
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, float) and isinstance(y, float):
        return (x != x and y != y) or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    return x == y and type(x) is type(y) or (isinstance(x, (int, float)) and isinstance(y, (int, float))
                                             and not isinstance(x, bool) and not isinstance(y, bool) and x == y)


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 70 else text[:67] + "..."


def _items(run, entry: TaskEntry, samples: Sequence[Sample]) -> list[str]:
    """One task's samples against its items rebuilt from the data (``run``: a planning.TaskRun)."""
    key, task = run.task.key, run.task
    data = {it.id: it for it in run.items}
    out = []
    if entry.n != len(run.items):
        out.append(f"{key} n: recorded {entry.n}, the data gives {len(run.items)} item(s)")
    invented = [s.id for s in samples if s.id not in data]
    if invented:
        more = f" and {len(invented) - 5} more" if len(invented) > 5 else ""
        out.append(f"{key}: {len(invented)} recorded item(s) are not items of the data (as the run selected them): "
                   f"{', '.join(invented[:5])}{more}")
    for s in samples:
        item = data.get(s.id)
        if item is None:
            continue
        want = {"context": item.context, "choices": list(item.choices), "continuations": list(item.continuations),
                "gold": item.gold, "gold_label": task.label_of(item.gold, item), "source": item.source}
        got = {"context": s.context, "choices": list(s.choices), "gold": s.gold, "gold_label": s.gold_label,
               "source": s.source, "continuations": list(s.continuations or ())}
        if s.continuations is None:  # a run of a version before they were recorded
            del want["continuations"], got["continuations"]
        for name, value in _json(item.fields).items():
            want[name], got[name] = value, _json(s.fields.get(name))
        pred = argmax(s.logprobs)
        want["pred"], got["pred"] = pred, s.pred
        if s.pred_label is not None and 0 <= s.pred < len(item.choices):
            want["pred_label"], got["pred_label"] = task.label_of(s.pred, item), s.pred_label
        got = _json(got)
        for name, value in _json(want).items():
            if not _same(got.get(name), value):
                why = "the argmax of its log-probs" if name in ("pred", "pred_label") else "the data gives"
                out.append(f"{key} item {s.id} {name}: recorded {_shown(got.get(name))}, {why} {_shown(value)}")
    return out


def _entry(task, entry: TaskEntry) -> list[str]:
    """A task entry's prompt hash and config against the task rebuilt from the run's options (a run of an
    earlier task version is rebuilt as that version ran, through the options it recorded). Each recorded
    config value is compared but a text that only describes (a path, where rows came from: not a setting
    the task declares), which may differ on another machine."""
    key = task.key
    out = []
    if entry.prompt_hash is not None and entry.prompt_hash != task.prompt_hash():
        out.append(f"{key} prompt_hash: recorded {entry.prompt_hash[:12]}..., the task's prompts hash to "
                   f"{task.prompt_hash()[:12]}...")
    fresh, recorded = _json(task.config()), _json(entry.config)
    settings = set(task.settings()) | {"protocol"}
    for name in recorded:  # a key a run of an earlier version did not record is not held against it
        a, b = recorded[name], fresh.get(name)
        if isinstance(b, str) and isinstance(a, str) and name not in settings:
            continue  # a description (where the rows came from), not a setting
        if not _same(a, b):
            out.append(f"{key} config.{name}: recorded {_shown(a)}, the run's options give {_shown(b)}")
    return out


def expected_reproduces(record: Record) -> str:
    """The published rows the run is held to: its model's registry entry's ``reproduces``, else (a model
    no shipped or user registry names) the recorded one."""
    from abricot_local.errors import AbricotError
    from abricot_local.models.registry import load_registry

    recorded = (record.published.reproduces if record.published else None) or ""
    name = record.model.alias  # a registry alias (a path, or a synthetic model named like one: none)
    try:
        spec = load_registry().get(name) if name else None
    except AbricotError:
        spec = None
    return spec.reproduces if spec is not None else recorded


def published(record: Record, runs, samples: dict[str, list[Sample]]) -> list[str]:
    """The recorded published block against the one made again from the published rows (the model's registry
    entry's, expected_reproduces), each task's items rebuilt from its data (``runs``) and the recorded samples."""
    reproduces = expected_reproduces(record)
    wanted = reproduced_tasks(reproduces)
    tasks = [VerdictTask(r.task.key, r.task, tuple(samples[r.task.key]), len(r.task.items()))
             for r in runs if r.task.name in wanted]
    return list(published_differences(record, reproduces, tasks, block=True))


def differences(run, runs, samples: dict[str, list[Sample]]) -> tuple[str, ...]:
    """Every way the recorded run (analysis.runs.Run) differs from its data (module text); ``runs``: the
    tasks rebuilt with the recorded options and selection (tasks.selection, chat-wrapped as the run was)."""
    record = run.record
    out: list[str] = []
    for run in runs:
        key = run.task.key
        lines = [*_entry(run.task, record.tasks[key]), *_items(run, record.tasks[key], samples[key])]
        out += lines[:MAX_LINES] + ([f"{key}: and {len(lines) - MAX_LINES} more difference(s)"]
                                    if len(lines) > MAX_LINES else [])
    return (*out, *published(record, runs, samples))
