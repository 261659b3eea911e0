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

# one per tensor that falls back: "warning: blk.0.attn_q.weight - ncols 640 not divisible by 256 (required for
# type q6_K) -> falling back to q8_0", with "(WARNING: must use F16 due to unusual shape) " before the arrow when
# the fallback is F16; the total: "WARNING: 90 of 236 tensor(s) required fallback quantization"
# (llama.cpp's llama-quant.cpp, as built in llama-cpp-python 0.3.36)
_FALLBACK = re.compile(r"not divisible by\s+(\d+) \(required for type\s+(\S+?)\)(?:\s*\(WARNING:[^)]*\))?"
                       r"(?:\s*->\s*falling back to\s+(\w+))?")
_TOTAL = re.compile(r"(\d+) of (\d+) tensor\(s\) required fallback")


@dataclass(frozen=True)
class Written:
    """What one call of llama.cpp's quantizer did: the log's fallbacks in one line."""

    path: Path
    fallbacks: str  # "" when no tensor fell back


def fallback_summary(text: str) -> str:
    """llama.cpp's fallback lines as one: "54 of 163 tensors fell back (q6_K -> q8_0: 54; columns not
    divisible by 256)"; "" when none did."""
    found = list(_FALLBACK.finditer(text))
    if not found:
        return ""
    pairs = Counter(f"{m.group(2)} -> {m.group(3) or '?'}" for m in found)
    cols = sorted({m.group(1) for m in found}, key=int)
    total = _TOTAL.search(text)
    head = f"{total.group(1)} of {total.group(2)} tensors" if total else f"{len(found)} tensors"
    return (f"{head} fell back ({', '.join(f'{k}: {n}' for k, n in pairs.most_common())}; columns not divisible "
            f"by {', '.join(cols)})")


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
    # a signal llama.cpp does not return from in time ends the process: not without the partial file
    forget = interrupts.on_stuck(lambda _signum: Path(dst).unlink(missing_ok=True))
    try:
        with interrupts.deferred():
            rc = llama_cpp.llama_model_quantize(str(src).encode("utf-8"), str(dst).encode("utf-8"),
                                                ctypes.byref(params))
    finally:
        log.sink = None
        forget()
    if rc != 0:
        errs = [x.strip() for x in lines if "error" in x.lower() or "failed" in x.lower()]
        raise ModelError(f"llama.cpp could not write {src.name} as {quant}: {'; '.join(errs[-3:]) or 'no reason given'}")
    return Written(dst, fallback_summary("".join(lines)))

