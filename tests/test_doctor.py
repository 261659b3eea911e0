"""doctor: fact gathering (no printing, no network)."""

from __future__ import annotations

import json
import sys

import pytest
from huggingface_hub import constants as hf_constants

from abricot_local.backends import gpus
from abricot_local.backends.llama_cpp import build as llama_build, system
from abricot_local.models import doctor
from abricot_local.models.registry import load_registry

SYSTEM_INFO = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 0 | "
               "LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | CUDA : ARCHS = 890 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | ")


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ABRICOT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf"))


def test_parse_system_info():
    info = system.parse_system_info(SYSTEM_INFO)
    assert list(info) == ["CPU", "CUDA"]
    assert info["CPU"]["AVX2"] == "1" and info["CPU"]["AVX512"] == "0"
    assert info["CUDA"] == {"ARCHS": "890", "USE_GRAPHS": "1", "PEER_MAX_BATCH_SIZE": "128"}
    assert system.gpu_backends(info) == ["CUDA"]
    assert system.gpu_backends(system.parse_system_info("CPU : AVX = 1 | ")) == []
    old_style = system.parse_system_info("AVX = 1 | AVX2 = 1 | METAL = 0 | ")
    assert old_style == {"": {"AVX": "1", "AVX2": "1", "METAL": "0"}}


def test_parse_nvidia_smi():
    text = "NVIDIA H200, 143771, 143000\nNVIDIA GeForce RTX 4090, 24564 MiB, 1000 MiB\n"
    found = gpus.parse_nvidia_smi(text)
    assert found[0] == {"name": "NVIDIA H200", "memory_total": 143771 * 1024**2, "memory_free": 143000 * 1024**2}
    assert found[1]["name"] == "NVIDIA GeForce RTX 4090" and found[1]["memory_free"] == 1000 * 1024**2
    assert gpus.parse_nvidia_smi("garbage\n") == []


def test_nvidia_absent(monkeypatch):
    monkeypatch.setattr(gpus.shutil, "which", lambda name: None)
    assert gpus.nvidia_gpus() == {"available": False, "gpus": [], "error": None}


def test_llama_not_importable(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    facts = system.llama_facts()
    assert facts["importable"] is False and "llama_cpp" in facts["error"]
    assert "llama-cpp-python" in system.advice(facts, {"gpus": []})[0]


def test_advice_cuda_when_gpu_unused():
    llama = {"importable": True, "gpu_backends": []}
    tips = system.advice(llama, {"gpus": [{"name": "X", "memory_total": 1, "memory_free": 1}]})
    assert any(llama_build.REINSTALL["cuda"] in t for t in tips)
    assert not system.advice({"importable": True, "gpu_backends": ["CUDA"]}, {"gpus": [{"name": "X"}]})


def test_reinstall_commands_exact():
    """Each with RPC, as the README's install commands."""
    assert llama_build.REINSTALL["cuda"] == (
        'CMAKE_ARGS="-DGGML_RPC=on -DGGML_CUDA=on" pip install --force-reinstall --no-cache-dir '
        '"llama-cpp-python==0.3.36"')
    assert llama_build.REINSTALL["metal"] == (
        'CMAKE_ARGS="-DGGML_RPC=on -DGGML_METAL=on" pip install --force-reinstall --no-cache-dir '
        '"llama-cpp-python==0.3.36"')
    assert llama_build.REINSTALL["native"] == (
        'CMAKE_ARGS="-DGGML_RPC=on" pip install --force-reinstall --no-cache-dir '
        '"llama-cpp-python==0.3.36"')


def test_gather_runs():
    models = load_registry()
    facts = doctor.gather(models)
    json.dumps(facts)  # plain data
    assert facts["python"]["version"].count(".") == 2
    assert set(facts["packages"]) >= {"llama-cpp-python", "huggingface_hub"}
    llama = facts["backends"]["llama.cpp"]  # each backend's facts under its name (its doctor hook's)
    assert llama["llama_cpp"]["importable"] in (True, False) and llama["text"][0].startswith("llama-cpp-python ")
    if llama["llama_cpp"]["importable"]:
        assert "CPU" in llama["llama_cpp"]["backends"] or llama["llama_cpp"]["cpu_features"] is not None
        assert isinstance(llama["llama_cpp"]["gpu_offload"], bool)
    rows = {r["alias"]: r for r in facts["models"]}
    assert set(rows) == set(models)
    assert rows["llama-3.1-8b-q4"]["cached"] is False  # empty HF cache
    assert rows["llama-3.1-70b-q4"]["size"] == 42520398400 and rows["llama-3.1-70b-q4"]["size_exact"]
    assert llama["reinstall"] == llama_build.REINSTALL
    assert facts["memory"]["ram_total"] is None or facts["memory"]["ram_total"] > 0


def test_readme_ci_and_doctor_give_one_install_command_with_the_version_pin():
    """Issue 30, item 6: the pin the bit-for-bit promise depends on comes from llama_build alone."""
    from pathlib import Path

    from abricot_local.backends.llama_cpp import build as llama_build

    root = Path(__file__).resolve().parents[1]
    readme, ci = (root / "README.md").read_text(encoding="utf-8"), (root / ".ci" / "run").read_text(encoding="utf-8")
    pin = llama_build.REQUIREMENT
    assert pin == '"llama-cpp-python==0.3.36"'
    portable = f'CMAKE_ARGS="{llama_build.PORTABLE_CMAKE_ARGS}" \\\n'
    assert f"{portable}  pip install --no-cache-dir {pin}" in readme  # the Install and Test commands
    assert f"{portable}  python -m pip install --no-cache-dir {pin}" in ci
    assert all(cmd.endswith(f"pip install --force-reinstall --no-cache-dir {pin}") for cmd in llama_build.REINSTALL.values())
    assert llama_build.REINSTALL["portable"].startswith(portable.rstrip(" \\\n"))
    assert "llama-cpp-python==" not in readme.replace(pin, "")  # no other pin anywhere in the README
