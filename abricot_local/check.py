"""Re-score a recorded run with its recorded model, data and options; report agreement."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from abricot_local import fetch, hashing
from abricot_local.backends import backend_class, backend_options
from abricot_local.errors import ModelError, ResultsError, UsageError
from abricot_local.modelref import ModelRef, open_model, require_same, resolve_model_ref
from abricot_local.metrics import require_finite
from abricot_local.planning import Shard, prepare
from abricot_local.record import Record, read_run, read_samples
from abricot_local.runner import apply_chat, score_items
from abricot_local.tasks import make_task
from abricot_local.tasks.base import TaskOptions

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Difference:
    task: str
    id: str
    recorded_pred: int
    new_pred: int
    max_abs_diff: float


@dataclass(frozen=True)
class CheckReport:
    checked: int
    identical_predictions: int
    max_abs_diff: float
    atol: float
    differences: tuple[Difference, ...]
    missing: tuple[tuple[str, str], ...] = ()  # (task, id) the run scored but its samples file lacks

    @property
    def reproduced(self) -> bool:
        return (not self.missing and self.checked > 0 and self.identical_predictions == self.checked
                and self.max_abs_diff <= self.atol)


def _verify(path: Path, recorded: str | None, what: str) -> None:
    if not path.is_file():
        raise ResultsError(f"the recorded {what} {path} is missing; give it with the option shown in --help")
    got = fetch.sha256_file(path, fresh=True)  # from the bytes: a memo could be fooled
    if recorded and got != recorded:
        raise ResultsError(f"{what} {path} has sha256 {got}, but the run recorded {recorded}: not the same file")


def _task_options(record: Record, data_dir: str | None) -> TaskOptions:
    """The recorded run's task options, each task's data re-found (and verified) by the task."""
    base = TaskOptions.from_config(record.config_dict())
    data = []
    for name, t in record.tasks.items():
        files = [Path(f.path) for f in t.data]
        if data_dir:
            files = [Path(data_dir) / f.name for f in files]
        for f, rec in zip(files, t.data):
            _verify(f, rec.sha256, "data file")
        data.append((name, make_task(name, base).data_ref(files)))
    return replace(base, data=tuple(data))


def recorded_model(record: Record, given: str | None = None) -> ModelRef:
    """The recorded run's model, found again and hashed from its bytes: ``given`` (any name
    `run` takes), else the recorded file, else (moved or replaced) the name as it was written
    (an Ollama tag, an hf: repository...); refused unless its SHA-256 is the recorded one."""
    rec, kind = record.model, record.config.backend
    if not backend_class(kind).reads_model_file:
        return resolve_model_ref(rec.name, backend=kind)
    name = given or rec.path
    if not name:
        raise ResultsError("the run records no model path; give the model with --model")
    if not given and not Path(name).is_file():
        if rec.source not in (None, "path", "registry") and rec.as_written:
            name = rec.as_written
        else:
            raise ResultsError(f"the recorded model file {name} is missing; give it with the option shown in --help")
    with hashing.afresh():
        try:
            ref = resolve_model_ref(str(name), backend=kind, offline=True, progress=False)
        except ModelError as err:
            raise ResultsError(f"the recorded model cannot be opened: {err}") from None
    require_same(ref, rec.sha256)
    return ref


def check_run(out: str | Path, *, sample: int | None = None, atol: float = 1e-3, model: str | None = None,
              data_dir: str | None = None, backend_values: dict | None = None, progress: Progress | None = None
              ) -> CheckReport:
    """Re-score all items (or ``sample`` drawn with the run's seed) and compare with the samples files.
    Items the run scored but its samples files lack are reported as missing (not reproduced);
    ``backend_values``: backend options that change no number (threads), over the recorded ones."""
    if sample is not None and sample < 1:
        raise UsageError("--sample must be at least 1 (a check that re-scores nothing proves nothing)")
    out = Path(out)
    record = read_run(out)
    if record.config is None or not record.config.backend:
        raise ResultsError(f"{out / 'results.json'} records no config.backend: the run cannot be re-scored")
    cfg = record.config_dict()
    options = _task_options(record, data_dir)
    kind = record.config.backend
    ref = recorded_model(record, model)
    bopts = backend_options(kind, {**cfg, **(backend_values or {})}, strict=False)
    runs = prepare([make_task(n, options) for n in record.tasks], record.config.limit, record.config.sample,
                   Shard.parse(record.config.shard))
    rng = np.random.default_rng(options.seed)
    recorded_runs = {name: {s.id: s.line for s in read_samples(out / t.samples_name(name))}
                     for name, t in record.tasks.items()}
    backend = open_model(ref, bopts, force=True)
    diffs, checked, same, worst, missing = [], 0, 0, 0.0, []
    try:
        if options.chat_template:
            runs = apply_chat(runs, backend)
        for run in runs:
            recorded = recorded_runs[run.task.name]
            require_finite(list(recorded.values()), run.task.name)
            missing += [(run.task.name, it.id) for it in run.items if it.id not in recorded]
            items = [it for it in run.items if it.id in recorded]
            if sample is not None and sample < len(items):
                keep = set(rng.choice(len(items), size=sample, replace=False).tolist())
                items = [it for k, it in enumerate(items) if k in keep]
            total = len(items)
            if progress:
                progress(run.task.name, 0, total)
            for n, (item, scored) in enumerate(score_items(items, backend), 1):
                new = run.task.sample(item, scored)
                old = recorded[item.id]
                if new["context"] != old["context"]:
                    raise ResultsError(f"item {item.id}: the rebuilt prompt differs from the recorded one")
                d = float(np.max(np.abs(np.subtract(new["logprobs"], old["logprobs"]))))
                checked += 1
                same += new["pred"] == old["pred"]
                worst = max(worst, d)
                if new["pred"] != old["pred"] or d > atol:
                    diffs.append(Difference(run.task.name, item.id, old["pred"], new["pred"], d))
                if progress:
                    progress(run.task.name, n, total)
    finally:
        backend.close()
    return CheckReport(checked, same, worst, atol, tuple(diffs), tuple(missing))


def report_json(rep: CheckReport) -> str:
    return json.dumps(
        {"checked": rep.checked, "identical_predictions": rep.identical_predictions,
         "max_abs_diff": rep.max_abs_diff, "atol": rep.atol, "reproduced": rep.reproduced,
         "differences": [d.__dict__ for d in rep.differences],
         "missing": [{"task": t, "id": i} for t, i in rep.missing]},
        indent=2,
    )
