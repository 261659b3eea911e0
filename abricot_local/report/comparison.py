"""A :class:`compare.Comparison` as text: an aligned table, markdown, CSV or JSON (pure
functions returning strings; nothing is printed)."""

from __future__ import annotations

import json
import math
import os
import re
import textwrap
from dataclasses import asdict

import pandas as pd

from abricot_local.analysis.changes import BROKEN, FIXED, STILL_WRONG, near_tie_note
from abricot_local.analysis.compare import CANNOT_TELL, CLOSE, DIFFERENT, Comparison
from abricot_local.analysis.differing import one_side_settings
from abricot_local.analysis.matching import ID
from abricot_local.analysis.kld import of_views
from abricot_local.errors import Namer, UsageError, opt, render as in_words
from abricot_local.report.texttable import GAP, fit, grid, wrap
from abricot_local.report.texttable import WIDTH as TEXT_WIDTH

FORMATS = ("table", "markdown", "csv", "json")
WIDTH = 72  # a long setting (system_info) is cut in the text tables (a SHA-256 is whole); JSON keeps it whole


def worded(obj, namer: Namer | None):
    """``obj`` (a report's or a comparison's plain data: a text, a list or tuple, a dict's values, a frame's text
    cells) with the options its texts name (errors.opt) written by ``namer``, the door's, as the document is built:
    its serialised text is never rendered (a value read back out of JSON or HTML escapes); None: ``obj`` as it is."""
    if namer is None or not isinstance(obj, (str, dict, list, tuple, pd.DataFrame)):
        return obj
    if isinstance(obj, str):
        return in_words(obj, namer)
    if isinstance(obj, dict):
        return {k: worded(v, namer) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(worded(v, namer) for v in obj) if type(obj) in (list, tuple) else obj
    out = obj.copy()
    for k in range(out.shape[1]):
        if any(isinstance(v, str) for v in out.iloc[:, k]):  # object or string dtype
            out.isetitem(k, out.iloc[:, k].map(lambda v: worded(v, namer)))
    return out


def _num(v, digits: int = 4) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return f"{v:.{digits}f}" if abs(v) >= 10 ** -digits or v == 0 else f"{v:.2e}"


def _signed(v) -> str:
    return _num(v) if v != v else ("+" if v > 0 else "") + _num(v)


def _difference(m) -> str:
    """A row's a - b and its 95% CI; with none, "no interval" (its note says why, once), "undefined" for no
    difference (ladder.py's words): never ``nan``."""
    if m.diff != m.diff:
        return "undefined"
    if any(v != v for v in m.ci):
        return f"{_signed(m.diff)} no interval"
    return f"{_signed(m.diff)} [{_signed(m.ci[0])}, {_signed(m.ci[1])}]"


def _value(v, other=None) -> str:
    """A recorded setting as text; one longer than :data:`WIDTH` keeps the part where it differs
    from ``other`` (the other run's value), its common start elided."""
    if v is None:
        return "(not recorded)"
    text, that = (" ".join((x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)).split())
                  for x in (v, "" if other is None else other))
    if len(text) <= WIDTH:
        return text
    start = len(os.path.commonprefix([text, that]))
    start = max(0, start - 20) if start > 40 else 0
    text = ("..." if start else "") + text[start:]
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


def _pair(a: str, b: str) -> str:
    return f"{a} vs {b}"


ONE_SIDE = ("Recorded by one side only (what only an lm-eval output records: how lm-eval called the model, not a "
            "difference in how the numbers were made)")


def _one_side(c: Comparison) -> list:
    """Each compared pair's settings only one side's door can record (differing.one_side_settings)."""
    runs = {r.label: r for r in c.runs}
    return [d for v in c.verdicts for d in one_side_settings(runs[v.a], runs[v.b])]


def _kld(c: Comparison) -> list[tuple]:
    """Each KLD `kld` kept for the compared runs (analysis.kld.PairKld) and the items compare paired for its pair
    and task (0: none), which it may cover only some of (`kld --limit`)."""
    n = {(frozenset((g.a, g.b)), g.task): g.n for g in c.agreements}
    return [(k, n.get((frozenset((k.reference, k.run)), k.task), 0)) for k in of_views(c.runs)]


def frames(c: Comparison) -> list[tuple[str, pd.DataFrame]]:
    """The sections of the text report: (title, table)."""
    many = len(c.runs) > 2
    out = [("Runs", pd.DataFrame([{"run": r.label, "folder": r.path} for r in c.runs]))]
    out.append(("Items paired on id alone (the scored context may differ)" if c.paired_on == ID else
                "Items matched on id and scored context (SHA-256)", pd.DataFrame([{
        "task": m.task, "items per run": " / ".join("-" if n is None else str(n) for n in m.n),
        "common": m.n_common,
        "same id, other context": m.n_context_differs} for m in c.matches])))
    diffs = []
    for v in c.verdicts:
        mine = [d for d in c.differs if (d.a, d.b) == (v.a, v.b)]
        diffs += [{"pair": _pair(d.a, d.b), "setting": d.key, "a": _value(d.value_a, d.value_b),
                   "b": _value(d.value_b, d.value_a)}
                  for d in mine] or [{"pair": _pair(v.a, v.b), "setting": "(none)", "a": "", "b": ""}]
    out.append(("Recorded settings that differ", pd.DataFrame(diffs, columns=["pair", "setting", "a", "b"])))
    ones = [{"pair": _pair(d.a, d.b), "setting": d.key, "a": _value(d.value_a), "b": _value(d.value_b)}
            for d in _one_side(c)]
    if ones:  # an lm-eval output beside a run: said, not as a difference
        out.append((ONE_SIDE, pd.DataFrame(ones, columns=["pair", "setting", "a", "b"])))
    rows = []
    for m in c.metrics:
        row = {"pair": _pair(m.a, m.b), "task": m.task, "metric": m.metric, "n": m.n, "a": _num(m.value_a),
               "b": _num(m.value_b), "a - b [95% CI]": _difference(m),
               "test": m.test, "p": _num(m.p, 3)}
        if many:
            row["p (Holm)"] = _num(m.p_holm, 3)
        row["detectable"] = _num(m.mdd, 3) if m.mdd is not None else ""
        row["note"] = m.note
        rows.append(row)
    out.append(("Paired differences over the common items (95% CI: Tango's score interval for an accuracy, the paired "
                "bootstrap for a correlation; detectable: the smallest accuracy difference these items detect, 80% "
                "power, 5% two-sided)", pd.DataFrame(rows)))
    agree = [{"pair": _pair(g.a, g.b), "task": g.task, "n": g.n, "same prediction": _num(g.same_pred, 3),
              "max |delta log-prob|": _num(g.max_abs_delta), "mean |delta log-prob|": _num(g.mean_abs_delta),
              "mean KL": _num(g.mean_kl), "bit-identical": "yes" if g.identical else "no"} for g in c.agreements]
    out.append(("Predictions and log-probs over the common items (KL(a || b) between the choice distributions)",
                pd.DataFrame(agree)))
    kld = _kld(c)
    if kld:
        out.append(("Full-vocabulary KL(reference || run) at every token of the items abricot-local kld measured (quants "
                    "of one model; 95% CI over those items)",
                    pd.DataFrame([{"reference": k.reference, "run": k.run, "task": k.task,
                                   "KLD mean [95% CI]": k.stats.interval(), "over": k.stats.extent(n),
                                   "median": _num(k.stats.median), "p99": _num(k.stats.p99),
                                   "p99.9": _num(k.stats.p99_9), "max": _num(k.stats.max),
                                   "same top": _num(k.stats.same_top, 3)} for k, n in kld])))
    if c.groups:
        out.append((f"Runs not distinguishable from the best (Holm-adjusted p >= {c.alpha:g})", pd.DataFrame([
            {"task": g.task, "metric": g.metric, "best": g.best, "group": ", ".join(g.members)} for g in c.groups])))
    out.append(("Power: the smallest accuracy difference these items can detect (80% power, 5% two-sided): the "
                "detectable of the paired differences", pd.DataFrame([
                    {"pair": _pair(p.a, p.b), "task": p.task, "metric": p.metric, "n": p.n,
                     "detectable": _num(p.detectable, 3)} for p in c.power])))
    return out


def _footer(c: Comparison) -> list[str]:
    lines = [f"note: {n}" for n in c.notes]
    close = any(v.kind == CLOSE for v in c.verdicts)  # the term defined only where a verdict uses it
    lines.append(f"bootstrap (correlations): {c.n_boot} resamples of the common items, seed {c.seed}" +
                 (f"; \"numerically close\" (a verdict below) means the same prediction on every common item and "
                  f"every |delta log-prob| <= {c.tolerance:g} nats" if close else ""))
    if _figures(c):  # a verdict below gives a difference: which way, at which level
        lines.append(f"verdicts: {VERDICT_FIGURES} (the paired differences' a - b; \"Is it as good?\" reads run - "
                     "reference at 90%)")
    return lines


def power_lines(c: Comparison) -> list[str]:
    """Per pair and task, in words, the detectable difference of the paired differences table:
    the same number, in the same unit (a difference of accuracy, 0 to 1)."""
    many = len(c.runs) > 2
    return [f"{p.task} {p.metric}{' (' + _pair(p.a, p.b) + ')' if many else ''}: {p.n} common items detect only "
            f"differences of {_num(p.detectable, 3)} or more" if p.detectable < 1 else
            f"{p.task} {p.metric}{' (' + _pair(p.a, p.b) + ')' if many else ''}: {p.n} common items are too few to "
            "detect any difference" for p in c.power]


SHOWN_DECISIVE = 20  # changed answers listed by id per pair, task and kind in the text forms (JSON: all)


def equivalence_lines(c: Comparison) -> list[str]:
    """One line per run, its reference and metric: equivalent within M, better, not worse, worse, cannot tell yet;
    under it (indented) the same for items like these, when the first is for the task's own value."""
    return [line if k == 0 else "  " + line for e in c.equivalence for k, line in enumerate(e.lines)]


def _listed(kind: str, changed) -> list[str]:
    if not changed:
        return []
    shown = ", ".join(d.text for d in changed[:SHOWN_DECISIVE])
    left = len(changed) - SHOWN_DECISIVE
    more = f" and {left} more ({opt('fmt', 'json')} lists them)" if left > 0 else ""
    return [f"  {kind}: {shown}{more}"]


def change_lines(c: Comparison) -> list[str]:
    """Per pair and task, the answers that changed (near ties, decisive), then each kind by id."""
    out = []
    for ch in c.changes:
        out.append(ch.line)
        out += _listed("decisive", ch.decisive) + _listed("near ties", ch.near_ties)
    return out


def _headed_lines(title: str, lines: list[str], md: bool) -> str:
    """``lines`` under ``title``; a line indented by two spaces is a sub-line of the one above it."""
    def one(x: str) -> str:
        if md:
            return ("  - " if x.startswith("  ") else "- ") + x.strip()
        return wrap(x, indent="    " if not x.startswith("  ") else "      ")

    body = "\n".join(one(x) for x in lines) if lines else "none"
    return ("### " if md else "") + f"{wrap(title)}\n\n{body}"


VERDICT_FIGURES = "in each line `A vs B`, the difference is A - B with its 95% CI"


def _figures(c: Comparison) -> str:
    """:data:`VERDICT_FIGURES` followed by ``; `` where a verdict line gives a difference, else ""."""
    return f"{VERDICT_FIGURES}; " if any(v.kind in (CANNOT_TELL, DIFFERENT) for v in c.verdicts) else ""


def verdict_text(c: Comparison, namer=None) -> str:
    """The verdict lines under a heading naming the command that shows the details (with the margin ``c`` was
    judged at, when not each task's: the same verdicts again) and, where a line gives a difference, how to read it
    (:data:`VERDICT_FIGURES`: its direction and its level); each text worded by ``namer`` (the door's) before it is
    wrapped (None: its options left for the door)."""
    folders = " ".join(r.path for r in c.runs)
    margin = f" {opt('margin', f'{c.margin:g}')}" if c.margin is not None else ""
    head = f"Pairwise verdicts ({_figures(c)}details: abricot-local compare {folders}{margin})"
    return wrap(worded(head, namer), indent="  ") + "\n" + "\n".join(wrap(worded(v.line, namer), indent="  ")
                                                                     for v in c.verdicts)


def side_by_side(rows: pd.DataFrame, width: int = TEXT_WIDTH) -> str:
    """Settings that differ as aligned text within ``width``: one row per setting, its two values
    side by side, each whole, folded in its column (a word longer than the column, a SHA-256, is
    cut across lines rather than the table split into an a block and a b block)."""
    head = ("setting", "a", "b")
    cells = [[str(r[c]) for c in head] for _, r in rows.iterrows()]
    key = min(max(len(c[0]) for c in [list(head), *cells]), 40)
    room = width - key - 2 * GAP
    natural = [max(len(c[k]) for c in [list(head), *cells]) for k in (1, 2)]
    half = room // 2
    cols = natural if sum(natural) <= room else [natural[0], room - natural[0]] if natural[0] <= half else \
        [room - natural[1], natural[1]] if natural[1] <= half else [half, room - half]

    def fold(text: str, w: int) -> list[str]:
        return textwrap.wrap(text, w, break_long_words=True, break_on_hyphens=False) or [""]

    out = [f"{'setting':<{key}}  {'a':<{cols[0]}}  b", f"{'-' * key}  {'-' * cols[0]}  {'-' * cols[1]}"]
    for k, a, b in cells:
        parts = [_dotted(k, key), fold(a, cols[0]), fold(b, cols[1])]
        for i in range(max(map(len, parts))):
            got = [p[i] if i < len(p) else "" for p in parts]
            out.append(f"{got[0]:<{key}}  {got[1]:<{cols[0]}}  {got[2]}".rstrip())
    return "\n".join(out)


def _dotted(name: str, width: int) -> list[str]:
    """A setting's dotted name on lines of at most ``width``, broken after a ``.``
    (``provenance.schedule.model_buffers.`` / ``CPU_Mapped``); a part longer than a line is cut."""
    lines = [""]
    for part in re.split(r"(?<=\.)", name):
        for piece in [part[i:i + width] for i in range(0, len(part), width)] or [""]:
            if lines[-1] and len(lines[-1]) + len(piece) > width:
                lines.append("")
            lines[-1] += piece
    return lines


def _text_section(title: str, df: pd.DataFrame) -> str:
    """A section as aligned text within 120 columns: a table with a ``pair`` column becomes one
    table per pair under the pair's name."""
    if not len(df):
        return f"{wrap(title)}\n\nnone"
    wraps = ("setting", "a", "b", "note", "group", "best", "run")
    if "pair" not in df.columns:  # a run against its reference: both name a row of every block
        keys = 3 if list(df.columns[:3]) == ["reference", "run", "task"] else 1
        return f"{wrap(title)}\n\n{fit(df, keys=keys, wrap_cols=wraps, fold_last=('folder',))[0]}"
    parts = [wrap(title)]
    for pair, rows in df.groupby("pair", sort=False):
        empty = [c for c in ("note", "detectable") if c in rows.columns and not any(map(str, rows[c]))]
        rows = rows.drop(columns=["pair", *empty])
        keys = 2 if {"task", "metric"} <= set(rows.columns) else 1
        table = side_by_side(rows) if list(rows.columns) == ["setting", "a", "b"] else \
            fit(rows, keys=keys, wrap_cols=wraps)[0]
        parts.append(f"{wrap(pair)}:\n{table}")
    return "\n\n".join(parts)


def to_json(c: Comparison) -> dict:
    """The whole comparison as plain data, strict JSON's: a NaN or an infinity is None (the note beside it says why)."""
    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    return clean({
        "schema_version": 1,
        "runs": [{"label": r.label, "folder": r.path} for r in c.runs],
        "matches": [asdict(m) for m in c.matches],
        "paired_on": c.paired_on,
        "settings_differ": [asdict(d) for d in c.differs],
        "settings_one_side": [asdict(d) for d in _one_side(c)],
        "metrics": [{**asdict(m), "detail": dict(m.detail)} for m in c.metrics],
        "agreement": [asdict(g) for g in c.agreements],
        "kld": [{"reference": k.reference, "run": k.run, "task": k.task, "items_compared": n or None,
                 "kld": k.stats.record(n)} for k, n in _kld(c)],
        "best_groups": [asdict(g) for g in c.groups],
        "power": [asdict(p) for p in c.power],
        "verdicts": [{**asdict(v), "line": v.line} for v in c.verdicts],
        "equivalence": [{**asdict(e), "exact": e.exact, "line": e.line, "like_line": e.like_line or None}
                        for e in c.equivalence],
        "task_items": dict(c.totals),
        "answers_changed": [{"task": ch.task, "reference": ch.reference, "other": ch.other, "n": ch.n,
                             "threshold_nats": ch.threshold, "changed": len(ch.changed),
                             "near_ties": len(ch.near_ties), "decisive": len(ch.decisive), "compared": ch.compared,
                             "reference_near_ties": ch.ref_near_ties, "reference_decisive": ch.ref_decisive,
                             **{kind: len(ch.with_outcome(kind)) for kind in (FIXED, BROKEN, STILL_WRONG)},
                             "items": [{**asdict(x), "decisive": not x.margin < ch.threshold} for x in ch.changed],
                             "line": ch.line} for ch in c.changes],
        "margin": c.margin, "near_tie_nats": c.near_tie,
        "notes": list(c.notes),
        "tolerance_nats": c.tolerance, "alpha": c.alpha,
        "bootstrap": {"seed": c.seed, "n_boot": c.n_boot, "level": 0.95, "used_for": "correlations"},
        "accuracy_interval": "Tango's score interval of paired proportions (1998)",
    })


def csv_frame(c: Comparison) -> pd.DataFrame:
    """One tidy table: a row per pair, task and metric, with the pair's agreement on the
    task and its verdict."""
    agree = {(g.a, g.b, g.task): g for g in c.agreements}
    verdicts = {(v.a, v.b): v for v in c.verdicts}
    rows = []
    for m in c.metrics:
        g, v = agree.get((m.a, m.b, m.task)), verdicts[(m.a, m.b)]
        rows.append({"a": m.a, "b": m.b, "task": m.task, "metric": m.metric, "stat": m.stat, "n": m.n,
                     "value_a": m.value_a, "value_b": m.value_b, "diff": m.diff, "ci_lo": m.ci[0], "ci_hi": m.ci[1],
                     "test": m.test, "statistic": m.statistic, "p": m.p, "p_holm": m.p_holm, "detectable": m.mdd,
                     "same_pred": g.same_pred if g else None, "max_abs_delta": g.max_abs_delta if g else None,
                     "mean_abs_delta": g.mean_abs_delta if g else None, "mean_kl": g.mean_kl if g else None,
                     "verdict": v.kind, "note": m.note})
    return pd.DataFrame(rows)


def render(c: Comparison, fmt: str = "table", namer: Namer | None = None) -> str:
    """The comparison as ``table`` (aligned), ``markdown``, ``csv`` or ``json``; the text
    forms end with one verdict line per pair. ``namer``: the door's words for the options its texts name, written
    into each text before the whole is (:func:`worded`; None: left for the caller to render)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if fmt == "json":
        return json.dumps(worded(to_json(c), namer), indent=2, ensure_ascii=False, allow_nan=False)
    if fmt == "csv":
        return worded(csv_frame(c), namer).to_csv(index=False).rstrip("\n")
    md = fmt == "markdown"
    bullet = "- " if md else ""
    parts = []
    for title, df in worded(frames(c), namer):
        if title.startswith("Power"):  # in words
            title, lines = "Power: the smallest accuracy difference these items detect (80% power, 5% two-sided)", \
                worded(power_lines(c), namer)
            parts.append(("### " if md else "") + f"{wrap(title)}\n\n" + "\n".join(bullet + wrap(x, indent="  ")
                                                                           for x in lines))
        elif md:
            parts.append(f"### {title}\n\n" + (grid(df.fillna(""), True) if len(df) else "none"))
        else:
            parts.append(_text_section(title, df.fillna("")))
    margin = opt("margin", f"{c.margin:g}") if c.margin is not None else "each task's margin per metric"
    good = (f"Is it as good? Each run against its reference: the 90% CI of run - reference against the margin "
            f"({margin}), for the task's own value (its items counted; exact when every item is compared), then for "
            "items like these (docs/compare.md)")
    parts.append(_headed_lines(worded(good, namer), worded(equivalence_lines(c), namer), md))
    changed = (f"Answers changed: fixed (wrong -> right), broken (right -> wrong) or still wrong (-> another wrong "
               f"answer); near ties (the reference's top-two margin under {c.near_tie:g} nats: "
               f"{near_tie_note(ch.compared for ch in c.changes)}) or decisive, each of how many the reference had "
               "on the items compared")
    parts.append(_headed_lines(worded(changed, namer), worded(change_lines(c), namer), md))
    parts.append("\n".join(bullet + wrap(x, indent="  ") for x in worded(_footer(c), namer)))
    head = "### Verdict" if md else "Verdict"
    lines = worded([v.line for v in c.verdicts], namer)
    parts.append(f"{head}\n\n" + "\n".join(bullet + (x if md else wrap(x, indent="  ")) for x in lines))
    return "\n\n".join(parts)
