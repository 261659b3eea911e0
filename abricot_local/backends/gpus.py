"""GPUs as ``nvidia-smi`` reports them (name, total and free memory): a backend's preflight
(the VRAM a model may use) and ``doctor`` ask here. No GPU library is loaded."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

_MIB = 1024**2


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
