"""Finished runs read from disk as :class:`runs.Run`: a run folder (record.read_run, its samples read when
first asked) or an lm-eval output (lm_eval_input.py), each with its model's registry entry applied.
Several at once (:func:`load_all`): the runs first, then the lm-eval outputs, whose items are found in
the data given (``data``, ``data_dir``: `run`'s --data and --data-dir) and in the data files the runs
beside them recorded; an lm-eval output that cannot be read is skipped with one line when the caller
says so (``skip``), so one bad folder in a tree does not stop the others. A reader showing what the records say
(`report`'s tables) holds the runs' samples files to them first (:func:`counted`): one that lost or gained lines
stops it, naming the file and the count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from abricot_local.analysis import lm_eval_input
from abricot_local.analysis.runs import Run
from abricot_local.errors import ResultsError
from abricot_local.record import entry_counted, read_run

Data = tuple[tuple[str, str], ...]  # (data key, path), as `run --data KEY=PATH`
Skip = Callable[[str, ResultsError], None]  # (the folder, why): an lm-eval output left out


def load_run(path: str | Path, registry: Mapping | None = None, *, data: Data = (), data_dir: str | None = None) -> Run:
    """A finished run folder, or an lm-eval output folder or results file (its tasks' data found in
    ``data``/``data_dir`` first, then where `run` finds it); a clean :class:`ResultsError` when it is
    missing, incomplete or malformed."""
    if lm_eval_input.is_lm_eval_output(path):
        run = lm_eval_input.read(path, tuple(data), data_dir)
    else:
        run = Run(str(path), read_run(path))
    return run.identified(registry)


def load_all(folders: Sequence[str | Path], registry: Mapping | None = None, *, data: Data = (),
             data_dir: str | None = None, skip: Skip | None = None) -> list[Run]:
    """The runs in ``folders``, in order (each read once): abricot-local runs first, then lm-eval
    outputs, whose items are matched to the tasks' items built from ``data``/``data_dir`` and from the
    data the runs recorded. With ``skip``, an lm-eval output that cannot be read is told to it and left
    out (unless nothing else is left: then the first one's error is raised)."""
    lm = [lm_eval_input.is_lm_eval_output(f) for f in folders]
    runs = {k: load_run(f, registry) for k, f in enumerate(folders) if not lm[k]}
    found = lm_eval_input.recorded_data(runs.values()) if any(lm) else ()
    pairs = lm_eval_input.given_wins(found, tuple(data))  # the data given wins over what the runs recorded
    failed: list[tuple[str, ResultsError]] = []
    for k, f in enumerate(folders):
        if lm[k]:
            try:
                runs[k] = load_run(f, registry, data=pairs, data_dir=data_dir)
            except ResultsError as err:
                if skip is None:
                    raise
                failed.append((str(f), err))
    if failed and not runs:
        raise failed[0][1]
    for f, err in failed:
        skip(f, err)
    return [runs[k] for k in range(len(folders)) if k in runs]


def counted(runs: Iterable[Run]) -> None:
    """Each run folder's samples files held to their record (record.entry_counted: inside the folder, no torn line,
    exactly the items the record counts; the count check every reader of samples makes): one that lost or gained
    lines is a :class:`ResultsError` naming it and the count, before anything is shown from that record. A line's
    own damage is left to the readers of its samples (the html page, `--verify`, a figure's note)."""
    for run in runs:
        for t in run.run_tasks:
            if t.given is None and t.folder is not None and t.entry is not None:
                entry_counted(Path(t.folder), t.entry, t.own_key)
