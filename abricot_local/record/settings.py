"""A record's settings as readers compare them: flat (:func:`settings`: every recorded setting of a run,
dotted keys), and typed differences between two sections of one kind (:func:`differences`: which field
differs, with both values); :func:`overlay` lays one section's fields over another's. The one place a
record, a manifest or a provenance is seen as JSON values to be compared, outside writing it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from abricot_local.record.codec import Section, dump
from abricot_local.record.schema import Record, RunConfig

SUBSET = ("limit", "sample", "shard")  # RunConfig's fields that score only some of a task's items
ITEM_SELECTION = ("tasks", *SUBSET)  # choose items (compare matches the items themselves)
PROVENANCE_SKIP = ("bootstrap",)  # the task seed again
# a task's config key that says in words where its items came from (DISCOTEX's `items`: published rows from a folder
# or the hub, or rebuilt from the release in a folder): provenance, as `data[].path` is. The data is judged by its
# files' SHA-256 (`TASK.data_sha256`), never by this text, which names the same files otherwise from another folder
# or as a run recorded them before the folder was absolute
TASK_PROVENANCE = ("items",)
# an option as given (the config's KEY) -> the `provenance.schedule` field in which the backend records what it
# resolved it to (docs/RESULTS.md: `flash_attn` auto -> `flash_attn_resolved` on/off, `n_gpu_layers` -1 -> 0 or 999, `extra_bufts`
# auto -> true/false, `n_batch` capped at n_ctx). The one mapping: where the record holds the resolved value, the
# settings compare and the labels judge the option by it (:func:`options`), never by the value asked (the config's,
# and `schedule.KEY`'s where it repeats it): asked `auto` and `on`, both run `on`, is one setting
RESOLVED = {"flash_attn": "flash_attn_resolved", "n_gpu_layers": "n_gpu_layers", "extra_bufts": "extra_bufts",
            "n_batch": "n_batch"}


@dataclass(frozen=True)
class Difference:
    """One field two sections record otherwise: its dotted key (``config``, ``schedule.n_batch``) and
    both values as JSON values (None: not recorded)."""

    key: str
    a: Any
    b: Any

    @property
    def top(self) -> str:
        """The section's own field that holds it (``schedule`` of ``schedule.n_batch``)."""
        return self.key.split(".", 1)[0]


def _flatten(out: dict, prefix: str, value: Any, depth: int | None) -> None:
    if isinstance(value, dict) and (depth is None or depth > 0):
        for k, v in value.items():
            _flatten(out, f"{prefix}.{k}" if prefix else str(k), v, None if depth is None else depth - 1)
    elif value is not None:
        out[prefix] = value


def flat(value: Any, depth: int | None = None) -> dict[str, Any]:
    """A section (or a JSON object) as dotted keys to its values, None left out; ``depth``: how many
    levels of objects are opened (None: every one, down to the leaves; lists are leaves)."""
    out: dict[str, Any] = {}
    _flatten(out, "", dump(value) if isinstance(value, Section) else value, depth)
    return out


def same_record(a, b) -> bool:
    """Whether two records (record.Record) hold the same values, NaN equal to NaN (a run had twice: `evaluate`'s and
    `load_run`'s): compared as results.json holds them, here, where the record's form is known."""
    return equal(a.to_dict(), b.to_dict())


def equal(x: Any, y: Any) -> bool:
    """Equal JSON values, NaN equal to NaN."""
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(equal(a, b) for a, b in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(equal(x[k], y[k]) for k in x)
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return x == y


def close(x: Any, y: Any, rel: float = 1e-9) -> bool:
    """Equal JSON values, NaN equal to NaN, two floats within ``rel`` of each other (a bootstrap's
    percentiles come from numpy, whose vectorised math may differ in the last bits on another CPU)."""
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(close(a, b, rel) for a, b in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(close(x[k], y[k], rel) for k in x)
    if isinstance(x, float) and isinstance(y, float):
        return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=rel, abs_tol=1e-12)
    return equal(x, y)


def differences(a: Section | None, b: Section | None, *, depth: int | None = None,
                same: Callable[[Any, Any], bool] = equal) -> tuple[Difference, ...]:
    """Every field (a key a section keeps untyped too) whose value differs between ``a`` and ``b``,
    in the order they record them: ``depth`` 1 compares each field whole, None each leaf; a field one of
    them lacks is None there (so absent and null are the same); ``same``: when two values are equal."""
    fa, fb = flat(a, depth) if a is not None else {}, flat(b, depth) if b is not None else {}
    return tuple(Difference(k, fa.get(k), fb.get(k)) for k in dict.fromkeys([*fa, *fb])
                 if not same(fa.get(k), fb.get(k)))


def overlay(under: Section, over: Section) -> Section:
    """``under`` with every field and key ``over`` records (not null) laid over it (what a re-scoring here
    recorded over what the run recorded)."""
    return type(under).from_dict({**under.to_dict(), **{k: v for k, v in over.to_dict().items() if v is not None}})


def settings(record: Record, quant: str = "") -> dict[str, Any]:
    """Every recorded setting of a run, flat: the model's SHA-256 (and ``quant``, as the reader
    identified it), the config (but what only selects items, and an option as given that every task records
    as it resolved it: `prompt_variant` null beside each task's `card` is the same run as `card` given; an option
    the backend recorded resolved, as it resolved: :data:`RESOLVED`), the provenance (schedule, build, CPU features,
    devices; not the bootstrap), each task's config (not where its items came from: :data:`TASK_PROVENANCE`), version,
    prompt hash and data SHA-256."""
    out: dict[str, Any] = {}
    _flatten(out, "model_sha256", record.model.sha256, None)
    _flatten(out, "quant", quant or None, None)
    tasks = per_task(record)
    _flatten(out, "", {k: v for k, v in options(record).items() if k not in tasks}, None)
    prov = dump(record.provenance) if record.provenance is not None else {}
    prov = {k: v for k, v in prov.items() if k not in PROVENANCE_SKIP}
    if ran := resolved(record):  # said by the option: not again as the schedule's asked value and resolved field
        said = {f for k in ran if RESOLVED[k] != k for f in (k, RESOLVED[k])}  # (one field: as the option, kept)
        prov["schedule"] = {k: v for k, v in prov["schedule"].items() if k not in said}
    _flatten(out, "provenance", prov, None)
    for task, entry in record.tasks.items():
        _flatten(out, f"{task}.config", {k: v for k, v in dump(entry.config).items() if k not in TASK_PROVENANCE}, None)
        _flatten(out, f"{task}.version", entry.version, None)
        _flatten(out, f"{task}.prompt_hash", entry.prompt_hash or None, None)
        _flatten(out, f"{task}.data_sha256", [f.sha256 for f in entry.data] or None, None)
    return out


def per_task(record: Record) -> set[str]:
    """The settings every task of the run records in its own config: compared task by task (``TASK.config.KEY``),
    never as the run's option as given (``protocol`` all beside each task's paper or calamita). The one rule of
    :func:`settings` and of the labels (analysis.runs.Run.identity)."""
    return set.intersection(*(set(dump(e.config)) for e in record.tasks.values())) if record.tasks else set()


def resolved(record: Record) -> dict[str, Any]:
    """The options of :data:`RESOLVED` the record holds resolved (its `provenance.schedule`), by the option's key:
    what the run ran with where it asked `auto` or more than the backend gave."""
    schedule = record.provenance.schedule if record.provenance is not None else {}
    return {k: schedule[f] for k, f in RESOLVED.items() if schedule.get(f) is not None}


def options(record: Record) -> dict[str, Any]:
    """The run's recorded options (its config), but what only selects items, each as it resolved where the record
    holds that (:func:`resolved`; the config keeps it as asked): what tells apart two runs of one model besides the
    items they scored."""
    config = {k: v for k, v in record.config_dict().items() if k not in ITEM_SELECTION}
    return {**config, **resolved(record)}


def subset(config: RunConfig | None) -> tuple[str, ...]:
    """The options of :data:`SUBSET` a run's ``config`` (its typed ``config``; None: none recorded) sets: what it
    scored only some of each task's items by (none: every item)."""
    return tuple(k for k in SUBSET if config is not None and getattr(config, k) is not None)


def task_keys(config: RunConfig | None) -> tuple[str, ...]:
    """The task keys a run's ``config`` (its typed ``config``, or a manifest's; None: none recorded) records: the tasks
    the run resolved, () when none are recorded."""
    return tuple(config.tasks or ()) if config is not None else ()
