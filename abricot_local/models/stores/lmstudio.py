"""LM Studio's models folder: ``lmstudio:PUBLISHER/REPO[/FILE.gguf]``.

The folder is the one LM Studio's settings name (``downloadsFolder`` in
``~/.lmstudio/settings.json``), else ``~/.lmstudio/models``, else the older
``~/.cache/lm-studio/models``; models lie in ``PUBLISHER/REPO/``. A repository with
several quant files asks for one, with the list.
"""

from __future__ import annotations

from pathlib import Path

from abricot_local.errors import ModelError, UnknownModelError
from abricot_local.jsonfiles import BadJSON, loads
from . import Found, Listed, label_of
from .folders import is_model_name


def roots() -> list[Path]:
    home = Path.home()
    out = []
    for settings in (home / ".lmstudio" / "settings.json", home / ".cache" / "lm-studio" / ".internal" / "app-settings.json"):
        try:  # settings that cannot be read (not JSON, nested too deep, not an object): the default folders
            doc = loads(settings.read_bytes())
        except (OSError, BadJSON):
            continue
        folder = doc.get("downloadsFolder") if isinstance(doc, dict) else None
        if isinstance(folder, str) and folder:
            out.append(Path(folder).expanduser())
    return out + [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]


def _stores() -> list[Path]:
    seen, out = set(), []
    for r in roots():
        if r.is_dir() and r.resolve() not in seen:
            seen.add(r.resolve())
            out.append(r)
    return out


def _models(repo: Path) -> list[Path]:
    return sorted(p for p in repo.rglob("*.gguf") if p.is_file() and is_model_name(p))


def resolve(rest: str, *, offline=None, notify=None, progress: bool = True, fresh: bool = False) -> Found:
    parts = [p for p in rest.split("/") if p]
    if len(parts) < 2:
        raise ModelError(f"lmstudio:{rest}: expected lmstudio:PUBLISHER/REPO[/FILE.gguf]")
    stores = _stores()
    if not stores:
        raise ModelError(f"lmstudio:{rest}: no LM Studio models folder here (looked in "
                         f"{', '.join(map(str, roots()))})")
    for root in stores:
        repo = root / parts[0] / parts[1]
        if not repo.is_dir():
            continue
        files = _models(repo)
        if len(parts) > 2:
            want = "/".join(parts[2:]).lower()
            files = [p for p in files if p.relative_to(repo).as_posix().lower() == want or p.name.lower() == want]
            if not files:
                raise UnknownModelError(f"lmstudio:{rest}: no such file in {repo}; it holds: "
                                        f"{', '.join(p.name for p in _models(repo)) or 'no GGUF'}")
        if len(files) > 1:
            choices = ", ".join(f"lmstudio:{parts[0]}/{parts[1]}/{p.relative_to(repo).as_posix()}" for p in files)
            raise ModelError(f"lmstudio:{rest} holds {len(files)} model files; choose one: {choices}")
        if not files:
            raise ModelError(f"lmstudio:{rest}: {repo} holds no GGUF model file")
        name = f"{parts[0]}/{parts[1]}/{files[0].relative_to(repo).as_posix()}"
        return Found(files[0], "lmstudio", label_of(files[0].stem), facts=(("folder", str(root)), ("name", name)))
    from difflib import get_close_matches

    names = [x.name for x in listing()]
    close = get_close_matches(f"lmstudio:{rest}", names, n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise UnknownModelError(f"lmstudio:{rest} is not in LM Studio's models folder ({', '.join(map(str, stores))}).{hint}")


def listing() -> list[Listed]:
    out = []
    for root in _stores():
        for p in _models(root):
            rel = p.relative_to(root).parts
            if len(rel) >= 3:
                out.append(Listed("lmstudio", "lmstudio:" + "/".join(rel), p))
    return out
