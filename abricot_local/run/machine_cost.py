"""A model's facts, memory and speed on this machine, as a plan gives them (:func:`machine_cost`, one call: the dry
run's model, the model a run has loaded, `kld --dry-run`'s models). Its facts from its GGUF header (its file here),
else what model_facts.facts_of gives of a model not here (another quant's header, this entry's own size kept; else
its registry entry's or name's parameter count); its weights and KV cache against RAM (+ VRAM, + the RPC servers':
the backend's ``preflight``, asked here of its file, or of another quant's for the KV cache), before any file of it
is here estimated from its registry entry (model_facts.estimated_memory); its speed from its calibration (its file's
SHA-256, or the registry's pinned one), else scaled from the nearest calibrated model's (calibration.speed_for),
with ``calibrate`` a model here measured first. Names no task and no backend."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from abricot_local import hashing
from abricot_local.backends import backend_class, reads_model_file
from abricot_local.errors import opt
from abricot_local.gguf.file import model_bytes
from abricot_local.memory import Fit
from abricot_local.models.ref import ModelRef
from abricot_local.models.registry import ModelSpec
from abricot_local.run import calibration
from abricot_local.run.cost import Speed
from abricot_local.run.model_facts import HEADER, ModelFacts, estimated_memory, facts_of, gguf_facts

# a plan's speed note where no calibration gives a speed: how to get one, in each door's words (errors.opt: the
# command line's `--dry-run with --calibrate`, Python's `plan(...) with calibrate=True`), said once (console/plan.py)
NO_CALIBRATION = (f"no calibration yet for these settings: {opt('dry_run', True)} with {opt('calibrate', True)} measures a "
                  "model on this machine and caches its speed (the other options as here; a few seconds for the "
                  "embedded gemma-3-270m); a model not calibrated is scaled from one that is")


@dataclass(frozen=True)
class MachineCost:
    """A model's facts, memory fit (``estimated``: what an estimate is made from, "": its header's) and speed (with
    its note: how to get one, the calibration entries ignored) on this machine."""

    facts: ModelFacts | None = None
    memory: Fit | None = None
    estimated: str = ""
    speed: Speed | None = None
    note: str = ""


def machine_cost(kind: str, opts, *, ref: ModelRef | None = None, spec: ModelSpec | None = None, name: str = "",
                 sibling=None, with_memory: bool = True, calibrate: bool = False, notify=None) -> MachineCost:
    """The facts, memory and speed of a model run by ``kind`` with ``opts``: ``ref``, the model here (its file, or
    a synthetic model); else ``sibling`` ((spec, path): another quant of ``spec`` that is here); else ``spec``, its
    registry entry, or ``name`` alone. ``with_memory``: its memory fit too; ``calibrate``: a model here measured
    first (said through ``notify``)."""
    cls, reads = backend_class(kind), reads_model_file(kind)
    here = ref is not None or not reads  # its file here, or a synthetic model (no file, no facts): no other quant
    facts = (gguf_facts(ref.path) if reads and ref.path else None) if here else facts_of(spec, name, sibling)
    fit, estimated = _memory(ref, spec, cls, opts, None if here else sibling) if with_memory else (None, "")
    speed, note = _speed(ref, cls, opts, facts, calibrate, spec.sha256_for(0) if spec else None, notify)
    return MachineCost(facts, fit, estimated, speed, note)


def _memory(ref: ModelRef | None, spec: ModelSpec | None, cls, opts, sibling=None) -> tuple[Fit | None, str]:
    """The model's weights + KV cache against RAM (+ VRAM, + the RPC servers': asked here), and what an estimate is
    made from ("": its file's header): its file here, the backend's preflight of it; ``sibling`` ((entry, path):
    another quant of ``spec`` that is here), its KV cache from that file and ``spec``'s own size; else estimated
    from its registry entry (model_facts.estimated_memory)."""
    if ref is not None and ref.path is not None:
        pre = cls.preflight(ref.path, opts)
        return (None if pre is None else pre.fit(model_bytes(ref.path))), ""
    if sibling is not None:
        other, path = sibling
        size = spec.approx_bytes
        pre = cls.preflight(path, opts) if size else None
        fit = None if pre is None else pre.fit(size)
        return fit, (f"its KV cache from the {HEADER} of {other.name}" if fit else "")
    return estimated_memory(spec, opts.context_window)


def _speed(ref: ModelRef | None, cls, opts, facts, calibrate: bool, pinned: str | None,
           notify=None) -> tuple[Speed | None, str]:
    """The speed: this model's calibration (its file here, or the registry's pinned SHA-256),
    else one scaled from the nearest calibrated model; with ``calibrate``, a model here is
    measured first."""
    settings = cls.speed_settings(opts)
    if settings is None:
        return None, "this backend has no calibration"
    settings = json.loads(json.dumps(settings))
    sha = ref.sha256 or (None if reads_model_file(ref.backend) else calibration.synthetic_key(ref.label)) if ref else pinned
    note = ""
    if calibrate and ref is not None:
        if notify:
            notify(f"calibrating {ref.label} on this machine (its load is timed too) ...")
        full = ref if ref.sha256 or not reads_model_file(ref.backend) else \
            replace(ref, sha256=hashing.file_digest(ref.path).sha256)  # the calibration's key: its SHA-256
        cal = calibration.calibrate(full, opts, settings, facts)
        sha, note = cal.sha256, f"calibrated now ({calibration.cache_file()})" + calibration.busy()
    elif calibrate:
        note = "not calibrated: the model is not on this machine (a dry run downloads nothing)"
    speed = calibration.speed_for(sha, settings, facts)
    note = note or ("" if speed else NO_CALIBRATION)
    return speed, "; ".join([*([note] if note else []), *calibration.read().notes])  # entries ignored, named
