"""Memory facts and the check that refuses a model that clearly cannot fit (weights + KV cache)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .errors import ModelError, opt

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


@dataclass(frozen=True)
class Fit:
    """A model's weights + KV cache against the memory it may use (bytes)."""

    weights: int
    kv: int
    available: int  # RAM available to a new process
    vram: int = 0  # free VRAM, when layers are offloaded
    remote: int = 0  # the RPC servers' devices' free memory

    @property
    def need(self) -> int:
        return self.weights + self.kv

    @property
    def budget(self) -> int:
        return self.available + max(self.vram, 0) + max(self.remote, 0)

    @property
    def fits(self) -> bool:
        """Not clearly over: weights + KV cache within the budget plus 10%."""
        return self.need <= self.budget * 1.10

    def to_json(self) -> dict:
        """The fit as the dry runs' ``--json`` prints it."""
        return {"need_bytes": self.need, "weights_bytes": self.weights, "kv_bytes": self.kv,
                "available_bytes": self.available, "vram_bytes": self.vram, "remote_bytes": self.remote,
                "fits": self.fits}

    def where(self) -> str:
        """The budget's parts: "RAM", or "RAM 14.0 GiB + VRAM 8.0 GiB"."""
        if not (self.vram or self.remote):
            return "RAM"
        return " + ".join([f"RAM {self.available / _GIB:.1f} GiB", *([f"VRAM {self.vram / _GIB:.1f} GiB"] if self.vram
                          else []), *([f"RPC servers {self.remote / _GIB:.1f} GiB"] if self.remote else [])])


def fit(model_bytes: int, kv_bytes: int, *, available: int | None = None, vram: int = 0,
        remote: int = 0) -> Fit | None:
    """Weights + KV cache against available RAM (+ ``vram`` + ``remote``); None when RAM is unknown."""
    if available is None:
        available = available_memory()
        if available is None:
            return None
    return Fit(model_bytes, kv_bytes, available, vram, remote)


def check_memory(model_bytes: int, kv_bytes: int, *, available: int | None = None, vram: int = 0,
                 remote: int = 0) -> None:
    """Raise :class:`ModelError` when weights + KV cache clearly (by more than 10%)
    exceed available RAM plus ``vram`` (free VRAM when offloading) plus ``remote`` (free
    memory of the RPC servers' devices). Unknown RAM: no check."""
    why = refusal(fit(model_bytes, kv_bytes, available=available, vram=vram, remote=remote))
    if why:
        raise ModelError(why)


def refusal(f: Fit | None) -> str:
    """Why a run refuses a model of fit ``f`` unless forced ("": it fits, or RAM is unknown): what
    :func:`check_memory` raises, and what a dry run's plan says of a run that would raise it."""
    if f is None or f.fits:
        return ""
    return (f"not enough memory: the model needs about {f.need / _GIB:.1f} GiB (weights {f.weights / _GIB:.1f} "
            f"GiB + KV cache {f.kv / _GIB:.1f} GiB) but {f.budget / _GIB:.1f} GiB is available ({f.where()}). "
            f"Use a smaller quantization or a smaller {opt('n_ctx')}, or use {opt('force', True)} to try anyway.")


# The f16 KV cache per token of a model known by its parameter count alone (no header to read): a least-squares
# line in log-log through the shapes (layers x KV heads x head size) of 12 GQA models, SmolLM2-135M, Gemma 3 270M and
# 1B, Qwen2.5 0.5B, 1.5B, 7B and 14B, Llama 3.2 1B and 3B, Mistral 7B, Llama 3.1 8B and 70B: each one's real value lies
# between 0.51x (SmolLM2-135M) and 1.92x (Qwen2.5-0.5B) of it (tests/test_memory_estimate.py holds the table).
KV_PER_TOKEN_AT_8B = 105_335  # bytes per token at 8.03e9 parameters
KV_EXPONENT = 0.535


def kv_estimate(params: float | None, model_bytes: int, n_ctx: int) -> int:
    """The KV cache of ``n_ctx`` tokens before the GGUF is here: from the parameter count (``params``: a registry
    entry's) as :data:`KV_PER_TOKEN_AT_8B` scales it, within a factor of 2 of the models it was fitted to; without
    one, from the file's size (:func:`kv_estimate_from_size`, rougher)."""
    if params:
        return int(n_ctx * KV_PER_TOKEN_AT_8B * (params / 8.03e9) ** KV_EXPONENT)
    return kv_estimate_from_size(model_bytes, n_ctx)


def kv_estimate_from_size(model_bytes: int, n_ctx: int) -> int:
    """A rough KV-cache size from the file's size alone: model_bytes * n_ctx / 131072, in line with GQA
    models of 7-70B parameters at f16 (a 4-bit quant's file is smaller: about 4x low for a 7B Q4_K_M, 20x for
    a 135M Q8_0)."""
    return int(model_bytes * n_ctx / 131072)


def free_disk(folder) -> tuple[Path, int | None]:
    """The nearest existing folder at or above ``folder``, and its free bytes (None: unknown)."""
    path = Path(folder)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return path, shutil.disk_usage(path).free
    except OSError:
        return path, None


def check_disk(need: int, folder) -> None:
    """Refuse a download of ``need`` bytes into ``folder`` (or its nearest existing parent)
    when the disk has less free space."""
    path, free = free_disk(folder)
    if free is not None and need > free:
        raise ModelError(
            f"not enough disk space: the download needs about {need / _GIB:.1f} GiB but {path} has "
            f"{free / _GIB:.1f} GiB free. Free some space or set HF_HOME to a larger disk, or use {opt('force', True)}."
        )
