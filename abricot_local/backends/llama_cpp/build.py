"""The installed llama-cpp-python build, read without loading llama.cpp: the CMake switches it
was configured with (the ``ggml-config.cmake`` its wheel installs under ``lib/cmake/ggml/``),
whether it is native or portable, and the install commands for each kind of build.

A *portable* build (``GGML_NATIVE=OFF`` with an explicit instruction set) runs the same CPU
kernels on every x86-64 CPU that has that instruction set, so its numbers reproduce across
machines; a *native* build (``GGML_NATIVE=ON``, pip's default) uses every instruction of the
CPU that built it, so its numbers are that CPU's (docs/numerics.md).
"""

from __future__ import annotations

import functools
import re
from importlib import metadata
from pathlib import Path

# the portable build: AVX2 + FMA + F16C (x86-64-v3: Intel since Haswell, AMD since Zen), RPC on
PORTABLE_CMAKE_ARGS = ("-DGGML_RPC=on -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON "
                       "-DGGML_F16C=ON -DGGML_BMI2=OFF -DGGML_AVX512=OFF")
NATIVE_CMAKE_ARGS = "-DGGML_RPC=on"  # GGML_NATIVE is on by default
# the llama-cpp-python the committed reference runs were made with: their bit-for-bit promise holds for it alone.
# README.md, .ci/run and `doctor` give this pin (tests/test_doctor.py checks the three agree).
VERSION = "0.3.36"
REQUIREMENT = f'"llama-cpp-python=={VERSION}"'
PIP = f"pip install --force-reinstall --no-cache-dir {REQUIREMENT}"
REINSTALL = {  # every one with RPC (run --rpc, rpc-server)
    "portable": f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" {PIP}',
    "native": f'CMAKE_ARGS="{NATIVE_CMAKE_ARGS}" {PIP}',
    "cuda": f'CMAKE_ARGS="-DGGML_RPC=on -DGGML_CUDA=on" {PIP}',
    "metal": f'CMAKE_ARGS="-DGGML_RPC=on -DGGML_METAL=on" {PIP}',
}
WHAT = {
    "portable": "CPU, the same numbers on every x86-64 CPU with AVX2, FMA and F16C",
    "native": "CPU, this CPU's every instruction: faster here, numbers of this CPU only",
    "cuda": "NVIDIA GPUs",
    "metal": "Apple Silicon GPUs",
}
REINSTALL_RPC = REINSTALL["portable"]

# the switches that choose CPU and GPU kernels (ggml's CMake options), recorded with a run
KERNEL_SWITCHES = re.compile(r"GGML_(NATIVE|CPU_ALL_VARIANTS|BACKEND_DL|AVX\w*|FMA|F16C|BMI2|SSE42|AMX\w*|"
                             r"CPU_REPACK|LLAMAFILE|OPENMP|CUDA|METAL|VULKAN|HIP|SYCL|BLAS|RPC|CPU_ARM_ARCH|"
                             r"BUILD_COMMIT)$")
_SET = re.compile(r'^set\((GGML_\w+) "([^"]*)"\)\s*$', re.M)
CONFIG = "lib/cmake/ggml/ggml-config.cmake"


def parse_cmake(text: str) -> dict[str, str]:
    """``set(GGML_NATIVE "OFF")`` lines -> {"GGML_NATIVE": "OFF", ...}."""
    return {m.group(1): m.group(2) for m in _SET.finditer(text)}


def _on(value: str | None) -> bool:
    return (value or "").upper() in ("ON", "1", "TRUE", "YES")


def kind(switches: dict[str, str]) -> str:
    """``native``, ``portable``, ``dispatch`` (the CPU variant chosen at run time) or ``unknown``."""
    if not switches or "GGML_NATIVE" not in switches:
        return "unknown"
    if _on(switches.get("GGML_CPU_ALL_VARIANTS")) or _on(switches.get("GGML_BACKEND_DL")):
        return "dispatch"
    return "native" if _on(switches["GGML_NATIVE"]) else "portable"


def config_file() -> Path | None:
    """The installed llama-cpp-python's ggml-config.cmake, or None (not installed, or not shipped)."""
    try:
        dist = metadata.distribution("llama-cpp-python")
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if str(f).replace("\\", "/").endswith(CONFIG):
            path = Path(dist.locate_file(f))
            return path if path.is_file() else None
    return None


@functools.cache
def switches() -> dict[str, str]:
    """The installed build's kernel switches (:data:`KERNEL_SWITCHES`); {} when unknown."""
    path = config_file()
    if path is None:
        return {}
    try:
        found = parse_cmake(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}
    return {k: v for k, v in found.items() if KERNEL_SWITCHES.match(k)}


def build_kind() -> str:
    """The installed build: ``native``, ``portable``, ``dispatch`` or ``unknown``."""
    return kind(switches())
