"""The quant ladder (analysis/ladder.py) as rows: a table for the text report, records for JSON
and the HTML page. Pure."""

from __future__ import annotations

from dataclasses import asdict
from typing import Sequence

import pandas as pd

from abricot_local.analysis import stats
from abricot_local.analysis.equivalence import UNDEFINED, UNSETTLED, words
from abricot_local.analysis.ladder import Rung

TITLE = ("Quant ladder: each quant against the highest-precision one of its model (the task's primary metric, its "
         "margin; 90% CI of quant - reference for the task's own items, exact when every item is compared; label KL: "
         "KL(reference || quant) of the answer labels; KLD: over the whole vocabulary at every token of the task text, "
         "`abricot-local kld`)")
COLUMNS = ("model", "task", "quant", "run", "n", "verdict", "difference [90% CI]", "same prediction",
           "label KL", "KLD mean [95% CI]", "KLD p99", "same top", "answers changed", "size MB", "items/s")


def _num(v, digits: int = 3) -> str:
    return "" if v is None else "nan" if v != v else f"{v:.{digits}f}"


def verdict_text(r: Rung) -> str:
    """The verdict in a cell: ``equivalent within 0.02``, ``better by more than 0.02``, ``cannot tell yet (~900
    items)``, ``equivalent within 0.02, exact`` (every item of the task compared), ``identical; ...`` (every log-prob
    bit-identical), ``reference``."""
    if r.is_reference:
        return "reference"
    e = r.verdict
    if e is None:
        return "no common item"
    same = "identical; " if e.identical else ""
    if e.kind == UNSETTLED:
        return same + ("cannot tell yet (on the margin)" if e.items >= stats.MAX_ITEMS else
                       f"cannot tell yet (~{e.items:,} items)")
    if e.kind == UNDEFINED:
        return same + "cannot tell"
    return same + words(e.kind, e.margin) + (", exact" if e.exact else "")


def difference_text(e) -> str:
    """The difference and its 90% CI (the task's own value); every item compared: the difference, exact."""
    if e is None:
        return ""
    if e.exact:
        return f"{e.diff:+.3f} (exact)"
    if any(v != v for v in e.ci90):
        return f"{e.diff:+.3f} (no interval)"
    return f"{e.diff:+.3f} [{e.ci90[0]:+.3f}, {e.ci90[1]:+.3f}]"


def frame(rungs: Sequence[Rung]) -> pd.DataFrame:
    rows = []
    for r in rungs:
        e, k = r.verdict, r.kld
        rows.append({
            "model": r.base, "task": r.task, "quant": r.quant, "run": r.run, "n": str(r.n or ""),
            "verdict": f"{verdict_text(r)}{'' if e is None else ' (' + e.metric + ')'}",
            "difference [90% CI]": difference_text(e),
            "same prediction": _num(r.same_pred), "label KL": _num(r.kl_mean, 4),
            "KLD mean [95% CI]": "" if k is None else f"{k.mean:.4f} [{k.ci95[0]:.4f}, {k.ci95[1]:.4f}]",
            "KLD p99": "" if k is None else _num(k.p99, 4), "same top": "" if k is None else _num(k.same_top),
            "answers changed": "" if r.changes is None else r.changes.summary,
            "size MB": "" if r.size is None else f"{r.size / 1e6:.0f}", "items/s": _num(r.items_per_s, 2)})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def records(rungs: Sequence[Rung]) -> list[dict]:
    """Plain data: every field, the verdict's line and the changes' counts and decisive ids."""
    out = []
    for r in rungs:
        ch = r.changes
        out.append({"base": r.base, "task": r.task, "run": r.run, "quant": r.quant, "reference": r.reference or None,
                    "size_bytes": r.size, "items_per_s": r.items_per_s, "n": r.n, "same_pred": r.same_pred,
                    "kl_mean": r.kl_mean, "kld": None if r.kld is None else {
                        key: v for key, v in r.kld.to_dict().items()
                        if key in ("mean", "median", "p99", "p99_9", "max", "same_top", "ci95", "n_tokens")},
                    "verdict": None if r.verdict is None else
                    {**asdict(r.verdict), "exact": r.verdict.exact, "line": r.verdict.line,
                     "like_line": r.verdict.like_line or None},
                    "verdict_text": verdict_text(r), "difference_text": difference_text(r.verdict),
                    "changed": None if ch is None else {
                        "n": len(ch.changed), "near_ties": len(ch.near_ties), "decisive": [d.id for d in ch.decisive],
                        "threshold_nats": ch.threshold, "line": ch.summary}})
    return out
