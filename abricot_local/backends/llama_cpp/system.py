"""What the installed llama.cpp build can do, from its system info: the backends compiled in, the
CPU features, GPU offload and RPC (``doctor`` shows it; the session asks whether a GPU backend
exists before offloading by default). llama_cpp is imported only inside :func:`llama_facts`."""

from __future__ import annotations

import platform
import sys
from typing import Any

from abricot_local.backends.llama_cpp import build as llama_build

_GPU_BACKENDS = {"CUDA": "CUDA", "METAL": "Metal", "MTL": "Metal", "VULKAN": "Vulkan", "HIP": "ROCm",
                 "ROCM": "ROCm", "SYCL": "SYCL", "CANN": "CANN", "OPENCL": "OpenCL", "MUSA": "MUSA"}


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


def advice(llama: dict[str, Any], gpus: dict[str, Any]) -> list[str]:
    """Reinstall commands that would unlock a GPU the current build does not use."""
    REINSTALL = llama_build.REINSTALL
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


def doctor_facts(gpus: dict[str, Any]) -> dict[str, Any]:
    """What `doctor` shows of this backend (the facts its hook, backends/llama_cpp/doctor.py, words): the build's facts,
    the reinstall commands (``reinstall_rpc``: the one that adds RPC) and the advice for ``gpus``."""
    llama = llama_facts()
    return {"llama_cpp": llama, "reinstall": dict(llama_build.REINSTALL), "reinstall_what": dict(llama_build.WHAT),
            "reinstall_rpc": llama_build.REINSTALL_RPC, "advice": advice(llama, gpus)}
