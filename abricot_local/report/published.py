"""The reproduction table (`report --table published`): did each run reproduce the published rows its registry entry
reproduces? A record per check for the JSON and the CSV (:func:`records`, :func:`published_frame`), a row per run and
reference for the text and markdown tables (:func:`text_section`), each verdict with what qualifies it that it does
not say itself: what its run recorded of its task (``warnings``: analysis.settled.qualifying, the one rule, the API's
``Run.published()``'s too), under the text and markdown tables and in each record.

Pure: reads a report (analysis.overview.Report), returns data; report/tables.py renders it.
"""

from __future__ import annotations

import pandas as pd

from abricot_local.analysis.overview import Report
from abricot_local.analysis.reproduction import said, words
from abricot_local.analysis.settled import SettledVerdict
from abricot_local.report.texttable import shown

SETTLED = ("look", "looks", "level", "diff_ci_lo", "diff_ci_hi", "next_look", "max_items", "fixed_n_diff_ci90_lo",
           "fixed_n_diff_ci90_hi", "fixed_n_items_to_settle", "fixed_n_reasons")  # a rule's row's, at the end


def records(report: Report) -> list[dict]:
    """A record per published check; a row a --until-settled rule judged has every field the rule's (``verdict``,
    ``ci90`` null, ``items_to_settle``, ``reasons``, ``sequential``: settled.SettledVerdict.fields), the fixed-n
    verdict and its figures in ``fixed_n``; ``warnings``: what qualifies its verdict (settled.qualifying)."""
    return [{"model": rc.run.label, "quant": rc.run.quant, "folder": str(rc.run.path), "reference": c.reference,
             "source": c.source, "task": c.task, "metric": c.metric, "published": c.published, "value": c.value,
             "ci95": list(c.ci95) if c.ci95 else None, "inside": c.inside, "verdict": c.verdict, "margin": c.margin,
             "ci90": list(c.ci90) if c.ci90 else None, "items_to_settle": c.items_to_settle, "reasons": list(c.reasons),
             "comparable": c.comparable, "differences": list(c.differences), "notes": list(c.notes),
             "warnings": list(rc.warnings), **(rc.settled.fields(c) if rc.settled else {})}
            for rc in report.checks for c in (rc.check,)]


def published_frame(report: Report) -> pd.DataFrame:
    """A row per published check; with a row a --until-settled rule judged, its ``sequential`` line, the rule's figures
    (:data:`SETTLED`), ``fixed_n_verdict`` (:data:`FIXED_N`) and the fixed-n figures (``fixed_n_*``) too."""
    rows = []
    for r in records(report):
        s, f = r.get("sequential", {}), r.get("fixed_n", {})
        (lo, hi), (d_lo, d_hi), (s_lo, s_hi), (f_lo, f_hi) = (x or (None, None) for x in (
            r["ci95"], r["ci90"], s.get("interval"), f.get("ci90")))
        rows.append({**r, "ci_lo": lo, "ci_hi": hi, "diff_ci90_lo": d_lo, "diff_ci90_hi": d_hi, "diff_ci_lo": s_lo,
                     "diff_ci_hi": s_hi, "fixed_n_diff_ci90_lo": f_lo, "fixed_n_diff_ci90_hi": f_hi,
                     **{k: "; ".join(r[k]) for k in ("reasons", "notes", "differences", "warnings")},
                     "sequential": s.get("line"), **{k: s.get(k) for k in (*SETTLED[:3], *SETTLED[5:7])},
                     "fixed_n_verdict": f.get("verdict"), "fixed_n_items_to_settle": f.get("items_to_settle"),
                     "fixed_n_reasons": "; ".join(f["reasons"]) if f else None})
    settled = any(rc.settled for rc in report.checks)
    return pd.DataFrame(rows, columns=["model", "quant", "folder", "reference", "source", "task", "metric", "published",
                                       "value", "ci_lo", "ci_hi", "verdict", *(("sequential", "fixed_n_verdict") if
                                       settled else ()), "margin", "diff_ci90_lo", "diff_ci90_hi", "items_to_settle",
                                       "reasons", "inside", "comparable", "differences", "notes", "warnings",
                                       *(SETTLED if settled else ())]).astype(
        {k: "Int64" for k in (*SETTLED[:2], *SETTLED[5:7], SETTLED[9]) if settled})


def verdict_cell(check, settled: SettledVerdict | None = None) -> str:
    """A published check as the text and markdown tables show it: the run's value, the published one, the
    verdict (``run -0.460 vs published 0.30: differs by more than 0.05``): neither number read for the other. A row
    a --until-settled rule judged (``settled``): the rule's verdict, in the run's own line (its look, its interval,
    its guarantee)."""
    run = "" if check.value is None else f"run {check.value:.3f} vs "
    return f"{run}published {check.published:.2f}: {settled.line if settled else words(check)}"


def text_section(report: Report) -> tuple[pd.DataFrame, list[str], tuple[str, ...]]:
    """The text and markdown reproduction table (report/tables.py titles it): its rows (a row per run and reference,
    a column per task and metric checked, then the notes each verdict rests on, each naming its cells), the cells a
    --until-settled rule judged in some row, and the lines under it: each warning that qualifies verdicts
    (``warnings``), once per run, naming its cells (never cut, as a cell past texttable.CELL_MAX is)."""
    wide: dict[tuple, dict] = {}
    qualified: dict[tuple[str, str], list[str]] = {}  # (run, warning) -> the cells whose verdicts it qualifies
    for rc in report.checks:
        c = rc.check
        key = (rc.run.label, rc.run.quant, f"{c.reference} ({c.source})", str(rc.run.path))
        row = wide.setdefault(key, {"model": key[0], "quant": key[1], "reference": key[2], "notes": {}})
        cell = f"{c.task}.{c.metric}"
        row[cell] = verdict_cell(c, rc.settled)
        rests = rc.settled.notes(c) if rc.settled else said(c)  # the run's verdict block's (a rule's: fixed-n)
        for n in (*(f"not comparable: {d}" for d in c.differences), *rests, *c.notes):
            on = row["notes"].setdefault(n, [])  # each note names its tasks (one shared by them: once)
            on += [cell] if cell not in on else []
        for w in rc.warnings:
            on = qualified.setdefault((rc.run.label, w), [])
            on += [cell] if cell not in on else []
    rows = [{**r, "notes": "; ".join(f"{', '.join(on)}: {n}" for n, on in r["notes"].items())} for r in wide.values()]
    checked = dict.fromkeys(f"{rc.check.task}.{rc.check.metric}" for rc in report.checks)
    settled = [c for c in checked if any(rc.settled and f"{rc.check.task}.{rc.check.metric}" == c
                                         for rc in report.checks)]
    lines = tuple(f"{shown(label)} {', '.join(on)}: {w}" for (label, w), on in qualified.items())
    return pd.DataFrame(rows, columns=["model", "quant", "reference", *checked, "notes"]).fillna(""), settled, lines
