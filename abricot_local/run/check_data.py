"""Where `check` and `kld` find a recorded run's data again, each task's files verified by the SHA-256 the
run recorded. A task's data is looked for where `run` would look for it with the data given (``--data
TASK=PATH``, ``--data-dir DIR``: the task's own lookup, Task.data_files, so DIR/KEY/ then DIR, as `run
--data-dir` finds it), then at the paths the run recorded, then under the same names in this machine's data
cache (where `abricot-local data pull` puts it: a run made on another machine). Data given for a task
(``--data``) is the only place looked: wrong or missing, it is an error, not passed over.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from abricot_local import hashing
from abricot_local.analysis.runs import options_of
from abricot_local.errors import AbricotError, MissingDataError, ResultsError, UsageError, opt
from abricot_local.record import Record
from abricot_local.tasks import base_name, make_task, task_class
from abricot_local.tasks.base import TaskOptions


def recorded_task_options(record: Record, data_dir: str | None = None, data: Any = ()) -> TaskOptions:
    """The recorded run's task options, each task's data found again (see the module's text) and given to it
    as ``--data KEY=PATH``; ``data``: ``--data`` as `run` takes it (``KEY=PATH`` texts, pairs, a dict), parsed
    by its field (TaskOptions.data); a key no task of the run reads refused."""
    base = options_of(record)
    pairs = TaskOptions(data=data).data if data else ()
    _require_read(record, pairs)
    found = []
    for name, entry in record.tasks.items():
        task = make_task(name, base)
        files = _find(record, name, task, [Path(f.path) for f in entry.data], [f.sha256 for f in entry.data],
                      pairs, data_dir)
        found.append((base_name(name), task.data_ref(files)))
    return replace(base, data=tuple(found))


def _require_read(record: Record, pairs) -> None:
    keys = {}
    for name in record.tasks:
        cls = task_class(name)
        keys.update(dict.fromkeys((cls.data.key, cls.name, base_name(name))))
    for key, path in pairs:
        if key not in keys:
            raise UsageError(f"{opt('data', (key, path))}: no task of the run reads it (its tasks read "
                             f"{', '.join(k for k in keys)})")


def _find(record: Record, name: str, task, was: list[Path], shas: list[str], pairs, data_dir: str | None
          ) -> list[Path]:
    """Task ``name``'s files (the recorded ``was``, of SHA-256s ``shas``) found here, or the error saying where
    they were looked for and how to give them."""
    if not was:
        return []  # nothing recorded to verify against: Task.data_ref says so
    looked = replace(options_of(record, name), data=pairs, data_dir=data_dir, allow_download=False)
    named = looked.data_for(task.data.key, task.name)
    tries, why = [], []
    if named or data_dir:
        given = opt("data", (task.data.key, named)) if named else opt("data_dir", data_dir)
        try:
            made = [f.path for f in make_task(name, looked).data_files()]  # as `run` finds it
        except AbricotError as err:
            if named:
                raise
            what = err.what if isinstance(err, MissingDataError) else err.raw().splitlines()[0]
            what = what.removeprefix(f"{task.name}: ").removesuffix(f" (given with {opt('data_dir')})")
            why.append(f"{given} ({what})")
        else:
            paired = _paired(made, was)
            tries.append(paired)
            if paired is None:
                why.append(f"{given} (other files than the run's: {', '.join(p.name for p in made)})")
    if not named:
        why += ["the recorded path" + ("s" * (len(was) > 1)),
                f"{_shown(task.cache_folder())} (this machine's data cache)"]
        tries += [was, [task.cache_folder() / p.name for p in was]]
    wrong = None
    for files in tries:
        if files and all(f.is_file() for f in files):
            bad = next(((f, got, sha) for f, sha in zip(files, shas)
                        if sha and (got := hashing.sha256_file(f, fresh=True)) != sha), None)  # from the bytes
            if bad is None:
                return files
            wrong = wrong or bad
    if wrong:
        f, got, sha = wrong
        raise ResultsError(f"data file {f} has sha256 {got}, but the run recorded {sha}: not the same file")
    raise _missing_data(task, was, why, bool(named))


def _paired(made: list[Path], was: list[Path]) -> list[Path] | None:
    """The files found, in the order of the recorded ones: one for one (their SHA-256s are checked), else by
    name; None when they are other files."""
    if len(made) == len(was):
        return made
    by_name = {p.name: p for p in made}
    return [by_name[p.name] for p in was] if all(p.name in by_name for p in was) else None


def _shown(path) -> str:
    from abricot_local.cache import shown

    return shown(path)


def _missing_data(task, was: list[Path], why: list[str], named: bool) -> ResultsError:
    """A recorded data file that is not here: the paths the run recorded (on the machine that made it: shown
    as written, never as this user's ~; a relative one said to be relative to where that run was started),
    where they were looked for here, the options that give them, and the command that fetches them."""
    lost = [p for p in was if not p.is_file()] or was
    names = [p.name for p in was]
    what = f"data file {lost[0].name} is" if len(lost) == 1 else f"data files {', '.join(p.name for p in lost)} are"
    kind = "DIR" if task.data.kind == "folder" else "FILE"
    lines = [f"{task.name}: the run's {what} not here",
             "  recorded as (where the machine that made the run had it):", *(f"    {p}" for p in lost)]
    if any(not p.is_absolute() for p in lost):
        lines.append("    (a relative path: relative to the folder that run was started from, which is not recorded; "
                     f"give the data with {opt('data_dir')} or {opt('data')})")
    lines += [f"  looked in: {'; '.join(why)}",
              f"  give it:  {opt('data_dir', 'DIR')} (a folder holding {', '.join(names)}, or its {task.data.key}/ "
              f"holding {'it' if len(names) == 1 else 'them'}), or {opt('data', (task.data.key, kind))}"]
    if task.data.pull is not None and not named:
        lines.append(f"  get it:   abricot-local data pull {task.group or task.name} (into "
                     f"{_shown(task.cache_folder())})")
    return ResultsError("\n".join(lines))
