"""Finished runs read from Python: ``load_run`` (one run folder or lm-eval output, or the one run below a
folder) and ``load_runs`` (every finished run below a folder, searched as `report` searches it), each an
``abricot_local.Run`` (analysis.runs.Run: the record, the samples read when first asked, the notebook's
tables). lm-eval outputs find their tasks' data in ``data``/``data_dir`` (as `run`'s), then in the files
the runs beside them recorded; one that cannot be read is left out with an AbricotWarning."""

from __future__ import annotations

import os
from pathlib import Path

from abricot_local.analysis.runs import Run
from abricot_local.api.arguments import entry
from abricot_local.api.options import warn
from abricot_local.errors import ResultsError, render

PathLike = os.PathLike
# as evaluate's ``data``: {task: path}, "task=path", or a list of "task=path" and (task, path)
Data = dict[str, str | PathLike] | str | list[str | tuple[str, str | PathLike]] | tuple[
    str | tuple[str, str | PathLike], ...] | None


def data_pairs(data) -> tuple[tuple[str, str], ...]:
    """The API's ``data`` (any of its shapes) as (data key, path) pairs, a key no task reads refused."""
    from abricot_local.tasks.options import data_pairs as parsed

    return () if data is None else parsed(data)


def hint(err: ResultsError) -> str:
    """What the API says after an lm-eval output whose tasks' data is not here: the keywords that give it."""
    from abricot_local.analysis.lm_eval_input import DataNotHere

    if not isinstance(err, DataNotHere):
        return ""
    given = ", ".join(f'"{k}": PATH' for k in err.keys)
    return f"; give it: data={{{given}}} or data_dir=DIR"


def data_folder(data_dir) -> str | None:
    """The API's ``data_dir`` as its option field takes it (tasks.options.TaskOptions.data_dir: a file refused)."""
    from abricot_local.tasks.options import TaskOptions

    return None if data_dir is None else TaskOptions(data_dir=data_dir).data_dir


def _warn_skipped(path: str, err: ResultsError) -> None:
    warn(f"skipped {path}: {err}{hint(err)}")


def state_words(state) -> str:
    """A run folder's state (run.states.RunState.describe: interrupted with how far, failed with its error as
    its folder keeps it, in the record's words): what load_runs says of a folder it skips and load_run of one
    it refuses."""
    return render(state.describe())


def finished(paths, *, what: str) -> list[str]:
    """The finished runs under ``paths`` (run folders, lm-eval outputs, folders searched for them, as
    `report` searches), each once, in order; one that is not finished is named in a warning; none finished:
    a ResultsError naming each one's state."""
    from abricot_local.run.states import find_runs

    states = find_runs(tuple(str(p) for p in paths))
    if not states:
        raise ResultsError(f"{what} holds no results.json and no run folder below it")
    done = list(dict.fromkeys(str(s.path) for s in states if s.complete))
    left = [s for s in states if not s.complete]
    if not done:
        lines = [f"{s.path} is not a finished run ({state_words(s)})" for s in left]
        raise ResultsError(lines[0] if len(lines) == 1 else "\n  ".join([f"no finished run in {what}:", *lines]))
    for s in left:
        warn(f"skipped {s.path} ({state_words(s)})")
    return done


def loaded(paths, registry=None, *, data=(), data_dir=None, beside=()) -> list[Run]:
    """The runs at ``paths`` (finished ones, as :func:`finished` finds them), read together
    (analysis.loading.load_all); ``beside``: runs already read, whose recorded data helps lm-eval outputs."""
    from abricot_local.analysis.lm_eval_input import given_wins, recorded_data
    from abricot_local.analysis.loading import load_all

    pairs = given_wins(recorded_data(beside), tuple(data))
    try:
        return load_all(paths, registry, data=pairs, data_dir=data_dir, skip=_warn_skipped)
    except ResultsError as err:  # nothing else to read: the lm-eval output's own error
        if not hint(err):
            raise
        raise ResultsError(f"{err}{hint(err)}") from None


@entry
def load_run(path: str | PathLike, *, data: Data = None, data_dir: str | PathLike | None = None) -> Run:
    """A finished run folder (its results.json and samples files, validated), or an lm-eval output
    folder or results file (docs/compare.md), or a folder holding one of them (searched as `report`
    searches); an lm-eval output's items are matched to the tasks' own, whose data is found in ``data``
    ({"discotex": PATH}, as `run --data`) and ``data_dir`` (as `run --data-dir`), else where `run` finds it."""
    from abricot_local.analysis.lm_eval_input import is_lm_eval_output
    from abricot_local.analysis.loading import load_run as read
    from abricot_local.record import RESULTS

    pairs, folder = data_pairs(data), data_folder(data_dir)
    where = Path(path)
    if where.is_dir() and not (where / RESULTS).is_file() and not is_lm_eval_output(where):  # a folder above
        # one run (lm-eval's <out>/<model>/), or a run folder that holds no finished run (said as load_runs says it)
        found = finished([where], what=str(where))
        if len(found) > 1:
            raise ResultsError(f"{where} holds {len(found)} finished runs ({', '.join(found[:3])}"
                               f"{', ...' if len(found) > 3 else ''}): give one of them, or read them all with "
                               "load_runs")
        where = Path(found[0])
    try:
        return read(where, data=pairs, data_dir=folder)
    except ResultsError as err:
        message = hint(err)
        if not message:
            raise
        raise ResultsError(f"{err}{message}") from None


@entry
def load_runs(folder: str | PathLike, *, data: Data = None, data_dir: str | PathLike | None = None) -> list[Run]:
    """Every finished run in ``folder`` (searched recursively, as `report` does; lm-eval output folders
    too, their items matched with ``data``/``data_dir`` and the data the runs beside them recorded);
    one that is not finished, or an lm-eval output that cannot be read, is named in a warning and left out;
    nothing left to hand back is an error saying why (each unfinished run's state, the lm-eval output's error)."""
    pairs, where = data_pairs(data), data_folder(data_dir)
    return loaded(finished([folder], what=str(folder)), data=pairs, data_dir=where)

