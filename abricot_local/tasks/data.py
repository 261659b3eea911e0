"""Finding a task's data from its :class:`DataSpec`: given path, --data-dir, cache, download.

A ``folder`` spec names its files; a ``file`` spec names glob patterns, of
which exactly one file must match in a folder searched.
"""

from __future__ import annotations

from pathlib import Path

from abricot_local.errors import DataError, DownloadError, MissingDataError


def _missing(folder: Path, files: tuple[str, ...]) -> list[str]:
    return [f for f in files if not (folder / f).is_file()]


def _match(folder: Path, patterns: tuple[str, ...]) -> list[Path]:
    if not folder.is_dir():
        return []
    found = {p for pat in patterns for p in folder.glob(pat) if p.is_file()}
    return sorted(found)


def missing(task, problem: str, where: Path | str = "", reason: str = "") -> MissingDataError:
    """``task``'s data is missing (``problem``): with the command that downloads it, and the offline way."""
    get = f"abricot-local data pull {task.group or task.name}" if task.data.pull is not None else None
    return MissingDataError(f"{task.name}: {problem}", get, task.data.how, task=task.name, where=shown(where),
                            reason=reason)


def shown(path: Path | str) -> str:
    """A path as a message shows it: the home folder as ~."""
    text, home = str(path), str(Path.home())
    return "~" + text[len(home):] if text and text.startswith(home + "/") else text


def _short(err: Exception) -> str:
    """A download failure in a few words (its message may list every URL)."""
    from abricot_local.fetch import is_offline

    if is_offline():
        import os

        return f"offline ({next((v for v in ('ABRICOT_OFFLINE', 'HF_HUB_OFFLINE') if os.environ.get(v)), '')})"
    text = str(err).split("\n")[0]
    return text if len(text) <= 80 else text[:77].rsplit(" ", 1)[0] + " ..."


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
        try:
            spec.pull(cache)
        except DownloadError as err:
            why = _short(err)
            raise missing(task, f"no data in {shown(cache)} (download failed: {why})", cache, why) from None
        hit = _in_folder(task, cache)
        if hit:
            return hit
    raise missing(task, f"no data in {shown(cache)} ({_wanted(spec)})", cache)


def _wanted(spec) -> str:
    return ("needs " if spec.kind == "folder" else "looks for ") + ", ".join(spec.files)
