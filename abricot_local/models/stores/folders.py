"""GGUF files in plain folders: llama.cpp's own download cache (``$LLAMA_CACHE``, else its
default folder) and any folder given with ``--model-dir``. A model is named by its file name. A ``--model-dir``
that is no folder is refused where it is read (as a store named but not here is: ``ollama:``, ``lmstudio:``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from abricot_local.errors import ModelError, opt

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


def _absent(model_dirs: tuple[str, ...]) -> str:
    """The --model-dir folders given that are no folder here, said ("" when every one is)."""
    absent = [str(Path(d).expanduser()) for d in model_dirs if d not in _present(model_dirs)]
    return ", ".join(opt("model_dirs", d) for d in absent) + (": no such folder" if absent else "")


def _present(model_dirs: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(d for d in model_dirs if Path(d).expanduser().is_dir())


def listing(model_dirs: tuple[str, ...] = ()) -> list[Listed]:
    """Every model file in llama.cpp's cache (none when it is not here) and the --model-dir folders (one that
    is no folder: refused)."""
    absent = _absent(model_dirs)
    if absent:
        raise ModelError(f"{absent}; give folders that hold .gguf files")
    return [Listed(source, p.name, p) for source, folder, deep in _places(model_dirs) for p in _files(folder, deep)]


def find(name: str, model_dirs: tuple[str, ...] = ()) -> Found | None:
    """The file whose name is ``name`` or ``name``.gguf (case-insensitive), first place first; a --model-dir
    that is no folder: refused, saying where the file is when it was found elsewhere."""
    want = {name.lower(), f"{name.lower()}.gguf"}
    hit = next((Found(p, source, label_of(p.stem), facts=(("folder", str(folder)),))
                for source, folder, deep in _places(model_dirs) for p in _files(folder, deep)
                if p.name.lower() in want), None)
    absent = _absent(model_dirs)
    if absent:
        where = f"without it, {name} is {hit.path}" if hit else \
            f"{name} is not in {looked_in(_present(model_dirs))} either"
        raise ModelError(f"{absent}; give the folder that holds {name} ({where})")
    return hit


def looked_in(model_dirs: tuple[str, ...] = ()) -> str:
    """Where a model's file name is looked for, said: the current folder, each --model-dir, llama.cpp's cache."""
    cache = llama_cache()
    places = [f"the current folder ({Path.cwd()})", *(opt("model_dirs", str(Path(d).expanduser())) for d in model_dirs),
              f"llama.cpp's cache ({cache}{'' if cache.is_dir() else ': no such folder'})"]
    return ", ".join(places[:-1]) + " or " + places[-1]
