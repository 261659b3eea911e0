"""`models --paths` names where `run` takes a PyPI entry's GGUF put there by hand while its package is not installed
(models/pypi.py's placed_path: the path its refusal names), said missing (was: the entry not listed at all); once a
file is there, not said missing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.models.pypi import not_installed
from abricot_local.models.registry import load_registry


def paths() -> str:
    r = CliRunner().invoke(cli, ["models", "--paths"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


def test_a_pypi_model_not_installed_shows_where_to_put_its_file(monkeypatch):
    spec = load_registry()["gemma-3-270m"]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == spec.module else real(name, *a))
    said = paths().splitlines()
    head = next(k for k, line in enumerate(said) if line.startswith("gemma-3-270m ("))
    placed = said[head + 1].strip().removesuffix(" (missing)")
    assert said[head + 1].endswith(" (missing)") and "not here" in said[head], said
    assert f"at {placed}" in not_installed(spec)  # the path the run's refusal names, where it takes a file put
    Path(placed).parent.mkdir(parents=True, exist_ok=True)  # (the test's own cache: isolated_home)
    Path(placed).write_bytes(b"GGUF")
    assert "(missing)" not in paths()  # a file there: listed as any file here is, never as missing
