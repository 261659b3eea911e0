"""The Python API's ``merge`` and ``check``: `abricot-local merge` (run/merge.py's ``merge``: a run's shards
joined) and `abricot-local check` (run/check.py's ``check_run``: a recorded run re-scored), the same calls
the commands make; here only their arguments are built and their results handed back typed (a ``Run``, a
:class:`Check`). Nothing prints: progress is a tqdm.auto bar (none with progress=False), what the check says
before it re-scores an AbricotWarning, a failure an AbricotError in the API's words."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields

from abricot_local.analysis.runs import Run
from abricot_local.api.arguments import entry
from abricot_local.api.options import progress_bars, warn
from abricot_local.api.run import Data, data_folder, data_pairs
from abricot_local.errors import UsageError, keywords, opt, render
from abricot_local.run.check import CheckReport

PathLike = os.PathLike


@entry
def merge(*shards: Run | str | PathLike, out: str | PathLike) -> Run:
    """`abricot-local merge`: the complete shards of one run (``evaluate(..., shard="K/N")``: each a ``Run`` or
    its folder) joined into ``out``, the run they stand for (its samples and metrics those of the unsharded run,
    its published verdict judged on every item); returns that ``Run``. Shards that are incomplete, overlap or are
    not of one run are refused (a ResultsError naming what differs), as the command refuses them."""
    from abricot_local.analysis.loading import load_run
    from abricot_local.run.merge import merge as join

    if not shards:
        raise UsageError("merge() needs the shards of one run: give each shard's Run or folder "
                         "(a run made with shard='K/N'), then out=FOLDER")
    if not os.fspath(out):
        raise UsageError(f"{opt('out')} is empty: give the folder to write")
    path = join([s if isinstance(s, Run) else os.fspath(s) for s in shards], os.fspath(out), _shard_call)
    return load_run(path.parent)


def _shard_call(model: str, options: dict, shard: str, out) -> str:
    """The ``evaluate`` call that scores ``shard`` with ``options`` (run.merge_advice.shard_options) into ``out``."""
    given = ", ".join(f"{k}={list(v) if isinstance(v, (list, tuple)) else v!r}" for k, v in options.items())
    return f"abricot_local.evaluate({model!r}, {given}, shard={shard!r}, out={str(out)!r})"


@dataclass(frozen=True, repr=False)
class Check(CheckReport):
    """``check``'s answer: run/check.py's CheckReport (``passed``: the command's exit status 0; ``reproduced``,
    ``checked``, ``identical_predictions``, ``max_abs_diff``, ``atol``, ``differences``, ``verdict``...), shown as
    the command prints it (``str``; a notebook's cell: the same text), ``repr`` in one line; ``to_json()``: the
    JSON `check --json` prints, its options in the API's words."""

    def __repr__(self) -> str:
        outcome = "passed" if self.passed else "NOT passed"
        return (f"Check({outcome}: {self.checked} items checked, {self.identical_predictions} identical predictions, "
                f"max |logprob difference| {self.max_abs_diff:.3g}, atol {self.atol:g})")

    def __str__(self) -> str:
        from abricot_local.console.listings import check_text

        return render(check_text(self), keywords)

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(str(self))}</pre>"

    def to_json(self) -> dict:
        import json

        from abricot_local.run.check import report_json

        return json.loads(report_json(self, keywords))  # its texts in the API's words as it is built


def _recheck_names() -> list[str]:
    """The backend options a check may set again (they change no number: ``threads``...), as `check` takes them."""
    from abricot_local.backends import option_specs

    return sorted({spec.name for spec, _ in option_specs() if spec.recheck})


@entry
def check(run: Run | str | PathLike, *, sample: int | None = None, atol: float | None = None,
          model: str | PathLike | None = None, data: Data = None, data_dir: str | PathLike | None = None,
          exact: bool = False, progress: bool = True, **options) -> Check:
    """`abricot-local check`: the finished run (a ``Run`` or its folder) re-scored with its recorded model, data
    and options (``sample``: only N items, drawn with the run's seed), compared item by item; returns a
    :class:`Check` (``passed``: what the command's exit status 0 says). ``atol`` (None: the command's rule),
    ``model`` (the model, if it moved), ``data``/``data_dir`` (the run's data, if it moved), ``exact`` as
    `check`'s flags; ``options``: ``model_dirs`` (as ``evaluate``'s: folders ``model`` may name a file in) and the
    backend options that change no number (``threads``, ``rpc_timeout``)."""
    from abricot_local.run.check import check_run

    allowed = ["model_dirs", *_recheck_names()]
    unknown = [k for k in options if k not in allowed]
    if unknown:
        from abricot_local.errors import fold
        from abricot_local.names import did_you_mean

        own = ["sample", "atol", "model", "data", "data_dir", "exact", "progress"]
        raise UsageError(fold(f"unknown option {unknown[0]!r}.{did_you_mean(unknown[0], [*own, *allowed])} "
                              f"check() takes run, {', '.join(own)}, model_dirs, and the backend options that "
                              f"change no number: {', '.join(allowed[1:])}"))
    if atol is not None and not (math.isfinite(atol) and atol >= 0):
        raise UsageError(f"{opt('atol')} must be a finite number, 0 or more, got {atol}")
    from abricot_local.run.request import run_options

    dirs = run_options({"model_dirs": options.pop("model_dirs", None)}).model_dirs  # parsed by its field
    update, close = progress_bars(progress)
    try:
        rep = check_run(run if isinstance(run, Run) else os.fspath(run), sample=sample, atol=atol,
                        model=None if model is None else os.fspath(model), data_dir=data_folder(data_dir),
                        data=data_pairs(data), backend_values={k: v for k, v in options.items() if v is not None},
                        progress=update, exact=exact, notice=lambda text: warn(f"check: {text}"), model_dirs=dirs)
    finally:
        close()
    return Check(**{f.name: getattr(rep, f.name) for f in fields(rep)})
