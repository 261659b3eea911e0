"""A model's facts, memory and speed on this machine, as a plan gives them (:func:`machine_cost`, one call: the dry
run's model, the model a run has loaded, `kld --dry-run`'s models). Its facts from its GGUF header (its file here),
another quant's of the same model (models.sources.sibling_here: this entry's own size kept), else its registry
entry or name (a parameter count: cost.estimated_facts); its weights and KV cache against RAM (+ VRAM, + the RPC
servers': the backend's ``preflight``, asked here), before its file is here estimated from its registry entry; its
speed from its calibration (its file's SHA-256, or the registry's pinned one), else scaled from the nearest
calibrated model's (calibration.speed_for), with ``calibrate`` a model here measured first. Names no task and no
backend."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from abricot_local import hashing, memory
from abricot_local.backends import backend_class, reads_model_file
from abricot_local.errors import opt
from abricot_local.gguf.file import model_bytes
from abricot_local.memory import Fit
from abricot_local.models.ref import ModelRef
from abricot_local.models.registry import ModelSpec
from abricot_local.models.spec import parse_params
from abricot_local.run import calibration
from abricot_local.run.chars_per_token import ratio
from abricot_local.run.cost import HEADER, ModelFacts, Speed, estimated_facts, gguf_facts

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
    if ref is not None or not reads:
        facts = gguf_facts(ref.path) if reads and ref.path else None
        fit, estimated = _memory(ref, spec, cls, opts) if with_memory else (None, "")
    elif sibling is not None:  # that quant's header gives the shape (this entry's own size kept) and the KV cache
        other, path = sibling
        size, head = spec.approx_bytes, gguf_facts(path)
        basis = f"the {HEADER} of {other.name}, another quant of {spec.base} that is here"
        facts = None if head is None else replace(head, bytes=size or head.bytes, basis=basis)
        pre = cls.preflight(path, opts) if with_memory and size else None
        fit = None if pre is None else pre.fit(size)
        estimated = f"its KV cache from the {HEADER} of {other.name}" if fit else ""
    else:
        facts = _guess_facts(spec, name, spec.tokenizer if spec else "")
        fit, estimated = _memory(None, spec, cls, opts) if with_memory else (None, "")
    speed, note = _speed(ref, cls, opts, facts, calibrate, spec.sha256_for(0) if spec else None, notify)
    return MachineCost(facts, fit, estimated, speed, note)


def _guess_facts(spec: ModelSpec | None, name: str, family: str) -> ModelFacts | None:
    """Facts of a model not here (cost.estimated_facts): from the parameter count of its registry entry (its size,
    its tokenizer ``family``'s vocabulary), else of its ``name``; None when neither gives one."""
    params = parse_params(spec.params if spec else name)
    if params is None:
        return None
    size = f"{spec.approx_bytes / 1e9:.2f} GB" if spec and spec.approx_bytes else "size unknown"
    basis = f"its registry entry ({spec.params}, {size})" if spec else \
        f"the parameters its name gives ({name})"
    return estimated_facts(params, spec.approx_bytes if spec else None, ratio(family).n_vocab, basis)


def _memory(ref: ModelRef | None, spec: ModelSpec | None, cls, opts) -> tuple[Fit | None, str]:
    """The model's weights + KV cache against RAM (+ VRAM, + the RPC servers': asked here); before its file is
    here, estimated from its registry entry (and what from)."""
    if ref is not None and ref.path is not None:
        facts = cls.preflight(ref.path, opts)
        return (None if facts is None else facts.fit(model_bytes(ref.path))), ""
    size = spec.approx_bytes if spec else None
    if not size:
        return None, ""
    basis = (f"its KV cache estimated from its {spec.params} parameters (within 2x)" if spec.param_count
             else "its KV cache estimated from the file size")
    return memory.fit(size, memory.kv_estimate(spec.param_count, size, opts.context_window)), basis


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
