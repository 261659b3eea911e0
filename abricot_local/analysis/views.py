"""What a comparison reads of a finished run: :class:`RunView` (a label, the folder, every
recorded setting, flat, and each task's sample records), built from a folder
(:func:`view_of`: an abricot-local run or an lm-eval output) or a loaded run (:func:`view_of_run`),
and labelled uniquely among the runs compared (:func:`labelled`). compare.py pairs them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from abricot_local.analysis.runs import Run, load_run, load_samples, quant_of
from abricot_local.analysis.labels import RunIdentity, unique_labels
from abricot_local.record import Sample

ITEM_SELECTION = ("tasks", "limit", "sample", "shard")  # choose items; the matching handles them
PROVENANCE_SKIP = ("bootstrap",)  # the task seed again


@dataclass(frozen=True, eq=False)
class TaskSamples:
    name: str
    config: Mapping[str, Any]  # the run's config with the task's own over it
    samples: tuple[Sample, ...]
    key: str = ""  # the run's own key of the task when compared under another's (alignment.py); "": ``name``

    @property
    def own_key(self) -> str:
        return self.key or self.name


@dataclass(frozen=True, eq=False)
class RunView:
    """What a comparison needs of one run: a label, its folder, its recorded settings
    (flat, dotted keys) and, per task, its config and sample records."""

    label: str
    path: str
    settings: Mapping[str, Any]
    tasks: tuple[TaskSamples, ...]
    identity: RunIdentity | None = None  # what a unique label may say; None: the label and the settings
    base: str = ""  # the model its quants share (registry ``base``, else the name without its quant): "" unknown

    def task(self, name: str) -> TaskSamples | None:
        return next((t for t in self.tasks if t.name == name), None)

    def who(self) -> RunIdentity:
        """This run's identity for run_labels.unique_labels."""
        if self.identity is not None:
            return self.identity
        options = {k: v for k, v in self.settings.items() if "." not in k}
        quant = str(self.settings.get("quant", ""))
        return RunIdentity(self.label, quant, self.path, "", options, not quant or bool(quant_of(self.label)))


def _flatten(out: dict, prefix: str, value: Any) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(out, f"{prefix}.{k}" if prefix else str(k), v)
    elif value is not None:
        out[prefix] = value


def settings_of(doc: dict, quant: str = "") -> dict[str, Any]:
    """Every recorded setting of a results.json, flat: the model's SHA-256 and quant, the
    config (but what only selects items), the provenance (schedule, build, CPU features,
    devices), each task's config, version, prompt hash and data SHA-256."""
    out: dict[str, Any] = {}
    _flatten(out, "model_sha256", doc.get("model", {}).get("sha256"))
    _flatten(out, "quant", quant or None)
    _flatten(out, "", {k: v for k, v in doc.get("config", {}).items() if k not in ITEM_SELECTION})
    _flatten(out, "provenance", {k: v for k, v in doc.get("provenance", {}).items() if k not in PROVENANCE_SKIP})
    for task, entry in doc.get("tasks", {}).items():
        _flatten(out, f"{task}.config", entry.get("config"))
        _flatten(out, f"{task}.version", entry.get("version"))
        _flatten(out, f"{task}.prompt_hash", entry.get("prompt_hash") or None)
        _flatten(out, f"{task}.data_sha256", [f.get("sha256") for f in entry.get("data", [])] or None)
    return out


def view_of(folder: str | Path, registry: dict | None = None, data: tuple[tuple[str, str], ...] = ()) -> RunView:
    """A finished run folder (or an lm-eval output, its tasks' data found with ``data`` first) as a
    :class:`RunView` (ResultsError when it is not one)."""
    return view_of_run(load_run(folder, registry, data=data))


def view_of_run(run: Run, samples: Mapping[str, Sequence[Sample]] | None = None) -> RunView:
    """A loaded run as a :class:`RunView`, labelled as ``run.label``; ``samples``: its samples
    per task when already read (else they are read)."""
    doc = run.record.to_dict()
    got = samples or {}
    tasks = tuple(TaskSamples(t, {**run.record.config_dict(), **run.record.tasks[t].config},
                              tuple(got[t] if t in got else load_samples(run, t)))
                  for t in run.tasks)
    return RunView(run.label, str(run.path), settings_of(doc, run.quant), tasks, replace(run.identity, model=run.label),
                   run.base)


def labelled(runs: Sequence[RunView]) -> list[RunView]:
    """The views, each labelled uniquely among them (run_labels.unique_labels)."""
    labels = unique_labels([r.who() for r in runs])
    return [replace(r, label=lab) for r, lab in zip(runs, labels)]
