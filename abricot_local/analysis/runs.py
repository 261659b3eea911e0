"""Finished runs as reports read them: each run folder's record with the model identity
comparisons use (:class:`Run`), their published checks and quantization pairs
(:class:`Report`), and the recomputation of recorded metrics from samples files.

Pure: reads output folders through :mod:`abricot_local.record` and returns frozen
dataclasses; nothing is printed. ``report/tables.py`` makes tables of them.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from dataclasses import dataclass, field, replace
from itertools import combinations
from pathlib import Path
from typing import Mapping

import numpy as np

from abricot_local.analysis import baselines as pub
from abricot_local.errors import ResultsError, UsageError
from abricot_local.gguf.file import quant_of, strip_quant  # noqa: F401  (report re-exports them)
from abricot_local.record import Record, Sample, entry_samples, read_run
from abricot_local.analysis.labels import RunIdentity, unique_labels
from abricot_local.analysis.stats import label_kl
from abricot_local.tasks.base import Reference



@dataclass(frozen=True)
class Metric:
    task: str
    name: str
    value: float
    ci: tuple[float, float] | None

    @property
    def key(self) -> str:
        return f"{self.task}.{self.name}"


@dataclass(frozen=True)
class Run:
    """One finished run folder, with the model identity the comparisons use."""

    path: Path
    name: str  # results.json model.name (alias, file stem, or the fake label)
    alias: str | None
    backend: str
    base: str  # registry ``base``, else the name without its quant suffix
    quant: str  # registry ``quant``, else parsed from the name or file, else ""
    registry_alias: str | None
    reproduces: tuple[Reference, ...]
    task_n: tuple[tuple[str, int], ...]
    metrics: tuple[Metric, ...]
    record: Record = field(repr=False, compare=False)
    label: str = ""  # unique among the runs of a report (run_labels); alone: the model's label
    # task key -> its samples, when they are not samples files of the folder (an lm-eval output)
    samples: Mapping[str, tuple[Sample, ...]] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if not self.label:
            object.__setattr__(self, "label", self.model_label)

    @property
    def model_label(self) -> str:
        return self.alias or self.name

    @property
    def identity(self) -> RunIdentity:
        """What this run's label may say (run_labels.unique_labels)."""
        return RunIdentity(self.model_label, self.quant, str(self.path), self.record.created or "",
                           self.record.config_dict(), not self.quant or bool(quant_of(self.model_label)))

    @property
    def synthetic(self) -> bool:
        """Numbers from a synthetic backend (the fake), not from a model."""
        return self.record.synthetic

    @property
    def source(self) -> str:
        kind = "run" if self.samples is None else "lm-eval output"
        return f"{kind} ({self.backend} backend, not a model)" if self.synthetic else kind

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.task_n)


@dataclass(frozen=True)
class RunCheck:
    run: Run
    check: pub.CICheck


@dataclass(frozen=True)
class QuantPair:
    """Two quants of one base model on one task, over the items both scored."""

    base: str
    task: str
    ref: Run  # the higher-precision quant: KL(ref || other)
    other: Run
    n_common: int
    agreement: float  # share of common items with the same pred
    kl_mean: float  # mean KL(ref || other) in nats between label distributions
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    runs: tuple[Run, ...]
    baselines: tuple[Reference, ...]
    checks: tuple[RunCheck, ...]
    quant: tuple[QuantPair, ...]


# -- loading ---------------------------------------------------------------------------------
def _match(model, registry: dict) -> object | None:
    """The registry entry of a recorded model: by alias or name, else its file's SHA-256 or name."""
    folded = {k.lower(): v for k, v in registry.items()}
    for key in (model.alias, model.name):
        if key and key.lower() in folded:
            return folded[key.lower()]
    sha, path = (model.sha256 or "").lower(), model.path
    for spec in registry.values():
        if sha and spec.sha256 and spec.sha256[0].lower() == sha:
            return spec
        if path and Path(spec.file).name == Path(path).name:
            return spec
    return None


def load_run(folder: str | Path, registry: dict | None = None, *, data: tuple[tuple[str, str], ...] = ()) -> Run:
    """A finished run folder, or an lm-eval output folder or results file (lm_eval_input.py; its
    tasks' data found with ``data``, ``--data KEY=PATH`` pairs, first); clean :class:`ResultsError`
    when it is missing, incomplete or malformed."""
    from abricot_local.analysis import lm_eval_input

    path = Path(folder)
    lm, own = None, None
    if lm_eval_input.is_lm_eval_output(path):
        lm = lm_eval_input.read(path, data)
        record, own = lm.record, dict(lm.samples)
    else:
        record = read_run(path)
    model = record.model
    metrics, task_n = [], []
    for task, entry in record.tasks.items():
        task_n.append((task, entry.n))
        metrics += [Metric(task, name, value, ci) for name, value, ci in entry.metric_items()]
    spec = _match(model, registry or {})
    label = model.alias or model.name or path.name
    quant = (spec.quant if spec else "") or (lm.quant if lm else "") or quant_of(label) or quant_of(model.path or "")
    base = (spec.base if spec else "") or (lm.base if lm else "") or strip_quant(label)
    reproduces = pub.parse_reproduces(spec.reproduces)[0] if spec else ()
    return Run(path, model.name or path.name, model.alias, record.backend, base, quant,
               spec.name if spec else None, reproduces, tuple(task_n), tuple(metrics), record, samples=own)


def load_all(folders, registry: dict | None = None) -> list[Run]:
    """The runs in ``folders``, in order: abricot-local runs first, then lm-eval outputs, whose items
    are matched to the tasks' items built from the data the others recorded (lm_eval_input.py)."""
    from abricot_local.analysis.lm_eval_input import is_lm_eval_output, recorded_data

    lm = [is_lm_eval_output(f) for f in folders]
    runs = {k: load_run(f, registry) for k, f in enumerate(folders) if not lm[k]}
    data = recorded_data([r.record for r in runs.values()]) if any(lm) else ()
    runs.update({k: load_run(f, registry, data=data) for k, f in enumerate(folders) if lm[k]})
    return [runs[k] for k in range(len(folders))]


def load_samples(run: Run, task: str) -> list[Sample]:
    """The samples of one task of a run, in item order, each line checked, as many as the
    record's ``n`` (record.entry_samples)."""
    entry = run.record.tasks.get(task)
    if entry is None:
        raise ResultsError(f"{run.path} has no task {task!r}")
    if run.samples is not None:
        return list(run.samples[task])
    return entry_samples(run.path, entry, task)


def labelled(runs) -> list[Run]:
    """The runs, each labelled uniquely among them (run_labels.unique_labels)."""
    labels = unique_labels([r.identity for r in runs])
    return [replace(r, label=lab) for r, lab in zip(runs, labels)]


def build(folders, *, registry: dict | None = None) -> Report:
    """Load the runs (each folder once), check them against the published rows, compare quants."""
    if not folders:
        raise UsageError("give at least one run folder")
    unique, seen = [], set()
    for folder in folders:
        key = Path(folder).resolve()
        if key not in seen:
            seen.add(key)
            unique.append(folder)
    runs = labelled(load_all(unique, registry))
    shown = tuple(dict.fromkeys(t for r in runs for t in r.tasks))
    bases = pub.all_references(shown)
    checks = []
    for r in runs:
        for ref in r.reproduces:
            c = pub.check_run(ref, r.record.tasks)
            if c is not None:
                if r.synthetic:
                    c = replace(c, notes=(f"{r.backend} backend, not the model", *c.notes))
                checks.append(RunCheck(r, c))
    return Report(tuple(runs), bases, tuple(checks), tuple(compare_quants(runs)))


# -- quantization comparison -----------------------------------------------------------------
def quant_bits(quant: str) -> float:
    """A quant's bits per weight as its name says (F16: 16, Q8_0: 8, Q4_K_M: 4; -1: not a quant name)."""
    q = quant.upper()
    if q in ("F32", "F16", "BF16"):
        return float(q.lstrip("BF"))
    m = re.match(r"I?Q(\d+)", q)
    return float(m.group(1)) if m else -1.0


def compare_pair(ref: Run, other: Run, task: str) -> QuantPair:
    """Agreement and mean KL of two runs on ``task`` over their common item ids."""
    a = {s.id: s for s in load_samples(ref, task)}
    b = {s.id: s for s in load_samples(other, task)}
    common = [i for i in a if i in b and len(a[i].logprobs) == len(b[i].logprobs)]
    notes = []
    ca, cb = ref.record.tasks[task].config, other.record.tasks[task].config
    diff = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
    if diff:
        notes.append(f"task config differs: {', '.join(diff)}")
    changed = sum(1 for i in common if a[i].context != b[i].context)
    if changed:
        notes.append(f"prompts differ on {changed} item(s)")
    if not common:
        return QuantPair(ref.base, task, ref, other, 0, math.nan, math.nan, (*notes, "no common items"))
    agree = sum(a[i].pred == b[i].pred for i in common) / len(common)
    kl = float(np.mean([label_kl(a[i].logprobs, b[i].logprobs) for i in common]))
    return QuantPair(ref.base, task, ref, other, len(common), agree, kl, tuple(notes))


def compare_quants(runs) -> list[QuantPair]:
    """Every pair of runs with the same base (case-insensitive) and different quants."""
    out = []
    for x, y in combinations(runs, 2):
        if x.base.lower() != y.base.lower() or x.quant.upper() == y.quant.upper():
            continue
        ref, other = (y, x) if quant_bits(y.quant) > quant_bits(x.quant) else (x, y)
        out.extend(compare_pair(ref, other, t) for t in ref.tasks if t in other.tasks)
    return out


# -- recomputation ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskCheck:
    task: str
    recorded: dict = field(compare=False)
    recomputed: dict = field(compare=False)
    mismatches: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _same(x, y) -> bool:
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, float) and isinstance(y, float) and x != x and y != y:
        return True
    return x == y


def recompute_entry(record: Record, task: str, samples, where: Path) -> TaskCheck:
    """One task's metrics and ``n`` recomputed from ``samples`` (its Sample lines) by the task's
    ``metrics()``, against the record's; a mismatch names the metric (or ``n``)."""
    from abricot_local.tasks import all_task_names, base_name, make_task
    from abricot_local.tasks.base import TaskOptions

    if base_name(task) not in all_task_names():
        raise ResultsError(f"{where}: unknown task {task!r} (written by another version?)")
    entry = record.tasks[task]
    opts = TaskOptions.from_config({**record.config_dict(), **entry.config})
    try:
        fresh = json.loads(json.dumps(make_task(task, opts).metrics(list(samples))))
    except KeyError as exc:  # another task's samples (DISCOTEX's metrics read `class`): one line, no traceback
        raise ResultsError(f"{where}: the samples of task {task} lack its field {exc.args[0]!r}: the file holds "
                           "another task's samples, or was changed") from None
    recorded = {**entry.metrics, "n": entry.n}
    fresh["n"] = len(samples)
    bad = tuple(k for k in sorted(set(recorded) | set(fresh)) if not _same(recorded.get(k), fresh.get(k)))
    return TaskCheck(task, recorded, fresh, bad)


def recompute(out_dir: str | Path | Run) -> tuple[TaskCheck, ...]:
    """Each task's metrics recomputed from its samples file by the task's ``metrics()`` (a loaded
    :class:`Run`, or its folder)."""
    run = out_dir if isinstance(out_dir, Run) else load_run(out_dir)
    return tuple(recompute_entry(run.record, task, load_samples(run, task), run.path) for task in run.record.tasks)


# -- metric selection --------------------------------------------------------------------------
def _selected(key: str, patterns: tuple[str, ...]) -> bool:
    name = key.split(".", 1)[1]
    return not patterns or any(fnmatch.fnmatchcase(key, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


def metric_keys(report: Report, patterns: tuple[str, ...] = ()) -> list[str]:
    keys: list[str] = []
    for run in report.runs:
        keys.extend(m.key for m in run.metrics if m.key not in keys and _selected(m.key, patterns))
    return keys


