"""The quant ladder (analysis/ladder.py) as rows: a table for the text report, records for JSON
and the HTML page. A rung a ``run --quants --until-settled`` rule judged: its verdict the rule's, in the run's own
line (the look it stopped at, its interval, its guarantee), compare's fixed-n one beside it, at the rule's margin
(settled.FIXED_N: it does not account for the looks); a ladder with no such rung, as before. The answers changed
say how many of the reference's near ties and decisive answers the rung flipped (:func:`changes_text`). Pure."""

from __future__ import annotations

from dataclasses import asdict
from typing import Sequence

import pandas as pd

from abricot_local.analysis import stats
from abricot_local.analysis.changes import BROKEN, FIXED, NEAR_TIE, NEAR_TIE_MEANS, QUANTS, STILL_WRONG
from abricot_local.analysis.equivalence import UNDEFINED, UNSETTLED, words
from abricot_local.analysis.ladder import Rung
from abricot_local.analysis.settled import FIXED_N

TITLE = ("Quant ladder: each quant against the highest-precision one of its model on the task (the task's primary "
         "metric at the task's margin, a rung a sweep's until-settled rule judged at the rule's margin; 90% CI of "
         "quant - reference for the task's own items, exact when every item is compared; answers changed: how many "
         f"of the reference's near ties (its top two choices closer than {NEAR_TIE:g} nats: {NEAR_TIE_MEANS[QUANTS]}) "
         "and of its decisive answers flipped; label KL: KL(reference || quant) of the answer labels; KLD: over the "
         "whole vocabulary at every token of the items `abricot-local kld` measured, its 95% CI over those items)")
COLUMNS = ("model", "task", "quant", "run", "n", "verdict", "difference [90% CI]", "same prediction",
           "label KL", "KLD mean [95% CI]", "KLD p99", "same top", "answers changed", "size MB", "items/s")
# beside a rule's verdict, only with one
FIXED_N_COLUMN = "fixed-n verdict at the rule's margin (does not account for the looks)"


def _num(v, digits: int = 3) -> str:
    return "" if v is None else "nan" if v != v else f"{v:.{digits}f}"


def verdict_text(r: Rung) -> str:
    """The rung's verdict in a cell: a rule's (``run --quants --until-settled``) in the run's own line, ``equivalent
    within 0.2 (reached sequentially at look 1 of 4: ...)``; else compare's (:func:`fixed_n_text`, ``identical``
    said there)."""
    if r.settled is not None and not r.is_reference:
        return r.settled.line
    return fixed_n_text(r)


def fixed_n_text(r: Rung) -> str:
    """Compare's fixed-n verdict in a cell: ``equivalent within 0.02``, ``better by more than 0.02``, ``cannot tell
    yet (~900 items)``, ``equivalent within 0.02, exact`` (every item of the task compared), ``identical; ...``
    (every log-prob bit-identical), ``reference``. Beside a rule's verdict (at the rule's margin) a verdict not
    settled names its margin too: ``cannot tell yet within 0.2 (~40 items)``."""
    if r.is_reference:
        return "reference"
    e = r.verdict
    if e is None:
        return "no common item"
    same = "identical; " if e.identical else ""
    within = f" within {e.margin:g}" if r.settled is not None else ""
    if e.kind == UNSETTLED:
        return same + (f"cannot tell yet{within} (on the margin)" if e.items >= stats.MAX_ITEMS else
                       f"cannot tell yet{within} (~{e.items:,} items)")
    if e.kind == UNDEFINED:
        return same + "cannot tell" + within
    return same + words(e.kind, e.margin) + (", exact" if e.exact else "")


def difference_text(e) -> str:
    """The difference quant - reference and its 90% CI (the task's own value); every item compared: the difference,
    exact; an undefined difference or interval: why (the verdict's note), never ``nan``."""
    if e is None:
        return ""
    why = e.note or "a constant vector or too few items"
    if e.diff != e.diff:
        return why if why.startswith("undefined") else f"undefined ({why})"
    if e.exact:
        return f"{e.diff:+.3f} (exact)"
    if any(v != v for v in e.ci90):
        return f"{e.diff:+.3f} (no interval: {why})"
    return f"{e.diff:+.3f} [{e.ci90[0]:+.3f}, {e.ci90[1]:+.3f}]"


def changes_text(r: Rung) -> str:
    """The answers that changed, of how many the reference had of each kind: ``20 answers changed: 3 fixed, 5 broken,
    12 still wrong; 16 of 23 near ties flipped, 4 of 7 decisive``, ``no answer changed (of 30: 23 near ties, 7
    decisive)``; a rung whose reference's counts are not known, changes.py's summary; "" with no changes."""
    ch = r.changes
    if ch is None:
        return ""
    if r.ref_near_ties is None or r.ref_decisive is None:
        return ch.summary
    ties, dec = r.ref_near_ties, r.ref_decisive
    plural = "" if ties == 1 else "s"
    if not ch.changed:
        return f"no answer changed (of {ch.n}: {ties} near tie{plural}, {dec} decisive)"
    k = len(ch.changed)
    fixed, broken, wrong = (len(ch.with_outcome(x)) for x in (FIXED, BROKEN, STILL_WRONG))
    return (f"{k} answer{'s' if k != 1 else ''} changed: {fixed} fixed, {broken} broken, {wrong} still wrong; "
            f"{len(ch.near_ties)} of {ties} near tie{plural} flipped, {len(ch.decisive)} of {dec} decisive")


def model_text(r: Rung) -> str:
    """The rung's model: its base, and the folder of its ladder's runs where the base has several ladders on the
    task (analysis.ladder.plan)."""
    return f"{r.base} ({r.ladder})" if r.ladder else r.base


def marked(df: pd.DataFrame, rungs: Sequence[Rung]) -> pd.DataFrame:
    """:func:`frame`'s table with the reference rows' empty cells as ``-``: every row shows in every block of a table
    split to fit (texttable.fit)."""
    out = df.copy()
    for k, r in enumerate(rungs):
        if r.is_reference:
            out.iloc[k] = [("-" if v == "" else v) for v in out.iloc[k]]
    return out


def frame(rungs: Sequence[Rung]) -> pd.DataFrame:
    """A row per rung; with a rung a rule judged, the fixed-n verdict beside the rule's (:data:`FIXED_N_COLUMN`)."""
    rows = []
    judged = any(r.settled is not None for r in rungs)
    for r in rungs:
        e, k = r.verdict, r.kld
        metric = '' if e is None else ' (' + e.metric + ')'
        rows.append({
            "model": model_text(r), "task": r.task, "quant": r.quant, "run": r.run, "n": str(r.n or ""),
            "verdict": f"{verdict_text(r)}{metric}",
            **({FIXED_N_COLUMN: f"{fixed_n_text(r)}{metric}" if r.settled is not None else ""} if judged else {}),
            "difference [90% CI]": difference_text(e),
            "same prediction": _num(r.same_pred), "label KL": _num(r.kl_mean, 4),
            "KLD mean [95% CI]": "" if k is None else f"{k.interval()} {k.covers(r.n)}",
            "KLD p99": "" if k is None else _num(k.p99, 4), "same top": "" if k is None else _num(k.same_top),
            "answers changed": changes_text(r),
            "size MB": "" if r.size is None else f"{r.size / 1e6:.0f}", "items/s": _num(r.items_per_s, 2)})
    cols = list(COLUMNS)
    if judged:
        cols.insert(cols.index("verdict") + 1, FIXED_N_COLUMN)
    return pd.DataFrame(rows, columns=cols)


def _verdict(r: Rung) -> dict | None:
    """Compare's verdict as plain data (its line, like_line, exact)."""
    e = r.verdict
    return None if e is None else {**asdict(e), "exact": e.exact, "line": e.line, "like_line": e.like_line or None}


def _judged(r: Rung) -> dict:
    """A rung a rule judged: ``verdict`` the rule's (kind, words, the run's line), ``sequential`` its look
    (settled.SettledVerdict.to_json), ``fixed_n`` compare's verdict beside it (:data:`FIXED_N`); else nothing."""
    s = r.settled
    if s is None or r.is_reference:
        return {}
    return {"verdict": {"kind": s.verdict, "metric": None if r.verdict is None else r.verdict.metric,
                        "margin": s.look.margin, "words": s.words, "line": s.line, "like_line": None},
            "sequential": s.to_json(), "fixed_n": {**(_verdict(r) or {}), "words": fixed_n_text(r), "about": FIXED_N}}


def records(rungs: Sequence[Rung]) -> list[dict]:
    """Plain data: every field, the verdict's line and the changes' counts and decisive ids, beside the reference's
    near ties and decisive answers on the items compared (``reference_near_ties``, ``reference_decisive``: null where
    not known; ``line``: :func:`changes_text`); a rung a rule judged, the rule's verdict (``verdict``, ``sequential``)
    and compare's beside it, at the rule's margin (``fixed_n``)."""
    out = []
    for r in rungs:
        ch = r.changes
        out.append({"base": r.base, "ladder": r.ladder or None, "task": r.task, "run": r.run, "quant": r.quant, "reference": r.reference or None,
                    "bits_per_weight": r.bits, "size_bytes": r.size, "items_per_s": r.items_per_s, "n": r.n,
                    "same_pred": r.same_pred,
                    "kl_mean": r.kl_mean, "kld": None if r.kld is None else {
                        key: v for key, v in r.kld.record(r.n).items()
                        if key in ("mean", "median", "p99", "p99_9", "max", "same_top", "ci95", "n_tokens", "n_items",
                                   "n_units", "se_token", "ci_method", "covers", "text")},
                    "verdict": _verdict(r),
                    "verdict_text": verdict_text(r), "difference_text": difference_text(r.verdict),
                    "changed": None if ch is None else {
                        "n": len(ch.changed), "near_ties": len(ch.near_ties), "decisive": [d.id for d in ch.decisive],
                        "reference_near_ties": r.ref_near_ties, "reference_decisive": r.ref_decisive,
                        "threshold_nats": ch.threshold, "line": changes_text(r)}, **_judged(r)})
    return out


def page_records(rungs: Sequence[Rung]) -> list[dict]:
    """:func:`records` for the HTML page: a rung a rule judged shows compare's verdict beside the rule's in its
    verdict cell (``verdict_text``), said not to account for the looks."""
    page = [{**d, "base": model_text(r)} for d, r in zip(records(rungs), rungs)]
    return [{**d, "verdict_text": f"{d['verdict_text']}; {FIXED_N}: {d['fixed_n']['words']}"} if "fixed_n" in d else d
            for d in page]
