"""One tidy table of every scored item over runs and tasks (``report --table samples``).

A row per (run, task, item): ``model``, ``quant``, ``run`` (the run folder), ``label`` (the run's
label, unique among the runs shown, as the runs table and compare name it), ``task``,
``id``, ``source``, ``gold`` and ``pred`` (choice indices), ``gold_label`` and
``pred_label`` (the answers as a reader knows them), ``correct`` (pred == gold), then
``p_0`` .. ``p_{K-1}``: the probability of each choice, in the task's choice order,
normalised over the choices (the softmax of the recorded log-probabilities); K is the
largest number of choices among the tasks shown, and a task with fewer leaves the rest
empty. Read from the samples files as recorded; names no task.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from abricot_local.core import log_softmax
from abricot_local.errors import UsageError, opt
from abricot_local.report.safe import csv_text
from abricot_local.report.tables import Report

COLUMNS = ("model", "quant", "run", "label", "task", "id", "source", "gold", "pred", "gold_label", "pred_label",
           "correct")
FORMATS = ("csv", "json")


def choice_probabilities(logprobs) -> list[float]:
    """The choices' probabilities normalised over the choices (NaN where a log-prob is not finite)."""
    lp = np.asarray(logprobs, dtype=np.float64)
    if not lp.size or not np.all(np.isfinite(lp)):
        return [float("nan")] * lp.size
    return [float(p) for p in np.exp(log_softmax(lp))]


def _or_empty(value):
    return "" if value is None else value


def samples_frame(report: Report) -> pd.DataFrame:
    rows = []
    for run in report.runs:
        for task in run.tasks:
            for s in run.samples_of(task):
                row = {"model": run.model_label, "quant": run.quant, "run": str(run.path), "label": run.label,
                       "task": task, "id": s.id, "source": _or_empty(s.source), "gold": s.gold, "pred": s.pred,
                       "gold_label": _or_empty(s.gold_label), "pred_label": _or_empty(s.pred_label),
                       "correct": s.pred == s.gold}
                row.update({f"p_{k}": p for k, p in enumerate(choice_probabilities(s.logprobs))})
                rows.append(row)
    k = max((sum(c.startswith("p_") for c in r) for r in rows), default=0)
    return pd.DataFrame(rows, columns=[*COLUMNS, *(f"p_{i}" for i in range(k))])


def render(report: Report, fmt: str) -> str:
    """The table as CSV (one table, a header line, nothing else) or JSON records."""
    if fmt not in FORMATS:
        raise UsageError(f"the samples table is written as {' or '.join(FORMATS)} (add {opt('fmt', 'csv')}); "
                         f"got {opt('fmt', fmt)}")
    frame = samples_frame(report)
    if fmt == "csv":
        return csv_text(frame)
    records = json.loads(frame.to_json(orient="records"))
    return json.dumps(records, indent=1, ensure_ascii=False)
