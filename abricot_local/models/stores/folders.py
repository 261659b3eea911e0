"""GGUF files in plain folders: llama.cpp's own download cache (``$LLAMA_CACHE``, else its
default folder) and any folder given with ``--model-dir``. A model is named by its file name."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import Found, Listed, label_of


def llama_cache() -> Path:
    """llama.cpp's cache: ``$LLAMA_CACHE``; else ``~/Library/Caches/llama.cpp`` (macOS),
    ``%LOCALAPPDATA%/llama.cpp`` (Windows), ``$XDG_CACHE_HOME/llama.cpp`` or ``~/.cache/llama.cpp``."""
    env = os.environ.get("LLAMA_CACHE")
    if env:
        return Path(env).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "llama.cpp"
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "llama.cpp"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "llama.cpp"


def is_model_name(path: Path) -> bool:
    """A .gguf that is a model to list: not a projector, not a later part of a split model."""
    from abricot_local.gguf.check import SPLIT_NAME

    name = path.name.lower()
    if not name.endswith(".gguf") or name.startswith("mmproj") or name.startswith("."):
        return False
    m = SPLIT_NAME.match(path.name)
    return m is None or int(m["no"]) == 1


def _files(folder: Path, recursive: bool) -> list[Path]:
    if not folder.is_dir():
        return []
    found = folder.rglob("*.gguf") if recursive else folder.glob("*.gguf")
    return sorted(p for p in found if is_model_name(p) and p.is_file())


def _places(model_dirs: tuple[str, ...]) -> list[tuple[str, Path, bool]]:
    return [("llama.cpp-cache", llama_cache(), False)] + [("model-dir", Path(d).expanduser(), True) for d in model_dirs]


def listing(model_dirs: tuple[str, ...] = ()) -> list[Listed]:
    return [Listed(source, p.name, p) for source, folder, deep in _places(model_dirs) for p in _files(folder, deep)]


def find(name: str, model_dirs: tuple[str, ...] = ()) -> Found | None:
    """The file whose name is ``name`` or ``name``.gguf (case-insensitive), first place first."""
    want = {name.lower(), f"{name.lower()}.gguf"}
    for source, folder, deep in _places(model_dirs):
        for p in _files(folder, deep):
            if p.name.lower() in want:
                return Found(p, source, label_of(p.stem), facts=(("folder", str(folder)),))
    return None
