"""Finding a task's data from its :class:`DataSpec`: given path, --data-dir, cache, download.

A ``folder`` spec names its files; a ``file`` spec names glob patterns, of
which exactly one file must match in a folder searched.
"""

from __future__ import annotations

from pathlib import Path

from abricot_local.errors import DataError, DownloadError


def _missing(folder: Path, files: tuple[str, ...]) -> list[str]:
    return [f for f in files if not (folder / f).is_file()]


def _match(folder: Path, patterns: tuple[str, ...]) -> list[Path]:
    if not folder.is_dir():
        return []
    found = {p for pat in patterns for p in folder.glob(pat) if p.is_file()}
    return sorted(found)


def _in_folder(task, folder: Path, *, given: bool) -> Path | None:
    """The data in ``folder``, None when it is not there; an error when ``given`` and wrong."""
    spec = task.data
    if spec.kind == "folder":
        if not folder.is_dir():
            if given:
                raise DataError(f"{task.name}: data folder not found: {folder}")
            return None
        missing = _missing(folder, spec.files)
        if not missing:
            return folder
        if given:
            raise DataError(f"{folder} lacks {', '.join(missing)}. {spec.how}")
        return None
    found = _match(folder, spec.files)
    if len(found) > 1:
        raise DataError(f"{folder} holds several {task.name} files ({', '.join(p.name for p in found)}); "
                        f"pick one with --data {spec.key}=FILE")
    return found[0] if found else None


def locate(task) -> Path:
    spec, opts = task.data, task.options
    given = opts.data_for(spec.key, task.name)
    if given:
        path = Path(given).expanduser()
        if spec.kind == "file":
            if path.is_file():
                return path
            if path.is_dir():
                hit = _in_folder(task, path, given=True)
                if hit:
                    return hit
            raise DataError(f"{task.name} data file not found: {path}. {spec.how}")
        return _in_folder(task, path, given=True)
    if opts.data_dir:
        hit = _in_folder(task, Path(opts.data_dir).expanduser(), given=spec.kind == "folder")
        if hit:
            return hit
        raise DataError(f"{task.name}: no data in --data-dir {opts.data_dir} "
                        f"({_wanted(spec)}). {spec.how}")
    cache = task.cache_folder()
    hit = _in_folder(task, cache, given=False)
    if hit:
        return hit
    if opts.allow_download and spec.pull is not None:
        try:
            spec.pull(cache)
        except DownloadError as err:
            raise DownloadError(f"{task.name}: no data in the cache {cache}, and the download failed: {err} "
                                f"{spec.how}") from None
        hit = _in_folder(task, cache, given=False)
        if hit:
            return hit
    raise DataError(f"{task.name}: no data in the cache {cache} ({_wanted(spec)}). {spec.how}")


def _wanted(spec) -> str:
    return ("needs " if spec.kind == "folder" else "looks for ") + ", ".join(spec.files)
