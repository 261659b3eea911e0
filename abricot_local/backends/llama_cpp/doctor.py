"""What `doctor` shows of the llama.cpp backend (its ``doctor`` hook, ``Registered.doctor``): the build's
facts, reinstall commands and advice (system.doctor_facts), with ``text``, the lines doctor's text
shows of them in this backend's words (the options they name with errors.opt: each door writes them). No
llama_cpp import here (system.py's probe loads it)."""

from __future__ import annotations

from typing import Any

from abricot_local.backends.llama_cpp import system
from abricot_local.errors import opt

BUILD_WORDS = {
    "portable": "portable (GGML_NATIVE=OFF): its CPU kernels and numbers are the same on every CPU with these features",
    "native": "native (GGML_NATIVE=ON): this CPU's instructions; another CPU's native build may give other numbers",
    "dispatch": "runtime dispatch (GGML_CPU_ALL_VARIANTS): the CPU kernels, and the numbers, depend on the CPU",
    "unknown": "unknown (its ggml-config.cmake was not found)",
}


def doctor_facts(gpus: dict[str, Any]) -> dict[str, Any]:
    """The hook: system.doctor_facts for ``gpus``, and ``text`` (:func:`text`)."""
    facts = system.doctor_facts(gpus)
    return {**facts, "text": text(facts)}


def text(facts: dict[str, Any]) -> list[str]:
    """The lines `doctor` shows of this backend: the installed llama-cpp-python and its build, RPC, the
    reinstall commands (docs/numerics.md says which numbers each build gives)."""
    llama = facts.get("llama_cpp", {})
    if llama.get("importable"):
        lines = [f"llama-cpp-python {llama.get('version') or '?'}; system info: {llama.get('system_info', '?')}",
                 *build_lines(llama)]
    else:
        lines = [f"llama-cpp-python does not load: {llama.get('error', '?')}"]
    lines.append(f"RPC (llama.cpp over the network; run {opt('rpc')}, rpc-server): "
                 + ("available" if llama.get("rpc") else f"not in this build; reinstall with: {facts['reinstall_rpc']}"))
    lines.append("reinstall llama-cpp-python (each with RPC; docs/numerics.md says which numbers each gives):")
    what = facts.get("reinstall_what", {})
    for kind, cmd in facts.get("reinstall", {}).items():
        command = _command(cmd)
        if kind in what:
            lines += [f"  {kind} ({what[kind]}):", *(f"    {part}" for part in command)]
        else:
            lines += [f"  {kind}: {command[0]}", *(f"  {part}" for part in command[1:])]
    return lines


def build_lines(llama: dict[str, Any]) -> list[str]:
    """What the llama.cpp build is and can do: native or portable, GPU backends, RPC."""
    features = " ".join(llama.get("cpu_features") or []) or "none listed"
    gpus = llama.get("gpu_backends") or []
    if gpus:
        offload = f"GPU backends: {', '.join(gpus)}"
    elif llama.get("gpu_offload"):  # an RPC-only build reports offload support: its devices are RPC servers
        offload = f"GPU backends: none in this build (offload only to {opt('rpc')} servers' devices)"
    else:
        offload = "GPU backends: none in this build (CPU only)"
    return [f"llama.cpp build: {BUILD_WORDS.get(llama.get('build') or 'unknown', llama.get('build'))}",
            f"  CPU features used: {features}", f"  {offload}"]


def _command(cmd: str) -> list[str]:
    """A shell command as the README writes it, its lines: its CMAKE_ARGS, then `\\` and the pip line (each
    whole)."""
    head, sep, rest = cmd.partition('" pip ')
    return [f'{head}" \\', f"  pip {rest}"] if sep and len(cmd) > 110 else [cmd]
