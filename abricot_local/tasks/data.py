"""Finding a task's data from its :class:`DataSpec`: given path, --data-dir, cache, download.

A ``folder`` spec names its files; a ``file`` spec names glob patterns, of
which exactly one file must match in a folder searched.
"""

from __future__ import annotations

from pathlib import Path

from abricot_local.cache import shown
from abricot_local.errors import DataError, DownloadError, FilesNotDownloaded, MissingDataError, opt


def _not_file(path: Path) -> str | None:
    """Why ``path`` is not a readable regular file ("missing", "a FIFO", "a symlink that loops",
    "not readable: Permission denied"...), or None when it is one."""
    import errno
    import stat

    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return "a symlink to nothing" if path.is_symlink() else "missing"
        if exc.errno == errno.ELOOP:
            return "a symlink that loops"
        return f"not readable: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    return next((f"{what}, not a file" for test, what in kinds if test(mode)), "not a regular file")


def _missing(folder: Path, files: tuple[str, ...]) -> list[str]:
    """Each of ``files`` that is not a regular file in ``folder``, with why when it is there but
    not a file (a FIFO, a symlink loop, unreadable)."""
    out = []
    for f in files:
        why = _not_file(folder / f)
        if why:
            out.append(f if why == "missing" else f"{f} ({why})")
    return out


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


def _in_folder(task, folder: Path, *, given: str = "", key: str = "") -> Path | None:
    """The data in ``folder``, None when it is not there; an error when ``given`` (the option that
    named it) and wrong. ``key``: the data option's key that gave ``folder`` (the task's name or its data key),
    which the refusal of several files tells the user to give one file with."""
    spec = task.data
    if spec.kind == "folder":
        if not folder.is_dir():
            if given and folder.exists():
                kind = "a file" if folder.is_file() else "neither a file nor a folder"
                raise missing(task, f"{shown(folder)} (given with {given}) is {kind}, not a folder holding "
                                    f"{', '.join(spec.files)}", folder)
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
                        f"pick one with {opt('data', (key or spec.key, 'FILE'))}")
    return found[0] if found else None


def locate(task) -> Path:
    """``task``'s data: the file or folder given (--data KEY=PATH; --data-dir DIR: in DIR/KEY/, the cache's
    layout, else in DIR), else its cache, else downloaded. A folder that cannot be searched (no permission) is one error naming it."""
    try:
        return _locate(task)
    except OSError as exc:
        where = f" {shown(exc.filename)}" if exc.filename else ""
        raise DataError(f"{task.name}: cannot read its data{where}: {exc.strerror or exc}") from None


def _locate(task) -> Path:
    spec, opts = task.data, task.options
    given = opts.data_for(spec.key, task.name)
    if given:
        path = Path(given).expanduser()
        key = task.name if task.name in dict(opts.data) else spec.key  # the key it was given for (data_for's)
        named = opt("data", (key, given))  # the option as given, each door writing it its own way
        if spec.kind == "file":
            if path.is_file():
                return path
            if path.is_dir():
                hit = _in_folder(task, path, given=named, key=key)
                if hit:
                    return hit
            why = _not_file(path)
            what = f"data file not found: {shown(path)}" if why == "missing" else f"{shown(path)} is {why}"
            raise missing(task, f"{what} (given with {named})", path)
        return _in_folder(task, path, given=named, key=key)
    if opts.data_dir:
        root = Path(opts.data_dir).expanduser()
        if not root.is_dir():
            raise DataError(f"{opt('data_dir', opts.data_dir)}: folder not found")
        own = root / spec.key  # the cache's layout, a folder per task's data (`data pull` writes DIR/KEY/)
        hit = _in_folder(task, own) if own.is_dir() else None
        if hit:
            return hit
        hit = _in_folder(task, root, given=opt('data_dir') if spec.kind == "folder" else "")
        if hit:
            return hit
        raise missing(task, f"no data in {opt('data_dir', opts.data_dir)} nor in its {spec.key}/ ({_wanted(spec)})",
                      opts.data_dir)
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
