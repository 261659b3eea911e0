"""llama.cpp's own quantizer through llama-cpp-python's binding (``llama_model_quantize``): one
GGUF written at another quant, never a reimplementation. What llama.cpp says while it works
(one line per tensor, and a fallback line for each tensor whose rows the asked type cannot
cut) is read back as one line (:func:`fallback_summary`). Models/quantize.py orchestrates.
"""

from __future__ import annotations

import ctypes
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from abricot_local.backends.llama_cpp import interrupts
from abricot_local.backends.llama_cpp.session import llama_log
from abricot_local.errors import ModelError
from abricot_local.gguf.file import FILE_TYPES

FTYPES = {name: code for code, name in FILE_TYPES.items()}  # "Q8_0" -> llama_ftype

# "llama_tensor_get_type : tensor cols 640 x 640 are not divisible by 256, required for q6_K - using
# fallback quantization q8_0"; the total: "... WARNING: 54 of 163 tensor(s) required fallback quantization"
_FALLBACK = re.compile(r"required for (\S+?)\s*-\s*using fallback quantization (\S+)")
_FALLBACK_COLS = re.compile(r"not divisible by (\d+)")
_TOTAL = re.compile(r"(\d+) of (\d+) tensor\(s\) required fallback")


@dataclass(frozen=True)
class Written:
    """What one call of llama.cpp's quantizer did: the log's fallbacks in one line."""

    path: Path
    fallbacks: str  # "" when no tensor fell back


def fallback_summary(lines: list[str]) -> str:
    """llama.cpp's fallback lines as one: "54 of 163 tensors fell back (q6_K -> q8_0: 54; rows
    not divisible by 256)"; "" when none did."""
    pairs = Counter(f"{m.group(1)} -> {m.group(2)}" for m in (_FALLBACK.search(x) for x in lines) if m)
    if not pairs:
        return ""
    cols = sorted({m.group(1) for m in (_FALLBACK_COLS.search(x) for x in lines if _FALLBACK.search(x)) if m})
    total = next((m for m in (_TOTAL.search(x) for x in reversed(lines)) if m), None)
    head = f"{total.group(1)} of {total.group(2)} tensors" if total else f"{sum(pairs.values())} tensors"
    why = f"; columns not divisible by {', '.join(cols)}" if cols else ""
    return f"{head} fell back ({', '.join(f'{k}: {n}' for k, n in pairs.most_common())}{why})"


def quantize(src: Path, dst: Path, quant: str, *, allow_requantize: bool = False, threads: int = 0) -> Written:
    """Write ``src`` as ``quant`` (a llama_ftype name: "Q8_0", "F16"...) to ``dst`` with llama.cpp's
    quantizer. ``allow_requantize``: ``src`` may hold quantized tensors (they are dequantized first)."""
    if quant not in FTYPES:
        raise ModelError(f"llama.cpp has no file type {quant}; it has {', '.join(FTYPES)}")
    log = llama_log()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[quant]
    params.nthread = threads
    params.allow_requantize = allow_requantize
    lines: list[str] = []
    log.sink = lines
    try:
        with interrupts.deferred():
            rc = llama_cpp.llama_model_quantize(str(src).encode("utf-8"), str(dst).encode("utf-8"),
                                                ctypes.byref(params))
    finally:
        log.sink = None
    if rc != 0:
        errs = [x.strip() for x in lines if "error" in x.lower() or "failed" in x.lower()]
        raise ModelError(f"llama.cpp could not write {src.name} as {quant}: {'; '.join(errs[-3:]) or 'no reason given'}")
    return Written(dst, fallback_summary("".join(lines).splitlines()))

