"""What a task class declares, checked once when it loads (``tasks.task_class``), so that a plugin's
slip is refused by name at once rather than as a wrong verdict or a raw KeyError at the end of a run:

- ``primary_metric`` and every ``chance`` and ``margins`` key is one of its ``metric_names``;
- every published row (``references()``) is of one of its ``metric_names``;
- every :class:`~abricot_local.tasks.base.MetricInput` ``metric_inputs()`` declares (asked over no
  sample: a task whose inputs need samples to be known is checked when run) is of one of its
  ``metric_names``, its ``stat`` a statistic the project computes (``metrics.ROW_STATS``);
- its ``data.release`` is a tuple of SHA-256 (64 lowercase hex digits: tasks/release.py compares them).

Each refusal is a :class:`TaskError` naming the task, its class and the bad name, with the names it
could be.
"""

from __future__ import annotations

import functools
import re

from abricot_local.errors import TaskError
from abricot_local.names import did_you_mean
from abricot_local.tasks.base import Task
from abricot_local.tasks.item_check import where


def _refused(cls: type, what: str, name: object, known, among: str = "its metric_names") -> TaskError:
    known = tuple(known)
    hint = did_you_mean(str(name), known) if isinstance(name, str) else ""
    return TaskError(f"{where(cls)}: {what} {name!r}, which is none of {among}.{hint} Known: "
                     f"{', '.join(known) or 'none'}; fix the task's declarations (or upgrade its package)")


@functools.cache
def checked(cls: type[Task]) -> type[Task]:
    """``cls`` if what it declares holds together (module docstring), else a :class:`TaskError`; once per class."""
    from abricot_local.metrics import ROW_STATS
    from abricot_local.tasks.options import TaskOptions

    names = tuple(cls.metric_names)
    if cls.primary_metric not in names:
        raise _refused(cls, "primary_metric is", cls.primary_metric, names)
    for field in ("chance", "margins"):
        for key in getattr(cls, field, {}) or {}:
            if key not in names:
                raise _refused(cls, f"{field} names", key, names)
    release = getattr(getattr(cls, "data", None), "release", ())
    if not isinstance(release, tuple) or not all(isinstance(s, str) and re.fullmatch("[0-9a-f]{64}", s)
                                                 for s in release):
        raise TaskError(f"{where(cls)}: data.release is {release!r}, not a tuple of SHA-256 (64 lowercase hex digits, "
                        "one per file of the release its published rows were made on); fix the task's declarations "
                        "(or upgrade its package)")
    try:  # a task made with no option given; one that cannot be is refused when run, with the options given
        task = cls(TaskOptions(allow_download=False))
    except Exception:
        return cls
    try:
        refs = tuple(task.references())
    except Exception as exc:
        raise TaskError(f"{where(cls)}: its references() failed: {type(exc).__name__}: {exc}; fix the task "
                        "(or upgrade its package)") from None
    for ref in refs:
        if ref.metric not in names:
            raise _refused(cls, f"its published row {ref.label} is of metric", ref.metric, names)
    try:
        inputs = tuple(task.metric_inputs([]))
    except Exception:  # its inputs need samples: what it declares is seen when its metrics are computed
        return cls
    for inp in inputs:
        if inp.name not in names:
            raise _refused(cls, "metric_inputs() gives metric", inp.name, names)
        if inp.stat not in ROW_STATS:
            raise _refused(cls, f"metric_inputs() gives {inp.name!r} the stat", inp.stat, ROW_STATS,
                           "the statistics abricot-local computes (metrics.ROW_STATS)")
    return cls
