"""Where abricot-local may write. A run folder is known by its own files (results.json, a state file,
a checkpoint's manifest); run/owned.py guards the one a run takes. A file or folder a user names for
what the tool writes beside runs (``report -o``, ``compare -o``, ``report --plot``, the lm-eval layout's
folder) is checked here before anything is written: never a symbolic link (written through, or
replaced: either way not the tool's own file), never a read-only file or folder (root could replace
it all the same), never one of a run's own files or a place inside a run's checkpoint. A task's samples file
is named here too (:func:`samples_name`, :func:`task_of`): the one rule every writer and reader of one follows."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from abricot_local.errors import ResultsError
from abricot_local.names import path_part
from abricot_local.record.io import CHECKPOINT, RESULTS, RUN_MANIFEST

LOCK = ".lock"
RUNNING, INTERRUPTED, FAILED = "RUNNING", "INTERRUPTED", "FAILED"
MARKERS = (RUNNING, INTERRUPTED, FAILED)
_WRITABLE = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
_SAMPLES, _JSONL = "samples-", ".jsonl"
SAMPLES_GLOB = f"{_SAMPLES}*{_JSONL}"  # every samples file in a folder (:func:`task_of` says which are)


def samples_name(task: str) -> str:
    """The samples file of the task key ``task`` (in a run folder and in its checkpoint): ``samples-<task>.jsonl``,
    the key as one part of a path (names.path_part: a ``/`` or a control character becomes ``_``, as a plugin's
    variant name may hold). The one naming rule: every writer and reader of a samples file goes through it."""
    return f"{_SAMPLES}{path_part(task, 'task')}{_JSONL}"


def task_of(filename: str) -> str | None:
    """The task part of a samples file's name (:func:`samples_name`'s inverse: the task key itself for every key
    that path_part keeps as it is, which is every shipped task's); None for a name that is no samples file."""
    if filename.startswith(_SAMPLES) and filename.endswith(_JSONL) and len(filename) > len(_SAMPLES) + len(_JSONL):
        return filename[len(_SAMPLES):-len(_JSONL)]
    return None


def is_run_folder(folder: str | Path) -> bool:
    """Whether ``folder`` is a run's: results.json, a state file or a checkpoint's manifest."""
    folder = Path(folder)
    return any((folder / n).is_file() for n in (RESULTS, *MARKERS)) or (folder / CHECKPOINT / RUN_MANIFEST).is_file()


def _runs_own(path: Path) -> str:
    """What makes ``path`` (absolute) a run's: one of its own files, or a place in its checkpoint ("": neither)."""
    if is_run_folder(path.parent) and (path.name in (RESULTS, LOCK, *MARKERS) or task_of(path.name) is not None):
        return f"is a file of the run in {path.parent}"
    ckpt = next((p for p in (path, *path.parents) if p.name == CHECKPOINT and is_run_folder(p.parent)), None)
    if ckpt is None:
        return ""
    return f"{'is' if ckpt == path else 'lies in'} the checkpoint of the run in {ckpt.parent}"


def lstat_or_none(path: Path) -> os.stat_result | None:
    """``path``'s own stat (a link's, not its target's); None when nothing is there; any other OSError as the
    one line of paths.path_error."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        from abricot_local.paths import path_error

        raise path_error(exc) or ResultsError(f"cannot read {path}: {exc.strerror or exc}") from None


def _refuse(path: Path, st: os.stat_result | None, *, folder: bool) -> None:
    kind = "folder" if folder else "file"
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise ResultsError(f"{path} is a symbolic link: abricot-local writes only files it makes, never through a "
                           f"link or over one; give another {kind}")
    own = _runs_own(Path(path).absolute())
    if own:
        raise ResultsError(f"{path} {own}: only that run writes there; give a {kind} outside it")
    if st is None:
        return
    if folder and not stat.S_ISDIR(st.st_mode):
        raise ResultsError(f"{path} is not a folder; give a folder to write into")
    if not folder and not stat.S_ISREG(st.st_mode):
        raise ResultsError(f"{path} is {'a folder' if stat.S_ISDIR(st.st_mode) else 'not a regular file'}; "
                           "give a file to write to")
    if not st.st_mode & _WRITABLE:
        raise ResultsError(f"{path} is read-only: abricot-local does not replace it; give another {kind}")


def output_file(path: str | Path) -> Path:
    """``path``, a file the user named for the tool to write (whole, by a rename: jsonfiles.atomic_write),
    checked first: refused when it is a link, a run's own file, read-only, not a regular file, or in a
    read-only folder."""
    path = Path(path)
    _refuse(path, lstat_or_none(path), folder=False)
    parent = lstat_or_none(path.parent)
    if parent is not None and stat.S_ISDIR(parent.st_mode) and not parent.st_mode & _WRITABLE:
        raise ResultsError(f"{path.parent} is a read-only folder: abricot-local writes nothing into it; "
                           "give a file elsewhere")
    return path


def output_folder(path: str | Path) -> Path:
    """``path``, a folder the user named for the tool to write files into (made when missing), checked
    first: refused when it is a link, not a folder, read-only, or a run's checkpoint (or inside one)."""
    path = Path(path)
    _refuse(path, lstat_or_none(path), folder=True)
    return path
