"""A finished run (runs.Run) as a notebook reads it: tidy DataFrames of its metrics, its items and its
published checks, and a compact table in Jupyter. pandas is imported here, when a table is asked for."""

from __future__ import annotations

import html as markup
import math

METRIC_COLUMNS = ("task", "metric", "value", "ci_low", "ci_high", "chance", "n")
SAMPLE_COLUMNS = ("task", "id", "source", "gold", "pred", "gold_label", "pred_label", "correct")
PUBLISHED_COLUMNS = ("reference", "source", "task", "metric", "protocol", "published", "value", "ci_low", "ci_high",
                     "difference", "verdict", "margin", "diff_ci90_low", "diff_ci90_high", "items_to_settle",
                     "inside", "reasons", "differences", "warnings")
# published()'s numeric columns, numeric whatever they hold: NaN (float64) or <NA> (pandas' nullable Int64, boolean)
PUBLISHED_TYPES = {**dict.fromkeys(("published", "value", "ci_low", "ci_high", "difference", "margin", "diff_ci90_low",
                                    "diff_ci90_high"), "float64"), "items_to_settle": "Int64", "inside": "boolean"}
# the samples line's fields a row shows already (or leaves out: the prompt and the token ids)
_SHOWN = {"id", "source", "gold", "pred", "gold_label", "pred_label", "logprobs", "context", "choices",
          "continuations", "continuation_tokens"}


def metrics(run):
    """One row per task and metric: task, metric, value, ci_low, ci_high, chance, n."""
    import pandas as pd

    rows = [(task, name, value, ci[0] if ci else None, ci[1] if ci else None, chance, n)
            for task, name, value, ci, chance, n in _metric_rows(run)]
    return pd.DataFrame(rows, columns=list(METRIC_COLUMNS))


def _metric_rows(run):
    """(task, metric, value, 95% CI or None, chance or None, n) of each recorded metric: the one reading of
    :func:`metrics` and :func:`html` (``n``: the items behind the metric, :func:`_counts`, else the task's)."""
    for task, entry in run.record.tasks.items():
        counts = _counts(run, task)
        for name, value, ci in entry.metric_items():
            yield task, name, value, ci, entry.chance.get(name), counts.get(name, entry.n)


def ci_words(value: float, ci: tuple[float, float] | None) -> str:
    """A metric's 95% CI as `run`'s summary says it: "[low, high]", "no interval" (a value recorded with [NaN, NaN]:
    metrics.interval_read), "" (none recorded)."""
    if not ci:
        return ""
    if not math.isnan(value) and math.isnan(ci[0]):
        return "no interval"
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


WITHHELD = "withheld (the run recorded no reason)"  # a metric's interval withheld with no warning on it


def no_interval_words(why: str) -> str:
    """A withheld interval (:func:`ci_words`' "no interval") and why, as the text report's notes and the figures say
    it (report/tables.py, report/plots.py)."""
    return f"no interval: {why or WITHHELD}"


def _counts(run, task: str) -> dict[str, int]:
    """The items behind each of ``task``'s metrics not over all of them (Task.metric_counts: a source's accuracy),
    from its samples; {} when its task or samples cannot be had (every metric then shows the task's n)."""
    from abricot_local.errors import AbricotError

    rt = run.task(task)
    try:
        return rt.instance().metric_counts(rt.samples) if rt is not None else {}
    except AbricotError:
        return {}


def samples(run, task: str | None = None):
    """One row per scored item (every task, or ``task``): task, id, source, gold, pred, their labels,
    correct, ``logprob_0`` .. ``logprob_{K-1}``, then the task's own fields."""
    import pandas as pd

    from abricot_local.errors import UsageError

    if task is not None and not isinstance(task, str):
        raise UsageError(f"samples(): task must be one task's name (text; None: every task), got {task!r} "
                         f"({type(task).__name__}); this run's tasks: {', '.join(run.tasks) or 'none'}")
    rows = []
    for name in run.tasks if task is None else (task,):
        for s in run.samples_of(name):
            row = {"task": name, "id": s.id, "source": s.source, "gold": s.gold, "pred": s.pred,
                   "gold_label": s.gold_label, "pred_label": s.pred_label, "correct": s.pred == s.gold}
            row.update({f"logprob_{k}": lp for k, lp in enumerate(s.logprobs)})
            row.update({k: v for k, v in s.line.items() if k not in _SHOWN})
            rows.append(row)
    k = max((len([c for c in r if c.startswith("logprob_")]) for r in rows), default=0)
    lps = [f"logprob_{i}" for i in range(k)]
    extra = list(dict.fromkeys(c for r in rows for c in r if c not in SAMPLE_COLUMNS and c not in lps))
    return pd.DataFrame(rows, columns=[*SAMPLE_COLUMNS, *lps, *extra])


# the columns published() adds where a --until-settled rule judged a row: the rule's (its line, its look of the looks
# planned, its interval of run - published at that look's level, its next look and the --max-items a grow takes it at),
# then the fixed-n verdict's and its figures (which do not account for the looks)
SETTLED_COLUMNS = ("sequential", "look", "looks", "level", "diff_ci_low", "diff_ci_high", "next_look", "max_items",
                   "fixed_n_verdict", "fixed_n_diff_ci90_low", "fixed_n_diff_ci90_high", "fixed_n_items_to_settle",
                   "fixed_n_reasons")
SETTLED_TYPES = {**dict.fromkeys(("level", "diff_ci_low", "diff_ci_high", "fixed_n_diff_ci90_low",
                                  "fixed_n_diff_ci90_high"), "float64"),
                 **dict.fromkeys(("look", "looks", "next_look", "max_items", "fixed_n_items_to_settle"), "Int64")}


def published(run):
    """The published checks the run recorded, with the reproduction verdict in words and ``warnings``, what the run
    recorded of each row's task that qualifies its verdict (settled.qualifying: `report`'s one rule); a row a
    --until-settled rule judged has every field the rule's (settled.SettledVerdict.fields): ``verdict`` its words,
    ``diff_ci90_*`` none, its interval at its look's level in ``diff_ci_low``/``diff_ci_high`` (``level``, ``look``
    of ``looks``), ``items_to_settle`` the --max-items of the grow its advice names (its next look, ``next_look``;
    or a bound near the estimate of the items that would settle it, far beyond that look: settled.Reach),
    ``reasons`` its line then that step, ``sequential`` its line; the fixed-n verdict over the same items (which does
    not account for the looks) and its figures in the ``fixed_n_*`` columns (:data:`SETTLED_COLUMNS`, there when a
    rule judged a row). The numeric columns are numeric whatever the rows hold (PUBLISHED_TYPES): float64 with NaN
    where a row has no value, ``items_to_settle`` pandas' nullable Int64 and ``inside`` its nullable boolean (<NA>:
    none)."""
    import pandas as pd

    from abricot_local.analysis.settled import qualifying, settled_verdict
    from abricot_local.analysis.reproduction import words
    from abricot_local.errors import render  # a rule's next bound (settled.grown_by) in Python's words

    checks = run.record.published.checks if run.record.published else ()
    rules = [settled_verdict(run.record, c) for c in checks]
    rows = []
    for c, rule in zip(checks, rules):
        f = rule.fields(c) if rule else {"ci90": c.ci90, "items_to_settle": c.items_to_settle, "reasons": c.reasons}
        ci90, lo_hi = f["ci90"] or (None, None), (rule.interval if rule else None) or (None, None)
        fixed = f.get("fixed_n", {})
        rows.append((c.reference, c.source, c.task, c.metric, c.protocol, c.published, c.value,
                     c.ci95[0] if c.ci95 else None, c.ci95[1] if c.ci95 else None, c.difference,
                     rule.words if rule else words(c), c.margin, *ci90, f["items_to_settle"], c.inside,
                     render("; ".join(f["reasons"])), "; ".join(c.differences),
                     "; ".join(qualifying(run.record, c)),
                     *((rule and rule.line, rule and rule.look.k, rule and rule.looks, rule and rule.level, *lo_hi,
                        rule and rule.next_look, rule and rule.max_items, rule and fixed["words"],
                        *(fixed.get("ci90") or (None, None)), fixed.get("items_to_settle"),
                        "; ".join(fixed.get("reasons", ())) if rule else None) if any(rules) else ())))
    frame = pd.DataFrame(rows, columns=[*PUBLISHED_COLUMNS, *(SETTLED_COLUMNS if any(rules) else ())])
    return frame.astype({**PUBLISHED_TYPES, **(SETTLED_TYPES if any(rules) else {})})


def html(run) -> str:
    """The run in Jupyter: model, backend, folder; each metric with its 95% CI, chance and n; the kernel path."""
    from abricot_local.record.kernel_path import describe

    head = (f"<p><b>{markup.escape(run.model_label)}</b> &middot; {markup.escape(run.backend)} &middot; "
            f"<code>{markup.escape(run.path)}</code></p>")
    cells = [f"<tr><td>{markup.escape(task)}</td><td>{markup.escape(name)}</td><td>{value:.4f}</td>"
             f"<td>{ci_words(value, ci)}</td><td>{'' if chance is None else f'{chance:.3f}'}</td><td>{n}</td></tr>"
             for task, name, value, ci, chance, n in _metric_rows(run)]
    table = ("<table><tr><th>task</th><th>metric</th><th>value</th><th>95% CI</th><th>chance</th><th>n</th>"
             f"</tr>{''.join(cells)}</table>")
    return head + table + f"<p><small>kernels: {markup.escape(describe(run.kernels))}</small></p>"
