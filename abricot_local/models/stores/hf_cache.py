"""``hf:OWNER/REPO[:QUANT]`` and ``hf:OWNER/REPO/FILE.gguf``, as llama.cpp's ``-hf`` takes them.

Found in the Hugging Face cache first (``models--OWNER--REPO/snapshots/<commit>/``, the
commit ``refs/main`` names first), with no network; else, unless offline, downloaded with
huggingface_hub into that cache. QUANT matches the file name case-insensitively; with none,
``Q4_K_M`` if the repository has it, else its only model file; several candidates ask for
one, with the list. A split model's parts all come, and the first is used. The commit
the file came from is the run's recorded revision.
"""

from __future__ import annotations

import re
from pathlib import Path

from abricot_local.errors import ModelError
from . import Found, Listed, label_of
from .folders import is_model_name

DEFAULT_QUANT = "Q4_K_M"


def hub_cache() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def parse(rest: str) -> tuple[str, str | None, str | None]:
    """-> (OWNER/REPO, QUANT or None, FILE or None)."""
    parts = rest.split("/")
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise ModelError(f"hf:{rest}: expected hf:OWNER/REPO[:QUANT] or hf:OWNER/REPO/FILE.gguf")
    if len(parts) > 2:
        return f"{parts[0]}/{parts[1]}", None, "/".join(parts[2:])
    repo, _, quant = rest.partition(":")
    return repo, quant or None, None


def choose(files: list[str], quant: str | None, file: str | None, where: str) -> list[str]:
    """The parts of the one model file ``quant``/``file`` picks among ``files`` (repository paths)."""
    from abricot_local.gguf.check import SPLIT_NAME

    models = [f for f in files if is_model_name(Path(f))]
    if file is not None:
        picked = [f for f in models if f.lower() == file.lower()]
        if not picked:
            raise ModelError(f"{where}: no model file {file}; it has: {', '.join(models) or 'no GGUF'}")
    else:
        want = quant or DEFAULT_QUANT
        pat = re.compile(rf"(?<![A-Za-z0-9]){re.escape(want)}(?![A-Za-z0-9])", re.I)
        picked = [f for f in models if pat.search(Path(f).name)]
        if not picked and quant is None and len(models) == 1:
            picked = models
        if len(picked) != 1:
            ask = ", ".join(f"{where}/{f}" for f in (picked or models))
            what = f"{len(picked)} files match {want}" if picked else (f"no file matches {want}" if quant else
                                                                      f"{len(models)} model files")
            raise ModelError(f"{where}: {what}; choose one: {ask}" if ask else f"{where}: no GGUF model file")
    first = picked[0]
    m = SPLIT_NAME.match(Path(first).name)
    if not m:
        return [first]
    head = first[: len(first) - len(Path(first).name)]
    return [f"{head}{m['prefix']}-{k:05d}-of-{m['count']}.gguf" for k in range(1, int(m["count"]) + 1)]


def _snapshots(repo: str) -> list[tuple[str, Path]]:
    """(commit, folder) of the repository's cached snapshots, the one refs/main names first."""
    base = hub_cache() / f"models--{repo.replace('/', '--')}"
    snaps = base / "snapshots"
    if not snaps.is_dir():
        return []
    try:
        main = (base / "refs" / "main").read_text().strip()
    except OSError:
        main = ""
    found = sorted((p.name, p) for p in snaps.iterdir() if p.is_dir())
    return sorted(found, key=lambda cp: cp[0] != main)


def _files_in(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.gguf") if p.is_file())


def resolve(rest: str, *, offline=None, notify=None, progress: bool = True, fresh: bool = False) -> Found:
    repo, quant, file = parse(rest)
    where = f"hf:{repo}"
    partial = None  # (snapshot folder, the parts of a split model it lacks)
    for commit, folder in _snapshots(repo):
        try:
            parts = choose(_files_in(folder), quant, file, where)
        except ModelError:
            continue
        lacking = [p for p in parts if not (folder / p).is_file()]
        if not lacking:
            return _found(repo, commit, folder / parts[0])
        partial = partial or (folder, lacking)
    from abricot_local.cache import is_offline

    shown = f"{where}{':' + quant if quant else ''}{'/' + file if file else ''}"
    if is_offline() if offline is None else offline:
        if partial:
            folder, lacking = partial
            raise ModelError(f"{shown}: the split model in {folder} lacks part(s) {', '.join(lacking)}, and downloads "
                             "are off (offline); get them when online (`hf download`), or copy them there")
        raise ModelError(f"{shown} is not in the Hugging Face cache ({hub_cache()}) and downloads are off (offline)")
    return _download(repo, quant, file, where, notify, progress)


def pending(rest: str):
    """What a run would download for ``hf:REST`` when it is not in the cache (a models.sources.Pending): the
    Hugging Face cache, its free disk; offline, the run's own refusal."""
    from abricot_local.cache import is_offline
    from abricot_local.memory import free_disk
    from abricot_local.models.sources import Pending, offline_refusal

    refused = offline_refusal(lambda: resolve(rest, offline=True, progress=False)) if is_offline() else ""
    folder = hub_cache()
    return Pending(f"hf:{rest} from the Hugging Face hub", None, str(folder), free_disk(folder)[1], refused)


def _download(repo: str, quant, file, where: str, notify, progress: bool) -> Found:
    from abricot_local.models import hub, hub_probe, hub_pull
    from ..hub_errors import hub_error

    hub_probe.require(where)
    api = hub.hub_module()
    try:
        info = api.model_info(repo)
    except Exception as exc:
        raise hub_error(exc, repo, None, None, dataset=False) from None
    commit = info.sha
    parts = choose(sorted(s.rfilename for s in (info.siblings or [])), quant, file, where)
    if notify:
        notify(f"downloading {repo} @ {commit[:12]}: {', '.join(parts)} -> {hub_cache()}")
    paths = []
    with hub.progress_bars(progress):
        for name in parts:  # a stopped pull continued (hub_pull), as a registry model's
            paths.append(hub_pull.pull(api, repo, name, commit, progress=progress, notify=notify))
    return _found(repo, commit, paths[0])


def _found(repo: str, commit: str, path: Path) -> Found:
    return Found(path, "hf", label_of(path.stem), revision=commit, facts=(("repo", repo), ("commit", commit)))


def listing() -> list[Listed]:
    root = hub_cache()
    if not root.is_dir():
        return []
    out = []
    for base in sorted(root.glob("models--*--*")):
        repo = base.name.removeprefix("models--").replace("--", "/", 1)
        seen = set()
        for commit, folder in _snapshots(repo):
            for rel in _files_in(folder):
                if rel not in seen and is_model_name(Path(rel)):
                    seen.add(rel)
                    out.append(Listed("hf", f"hf:{repo}/{rel}", folder / rel))
    return out
