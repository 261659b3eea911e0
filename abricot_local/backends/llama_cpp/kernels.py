"""The llama.cpp backend's kernel path (results.json ``provenance.kernels``): the build
(build.py: native or portable, its kernel switches), the CPU features its kernels use
(llama.cpp's system info), whether the weights use extra buffer types, and the devices
llama.cpp computes on (ggml's device list through rpc.py's bindings; an NVIDIA GPU's compute
capability and driver from nvidia-smi). Shared code reads it as a record.schema.Kernels
(record/kernel_path.py compares two).
"""

from __future__ import annotations

import functools
from importlib.metadata import version as pkg_version
from typing import Sequence

from abricot_local.backends.llama_cpp import build as llama_build, rpc

_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel"}  # enum ggml_backend_dev_type


def features(system_info: str) -> tuple[str, ...]:
    """The CPU features a build's kernels use, from llama.cpp's system info
    (``"CPU : AVX = 1 | AVX2 = 1 | ..."`` -> ``("AVX", "AVX2", ...)``, in its order)."""
    out: list[str] = []
    section = ""
    for part in system_info.split("|"):
        part = part.strip()
        if " : " in part:
            section, part = (s.strip() for s in part.split(" : ", 1))
        if "=" in part and section.upper() in ("", "CPU"):
            key, value = (s.strip() for s in part.split("=", 1))
            if value == "1" and key not in out:
                out.append(key)
    return tuple(out)


@functools.cache
def nvidia_details() -> tuple[dict, ...]:
    """Each NVIDIA GPU's name, driver version and compute capability (nvidia-smi; none without it)."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ()
    try:
        res = subprocess.run([exe, "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return parse_details(res.stdout) if res.returncode == 0 else ()


def parse_details(text: str) -> tuple[dict, ...]:
    """``"NVIDIA H200, 560.35.03, 9.0"`` lines -> ({"name", "driver", "compute_capability"}, ...)."""
    out = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.rsplit(",", 2)]
        if len(parts) == 3 and parts[0]:
            out.append({"name": parts[0], "driver": parts[1], "compute_capability": parts[2]})
    return tuple(out)


def _with_details(devices: list[dict]) -> list[dict]:
    """CUDA devices with their compute capability and driver, matched by model name in order."""
    left = list(nvidia_details())
    for d in devices:
        if not d["name"].upper().startswith("CUDA"):
            continue
        hit = next((g for g in left if g["name"] in d["description"] or d["description"] in g["name"]), None)
        if hit:
            left.remove(hit)
            d.update(compute_capability=hit["compute_capability"], driver=hit["driver"])
    return devices


def local_devices() -> list[dict]:
    """This process's ggml devices but the RPC servers' (those a model is given are added by its offload)."""
    lib = rpc.ggml_lib()
    out = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        reg = lib.ggml_backend_dev_backend_reg(dev)
        if (lib.ggml_backend_reg_name(reg) or b"").startswith(b"RPC"):
            continue
        out.append({"name": (lib.ggml_backend_dev_name(dev) or b"?").decode("utf-8", "replace"),
                    "description": (lib.ggml_backend_dev_description(dev) or b"").decode("utf-8", "replace").strip(),
                    "type": _TYPES.get(lib.ggml_backend_dev_type(dev), "other")})
    return _with_details(out)


def kernels(system_info: str, extra_bufts: bool, threads: int,
            remote: Sequence[rpc.RemoteDevice] = ()) -> dict:
    """``provenance.kernels`` of a loaded model (``remote``: the RPC devices it was given)."""
    devices = local_devices()
    devices += [{"name": d.name, "description": d.description, "type": "rpc", "endpoint": d.endpoint}
                for d in remote]
    cpu = next((d["description"] for d in devices if d["type"] == "cpu" and d["description"]), None)
    return {
        "runtime": f"llama-cpp-python {pkg_version('llama-cpp-python')}",
        "build": llama_build.build_kind(),
        "cpu_features": list(features(system_info)),
        "system_info": system_info,
        "build_flags": llama_build.switches(),
        "extra_bufts": extra_bufts,
        "devices": devices,
        "cpu": cpu,
        "threads": threads,
    }
