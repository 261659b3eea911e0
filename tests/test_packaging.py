"""models.toml lives at the top of the repository and ships inside the package: an editable
install reads it there, a built wheel (from the tree or from the sdist) carries it as
abricot_local/models.toml, and the installed package finds it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from abricot_local.models.registry import load_registry, packaged_file

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "models.toml", "abricot_local")


def test_the_registry_read_is_the_top_level_file():
    """From the source tree (editable install, or `python -m pytest` in a checkout) the top-level
    file itself; from an installed wheel, its copy inside the package."""
    import abricot_local

    package = Path(abricot_local.__file__).resolve().parent
    found = packaged_file()
    assert found == (ROOT / "models.toml" if package == ROOT / "abricot_local" else package / "models.toml")
    assert found.read_bytes() == (ROOT / "models.toml").read_bytes()
    assert not (ROOT / "abricot_local" / "models.toml").exists(), "one registry file, at the top"
    assert load_registry()  # parses


def _build(src: Path, what: str) -> Path:
    """Build a wheel or an sdist of ``src`` with setuptools, in a subprocess (no network)."""
    code = f"from setuptools import build_meta as b; print(b.build_{what}('dist'))"
    r = subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return src / "dist" / r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A wheel built from a copy of the source tree, and one built from its sdist."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCE:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(p, src / name)
    wheel = _build(src, "wheel")
    sdist = _build(src, "sdist")
    unpacked = tmp_path_factory.mktemp("sdist")
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data")
    return wheel, sdist, _build(next(unpacked.iterdir()), "wheel")


@pytest.mark.real  # builds a wheel and an sdist
def test_wheel_and_sdist_carry_the_registry(built):
    wheel, sdist, wheel_from_sdist = built
    expected = (ROOT / "models.toml").read_bytes()
    for w in (wheel, wheel_from_sdist):
        with zipfile.ZipFile(w) as z:
            assert z.read("abricot_local/models.toml") == expected, w.name
            record = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))).decode()
            assert "abricot_local/models.toml," in record
    with tarfile.open(sdist) as tar:
        assert any(n.endswith("/models.toml") and n.count("/") == 1 for n in tar.getnames())


@pytest.mark.real  # builds a wheel and an sdist
def test_installed_wheel_finds_its_registry(built, tmp_path):
    site = tmp_path / "site"
    with zipfile.ZipFile(built[0]) as z:
        z.extractall(site)
    code = ("import abricot_local.models.registry as r; p = r.packaged_file(); "
            "print(p); print(len(r.load_registry()))")
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    path, count = out.stdout.split()
    assert Path(path) == site / "abricot_local" / "models.toml"
    assert int(count) == len(load_registry())


@pytest.mark.real  # builds a wheel and an sdist (as the two tests above; the not-real suite builds nothing)
def test_wheel_carries_every_module_of_the_source_tree(built):
    """Every module and subpackage ships: a hand-kept package list once left out abricot_local/stores
    and the installed tool failed on its first run (an editable install hid it)."""
    source = {p.relative_to(ROOT).as_posix() for p in (ROOT / "abricot_local").rglob("*.py")
              if "__pycache__" not in p.parts}
    for w in (built[0], built[2]):
        with zipfile.ZipFile(w) as z:
            missing = source - set(z.namelist())
        assert not missing, f"{w.name} lacks {sorted(missing)}"
