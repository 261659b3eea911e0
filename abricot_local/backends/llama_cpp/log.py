"""What llama.cpp resolved, read from its log: settings left to "auto" are decided inside
llama.cpp and reported only there. Pure functions over log lines (no llama_cpp import).

Lines seen with llama-cpp-python 0.3.36 (llama.cpp's own strings):

- ``llama_context: flash_attn            = auto`` (what was asked)
- ``resolve_fused_ops: Flash Attention enabled`` / ``... Flash Attention not supported, set to disabled``
  (what auto became, once the context's graph is reserved)
- ``llama_context: enabling flash_attn since it is required for ...``, ``... forcing off``,
  ``... flash attention disabled; MSA requires it ...`` (forced either way)
- ``load_tensors: offloaded 19/19 layers to GPU`` (said whenever the build can offload, even
  with no GPU device: then every weight buffer is a CPU one)
- ``load_tensors:   CPU_Mapped model buffer size =   235.16 MiB`` (one per device holding weights:
  ``CUDA0``, ``Metal``, ``RPC0[host:port]``...)
"""

from __future__ import annotations

import re

# the lines worth keeping for the whole load (the log sink keeps only its last lines otherwise)
NOTABLE = re.compile(r"flash[ _]attn|flash attention|offloaded \d+/\d+ layers|model buffer size", re.IGNORECASE)

_FLASH = (
    (re.compile(r"flash attention (?:was auto, set to )?enabled", re.I), "on"),
    (re.compile(r"flash attention (?:not supported, set to |was auto, set to )?disabled", re.I), "off"),
    (re.compile(r"enabling flash_attn", re.I), "on"),
    (re.compile(r"disabling flash attention|flash_attn .*forcing off", re.I), "off"),
)
_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers", re.I)
_BUFFER = re.compile(r"load_tensors:\s+(\S+) model buffer size\s*=\s*([0-9.]+) MiB")


def notable(line: str) -> bool:
    return bool(NOTABLE.search(line))


def flash_attn(lines: list[str], asked: str) -> str:
    """"on" or "off": the last decision llama.cpp logged, else what was asked (when not auto),
    else "unknown"."""
    found = None
    for line in lines:
        for pattern, value in _FLASH:
            if pattern.search(line):
                found = value
                break
    if found:
        return found
    return asked if asked != "auto" else "unknown"


def offloaded_layers(lines: list[str]) -> tuple[int, int] | None:
    """(offloaded, total) layers from llama.cpp's load log, or None when it said nothing."""
    hits = [m for m in (_OFFLOADED.search(line) for line in lines) if m]
    return (int(hits[-1].group(1)), int(hits[-1].group(2))) if hits else None


def model_buffers(lines: list[str]) -> dict[str, float]:
    """Where the weights went: device buffer name -> MiB, from llama.cpp's load log."""
    return {m.group(1): float(m.group(2)) for m in (_BUFFER.search(line) for line in lines) if m}


def layers_on_gpu(lines: list[str]) -> str:
    """"offloaded/total" layers whose weights sit off the CPU; "0/total" when every weight
    buffer is a CPU one (llama.cpp counts layers as offloaded whenever the build could);
    "?" when the log said nothing."""
    counts = offloaded_layers(lines)
    if counts is None:
        return "?"
    buffers = model_buffers(lines)
    on_device = any(not name.upper().startswith("CPU") for name in buffers)
    return f"{counts[0] if on_device or not buffers else 0}/{counts[1]}"


def all_layers_offloaded(lines: list[str]) -> bool:
    """Whether every layer's weights (so its attention) sit off the CPU, per the load log."""
    counts = offloaded_layers(lines)
    if counts is None or not any(not name.upper().startswith("CPU") for name in model_buffers(lines)):
        return False
    return counts[0] >= counts[1]
