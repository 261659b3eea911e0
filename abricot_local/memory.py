"""Memory facts and the check that refuses a model that clearly cannot fit (weights + KV cache)."""

from __future__ import annotations

import os

from .errors import ModelError

_GIB = 1024**3

def _meminfo(field: str) -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _sysconf(name: str) -> int | None:
    try:
        value = os.sysconf(name) * os.sysconf("SC_PAGE_SIZE")
        return value if value > 0 else None
    except (AttributeError, ValueError, OSError):
        return None


def available_memory() -> int | None:
    """RAM available to a new process in bytes (MemAvailable), or None when unknown."""
    return _meminfo("MemAvailable") or _sysconf("SC_AVPHYS_PAGES")


def total_memory() -> int | None:
    """Installed RAM in bytes, or None when unknown."""
    return _meminfo("MemTotal") or _sysconf("SC_PHYS_PAGES")


def estimate_kv_bytes(n_layer: int, n_ctx: int, n_embd_k_gqa: int, n_embd_v_gqa: int, bytes_per: int = 2) -> int:
    """Size of llama.cpp's KV cache: one K and one V row per layer and position (f16 = 2 bytes)."""
    return n_layer * n_ctx * (n_embd_k_gqa + n_embd_v_gqa) * bytes_per


def check_memory(model_bytes: int, kv_bytes: int, *, available: int | None = None, vram: int = 0,
                 remote: int = 0) -> None:
    """Raise :class:`ModelError` when weights + KV cache clearly (by more than 10%)
    exceed available RAM plus ``vram`` (free VRAM when offloading) plus ``remote`` (free
    memory of the RPC servers' devices). Unknown RAM: no check."""
    if available is None:
        available = available_memory()
        if available is None:
            return
    budget = available + max(vram, 0) + max(remote, 0)
    need = model_bytes + kv_bytes
    if need > budget * 1.10:
        where = " + ".join([f"RAM {available / _GIB:.1f} GiB", *([f"VRAM {vram / _GIB:.1f} GiB"] if vram else []),
                            *([f"RPC servers {remote / _GIB:.1f} GiB"] if remote else [])]) if vram or remote else "RAM"
        raise ModelError(
            f"not enough memory: the model needs about {need / _GIB:.1f} GiB (weights {model_bytes / _GIB:.1f} "
            f"GiB + KV cache {kv_bytes / _GIB:.1f} GiB) but {budget / _GIB:.1f} GiB is available ({where}). "
            "Use a smaller quantization or a smaller --n-ctx, or use --force to try anyway."
        )


def kv_estimate_from_size(model_bytes: int, n_ctx: int) -> int:
    """A rough KV-cache size before the GGUF is here (no metadata to read): about
    model_bytes * n_ctx / 131072, in line with GQA models of 1-70B parameters at f16."""
    return int(model_bytes * n_ctx / 131072)


def check_disk(need: int, folder) -> None:
    """Refuse a download of ``need`` bytes into ``folder`` (or its nearest existing parent)
    when the disk has less free space."""
    import shutil
    from pathlib import Path

    path = Path(folder)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return
    if need > free:
        raise ModelError(
            f"not enough disk space: the download needs about {need / _GIB:.1f} GiB but {path} has "
            f"{free / _GIB:.1f} GiB free. Free some space or set HF_HOME to a larger disk, or use --force."
        )
