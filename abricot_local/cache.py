"""Where abricot-local keeps the files it makes, whether it may go online, and how a file
is put in place (a temporary name, then an atomic rename)."""

from __future__ import annotations

import os
from pathlib import Path

_TRUE = {"1", "true", "yes", "on"}


def is_offline() -> bool:
    """True when ``ABRICOT_OFFLINE`` or ``HF_HUB_OFFLINE`` is set to a true value."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("ABRICOT_OFFLINE", "HF_HUB_OFFLINE"))


def cache_dir() -> Path:
    """``$ABRICOT_CACHE_DIR``, else ``$XDG_CACHE_HOME/abricot-local``, else ``~/.cache/abricot-local``."""
    env = os.environ.get("ABRICOT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "abricot-local"


def shown(path) -> str:
    """A path as a message shows it: this user's home folder as ~."""
    text, home = str(path), str(Path.home())
    return "~" + text[len(home):] if text and text.startswith(home + "/") else text


def publish(tmp: Path, dest: Path) -> None:
    """Rename ``tmp`` over ``dest`` atomically, with the mode a plain open() would give
    (mkstemp makes files private)."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)
    os.replace(tmp, dest)
