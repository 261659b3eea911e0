"""Model sources as objects (issue 28, item 5): each registry source answers the same questions,
and the model reference, the plan and the listings ask it instead of comparing its name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from abricot_local.models.registry import SOURCES as REGISTRY_SOURCES, ModelSpec, load_registry
from abricot_local.models.sources import SOURCES, Pending, gated_text, snapshot_commit, source_of

PKG = Path(__file__).resolve().parents[1] / "abricot_local"


def test_every_registry_source_has_its_object():
    assert set(SOURCES) == set(REGISTRY_SOURCES)
    for spec in load_registry().values():
        assert source_of(spec).kind == spec.source


def test_a_local_entry_is_here_or_missing_and_never_fetched(tmp_path):
    path = tmp_path / "m.gguf"
    spec = ModelSpec("mine", "local", (path.name,), path=str(path), sizes=(5,))
    src = source_of(spec)
    assert not src.fetches and not src.is_cached(spec) and src.local_file(spec) is None
    assert src.download_folder(spec) == tmp_path and src.pending(spec) == Pending(str(path), 5, str(tmp_path),
                                                                                   src.pending(spec).free)
    path.write_bytes(b"x" * 5)
    assert src.is_cached(spec) and src.local_file(spec) == path and gated_text(spec) == "no"


def test_a_hub_entry_says_what_a_run_downloads_and_its_revision(tmp_path):
    spec = load_registry()["qwen2.5-0.5b-q4"]
    src = source_of(spec)
    assert src.fetches and src.to_accept and src.has_file
    assert src.pending(spec).what.startswith(f"{spec.repo} @ {spec.revision[:12]}: {spec.file}")
    commit = "a" * 40
    snap = tmp_path / "models--x--y" / "snapshots" / commit / "f.gguf"
    assert snapshot_commit(snap) == commit and snapshot_commit(tmp_path / "f.gguf") is None
    assert src.revision(spec, snap) == (spec.revision_for(0) or commit)


def test_the_synthetic_source_has_no_file():
    spec = ModelSpec("fake", "synthetic", (), backend="fake")
    src = source_of(spec)
    assert not src.has_file and src.is_cached(spec) and src.local_file(spec) is None
    assert src.where_text(spec) == "(synthetic: no file)"


@pytest.mark.parametrize("module", ["models/ref.py", "run/dry_run.py", "models/doctor.py", "cli/models.py",
                                    "models/local.py", "models/registry.py", "models/hub.py"])
def test_those_who_ask_a_source_name_none(module):
    for node in ast.walk(ast.parse((PKG / module).read_text(encoding="utf-8"))):
        left = node.left if isinstance(node, ast.Compare) else None
        if (isinstance(left, ast.Attribute) and left.attr == "source") or (isinstance(left, ast.Name)
                                                                           and left.id == "source"):
            consts = [c.value for c in node.comparators if isinstance(c, ast.Constant)]
            assert not set(consts) & set(SOURCES), f"{module}:{node.lineno} compares a source's name"


def test_each_source_says_what_its_models_toml_entry_gives_and_where_a_listed_file_comes_from(tmp_path):
    assert {k: (s.required, s.pins_revision) for k, s in SOURCES.items()} == {
        "hf": (("repo", "revision"), True), "pypi": (("package", "module"), False), "local": (("path",), False),
        "synthetic": ((), False)}
    toml = tmp_path / "models.toml"
    toml.write_text('[mine]\nsource = "local"\npath = "w/m.gguf"\n\n[pkg]\nsource = "pypi"\npackage = "p-gguf"\n'
                    'module = "p_gguf"\nfile = "m.gguf"\n')
    reg = load_registry(str(toml))
    mine, pkg = reg["mine"], reg["pkg"]
    assert mine.files == ("m.gguf",) and mine.path == str((tmp_path / "w" / "m.gguf").resolve())
    assert (source_of(mine).origin(mine), source_of(pkg).origin(pkg)) == ("registry path", "pypi p-gguf")
    assert source_of(pkg).listed_file(pkg) is None  # not installed: nothing to list
