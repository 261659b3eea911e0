"""A finished run as a notebook reads it: the typed record, tidy DataFrames of its metrics, its
items and its published checks, its kernel path, and a compact table in Jupyter."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from abricot_local.errors import ResultsError
from abricot_local.record import Record, entry_samples, read_run

METRIC_COLUMNS = ("task", "metric", "value", "ci_low", "ci_high", "chance", "n")
SAMPLE_COLUMNS = ("task", "id", "source", "gold", "pred", "gold_label", "pred_label", "correct")
# the samples line's fields a row shows already (or leaves out: the prompt and the token ids)
_SHOWN = {"id", "source", "gold", "pred", "gold_label", "pred_label", "logprobs", "context", "choices",
          "continuations", "continuation_tokens"}


@dataclass(frozen=True)
class Run:
    """One finished run folder (``results.json`` and its samples files), read through record/; or an
    lm-eval output folder (or its results file) read as a run (analysis/lm_eval_input.py)."""

    folder: Path
    record: Record = field(repr=False)
    own_samples: Mapping | None = field(default=None, repr=False, compare=False)  # an lm-eval output's, by task

    @classmethod
    def load(cls, folder: str | Path, data: tuple[tuple[str, str], ...] = ()) -> "Run":
        """``data``: an lm-eval output's tasks' data (``--data KEY=PATH`` pairs; default: where `run` finds it)."""
        from abricot_local.analysis import lm_eval_input

        if lm_eval_input.is_lm_eval_output(folder):
            got = lm_eval_input.read(folder, tuple(data))
            return cls(Path(folder), got.record, dict(got.samples))
        return cls(Path(folder), read_run(folder))

    @property
    def model(self) -> str:
        return self.record.model.alias or self.record.model.name or self.folder.name

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(self.record.tasks)

    @property
    def kernels(self):
        """The kernel path the numbers were computed on (record.Kernels; None: not recorded)."""
        from abricot_local.record.kernel_path import recorded

        return recorded(self.record.provenance)

    def metrics(self):
        """One row per task and metric: task, metric, value, ci_low, ci_high, chance, n."""
        import pandas as pd

        rows = []
        for task, entry in self.record.tasks.items():
            for name, value, ci in entry.metric_items():
                rows.append((task, name, value, ci[0] if ci else None, ci[1] if ci else None,
                             entry.chance.get(name), entry.n))
        return pd.DataFrame(rows, columns=list(METRIC_COLUMNS))

    def samples(self, task: str | None = None):
        """One row per scored item (every task, or ``task``): task, id, source, gold, pred, their
        labels, correct, ``logprob_0`` .. ``logprob_{K-1}`` (each choice's log-likelihood, in the
        task's choice order), then the task's own fields."""
        import pandas as pd

        names = self.tasks if task is None else (task,)
        rows = []
        for name in names:
            entry = self.record.tasks.get(name)
            if entry is None:
                raise ResultsError(f"{self.folder} has no task {name!r}; its tasks: {', '.join(self.tasks)}")
            read = self.own_samples[name] if self.own_samples is not None else entry_samples(self.folder, entry, name)
            for s in read:
                row = {"task": name, "id": s.id, "source": s.source, "gold": s.gold, "pred": s.pred,
                       "gold_label": s.gold_label, "pred_label": s.pred_label, "correct": s.pred == s.gold}
                row.update({f"logprob_{k}": lp for k, lp in enumerate(s.logprobs)})
                row.update({k: v for k, v in s.line.items() if k not in _SHOWN})
                rows.append(row)
        k = max((len([c for c in r if c.startswith("logprob_")]) for r in rows), default=0)
        lps = [f"logprob_{i}" for i in range(k)]
        extra = list(dict.fromkeys(c for r in rows for c in r if c not in SAMPLE_COLUMNS and c not in lps))
        return pd.DataFrame(rows, columns=[*SAMPLE_COLUMNS, *lps, *extra])

    def published(self):
        """The published rows the model's registry entry reproduces, against this run, as the run
        recorded them (analysis/baselines.py; no registry is read): the reproduction verdict (reproduced
        within the margin, differs by more, cannot tell yet, this task cannot settle it; not comparable),
        its margin, the 90% CI of run - published, the items that would settle it and the reasons."""
        import pandas as pd

        from abricot_local.analysis.reproduction import words

        cols = ["reference", "source", "task", "metric", "protocol", "published", "value", "ci_low", "ci_high",
                "difference", "verdict", "margin", "diff_ci90_low", "diff_ci90_high", "items_to_settle", "inside",
                "reasons", "differences"]
        checks = self.record.published.checks if self.record.published else ()
        rows = []
        for c in checks:
            rows.append((c.reference, c.source, c.task, c.metric, c.protocol, c.published, c.value,
                         c.ci95[0] if c.ci95 else None, c.ci95[1] if c.ci95 else None, c.difference, words(c),
                         c.margin, c.ci90[0] if c.ci90 else None, c.ci90[1] if c.ci90 else None, c.items_to_settle,
                         c.inside, "; ".join(c.reasons), "; ".join(c.differences)))
        return pd.DataFrame(rows, columns=cols)

    def to_lm_eval(self, folder: str | Path) -> Path:
        """lm-eval's results layout in ``folder`` (report/lm_eval_layout.py); the model's subfolder."""
        from abricot_local.report.lm_eval_layout import write

        if self.own_samples is not None:
            raise ResultsError(f"{self.folder} is an lm-eval output already; to_lm_eval writes runs of abricot-local")
        return write(self.folder, self.record, Path(folder))

    def __repr__(self) -> str:
        return f"Run({str(self.folder)!r}: {self.model}, {', '.join(self.tasks)})"

    def _repr_html_(self) -> str:
        from abricot_local.record.kernel_path import describe

        head = (f"<p><b>{html.escape(self.model)}</b> &middot; {html.escape(self.record.backend)} &middot; "
                f"<code>{html.escape(str(self.folder))}</code></p>")
        cells = []
        for task, entry in self.record.tasks.items():
            for name, value, ci in entry.metric_items():
                ci_text = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
                chance = entry.chance.get(name)
                cells.append(f"<tr><td>{html.escape(task)}</td><td>{html.escape(name)}</td><td>{value:.4f}</td>"
                             f"<td>{ci_text}</td><td>{'' if chance is None else f'{chance:.3f}'}</td>"
                             f"<td>{entry.n}</td></tr>")
        table = ("<table><tr><th>task</th><th>metric</th><th>value</th><th>95% CI</th><th>chance</th><th>n</th>"
                 f"</tr>{''.join(cells)}</table>")
        return head + table + f"<p><small>kernels: {html.escape(describe(self.kernels))}</small></p>"


def load_runs(folder: str | Path) -> list[Run]:
    """Every finished run in ``folder`` (searched recursively, as `report` does; lm-eval output folders
    too, their items matched with the data the runs beside them recorded); one that is not finished is
    named in a warning and left out."""
    import warnings

    from abricot_local.api.arguments import check_call

    check_call(load_runs, locals())

    from abricot_local.api.options import AbricotWarning
    from abricot_local.run.states import find_runs

    states = find_runs((str(folder),))
    if not states:
        raise ResultsError(f"{folder} holds no results.json and no run folder below it")
    for s in states:
        if not s.complete:
            warnings.warn(f"skipped {s.path} ({s.describe()})", AbricotWarning, stacklevel=2)
    from abricot_local.analysis.lm_eval_input import is_lm_eval_output, recorded_data

    done = [s.path for s in states if s.complete]
    runs = {p: Run.load(p) for p in done if not is_lm_eval_output(p)}
    data = recorded_data([r.record for r in runs.values()]) if len(runs) < len(done) else ()
    return [runs[p] if p in runs else Run.load(p, data) for p in done]  # lm-eval outputs: the runs' data
