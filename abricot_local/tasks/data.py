"""Finding a task's data from its :class:`DataSpec`: given path, --data-dir, cache, download.

A ``folder`` spec names its files; a ``file`` spec names glob patterns, of
which exactly one file must match in a folder searched.
"""

from __future__ import annotations

from pathlib import Path

from abricot_local.cache import shown
from abricot_local.errors import DataError, DownloadError, FilesNotDownloaded, MissingDataError


def _missing(folder: Path, files: tuple[str, ...]) -> list[str]:
    return [f for f in files if not (folder / f).is_file()]


def _match(folder: Path, patterns: tuple[str, ...]) -> list[Path]:
    if not folder.is_dir():
        return []
    found = {p for pat in patterns for p in folder.glob(pat) if p.is_file()}
    return sorted(found)


def missing(task, problem: str, where: Path | str = "", reason: str = "", *, pull_command: bool = True,
            download: FilesNotDownloaded | None = None) -> MissingDataError:
    """``task``'s data is missing (``problem``): with the command that downloads it, the files to
    save by hand when a download failed (``download``), and the offline way."""
    get = f"abricot-local data pull {task.group or task.name}" if task.data.pull is not None and pull_command else None
    return MissingDataError(f"{task.name}: {problem}", get, task.data.how, task=task.name, where=shown(where),
                            reason=reason, download=download)


def pull(task, *, from_run: bool = True) -> list[Path]:
    """Download ``task``'s data into its cache folder with the task's own ``pull``; a failure is
    the task's :class:`MissingDataError`: why (the network unreachable, offline, HTTP ...), the
    files and their URLs each on a line of its own, the offline way. ``from_run``: the message
    also names `data pull` (a run that tried to download)."""
    cache = task.cache_folder()
    try:
        return list(task.data.pull(cache))
    except FilesNotDownloaded as err:
        raise missing(task, f"no data in {shown(cache)}, and it could not be downloaded: {err.cause}", cache,
                      err.cause, pull_command=from_run, download=err) from None
    except DownloadError as err:
        why = str(err)
        raise missing(task, f"no data in {shown(cache)}, and it could not be downloaded: {why}", cache, why,
                      pull_command=from_run) from None


def _in_folder(task, folder: Path, *, given: str = "") -> Path | None:
    """The data in ``folder``, None when it is not there; an error when ``given`` (the option that
    named it) and wrong."""
    spec = task.data
    if spec.kind == "folder":
        if not folder.is_dir():
            if given:
                raise missing(task, f"data folder not found: {shown(folder)} (given with {given})", folder)
            return None
        lacking = _missing(folder, spec.files)
        if not lacking:
            return folder
        if given:
            raise missing(task, f"{shown(folder)} lacks {', '.join(lacking)} (given with {given})", folder)
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
                hit = _in_folder(task, path, given=f"--data {spec.key}")
                if hit:
                    return hit
            raise missing(task, f"data file not found: {shown(path)}", path)
        return _in_folder(task, path, given=f"--data {spec.key}")
    if opts.data_dir:
        if not Path(opts.data_dir).expanduser().is_dir():
            raise DataError(f"--data-dir {opts.data_dir}: folder not found")
        hit = _in_folder(task, Path(opts.data_dir).expanduser(), given="--data-dir" if spec.kind == "folder" else "")
        if hit:
            return hit
        raise missing(task, f"no data in --data-dir {opts.data_dir} ({_wanted(spec)})", opts.data_dir)
    cache = task.cache_folder()
    hit = _in_folder(task, cache)
    if hit:
        return hit
    if opts.allow_download and spec.pull is not None:
        pull(task)
        hit = _in_folder(task, cache)
        if hit:
            return hit
    raise missing(task, f"no data in {shown(cache)} ({_wanted(spec)})", cache)


def _wanted(spec) -> str:
    return ("needs " if spec.kind == "folder" else "looks for ") + ", ".join(spec.files)
