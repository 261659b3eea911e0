"""The HTML report: one self-contained page to explore finished runs.

:func:`render_html` takes a :class:`~abricot_local.report.tables.Report` and returns
one HTML string with everything inline: styles, a vanilla script, figures
(PNG data URIs from :mod:`abricot_local.report.plots` when matplotlib is installed,
plus SVG forest plots that :mod:`abricot_local.report.forest` lays out and the page
draws) and the data. Nothing is fetched: a Content-Security-Policy allows only this
page's own script and style (by hash) and ``data:`` images, so the page works
offline from ``file://``.

Every text from data or from a model reaches the page only inside the JSON
block (``<``, ``>``, ``&`` written as ``\\u003c`` etc.) and is put into the
document with ``textContent``; an item whose context holds ``<script>`` shows
it as text. Pure: nothing is printed; matplotlib loads only for figures.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import importlib.util
import json
import math
import os
import tempfile
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from abricot_local.analysis import baselines as pub
from abricot_local.analysis.changes import BROKEN, FIXED, NEAR_TIE, STILL_WRONG, outcome, top_two_margin
from abricot_local.analysis.equivalence import references
from abricot_local.analysis.overview import no_pairs
from abricot_local.analysis.ladder import ladders
from abricot_local.analysis.ladder import notes as ladder_notes
from abricot_local.analysis.reproduction import words
from abricot_local.report import forest
from abricot_local.report import ladder as ladder_rows
from abricot_local.analysis.prompts import study as prompt_study
from abricot_local.report import prompts as prompt_report
from abricot_local.record import Sample
from abricot_local.report.tables import Report, metric_keys, no_interval
from abricot_local.report.comparison import worded
from abricot_local.report.pairs import pairwise

SHORT_TEXT = 24  # an extra field whose values are all numbers or texts this short gets a table column
MIN_PREFIX = 32  # a task's items' common context prefix is stored once when at least this long


def packed(strings: list[str]) -> str:
    """A list of texts as base64 of gzipped JSON (the page unpacks it with DecompressionStream).

    The scored contexts are most of a report's bytes (a DISCOTEX item is ~1.5 kB);
    packed, a page over 1600 items x 2 runs is a third as large and opens faster."""
    raw = json.dumps(strings, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def unpacked(text: str) -> list[str]:
    """The inverse of :func:`packed`."""
    return json.loads(gzip.decompress(base64.b64decode(text)).decode("utf-8"))


def script_json(obj) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` left."""
    text = json.dumps(_finite(obj), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _finite(obj):
    """NaN as None and infinities as "inf" / "-inf" (JSON has neither; the page reads them back)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None if obj != obj else "inf" if obj > 0 else "-inf"
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


class _Pool:
    """Interned strings: each distinct text once in the page, referenced by index."""

    def __init__(self):
        self.strings: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        k = self._index.get(text)
        if k is None:
            k = self._index[text] = len(self.strings)
            self.strings.append(text)
        return k


# -- the data the page shows -----------------------------------------------------------------
def _runs(report: Report) -> list[dict]:
    return [{"label": r.label, "quant": r.quant, "backend": r.backend, "synthetic": r.synthetic,
             "source": r.source, "folder": str(r.path),
             "base": r.base, "tasks": dict(r.task_n),
             "warnings": [f"{t}: {w}" for t, e in r.record.tasks.items() for w in e.warnings]}
            for r in report.runs]


def _leaderboard(report: Report, keys: list[str]) -> tuple[list[dict], list[dict]]:
    columns = []
    for key in keys:
        task, metric = key.split(".", 1)
        declared = [r.record.tasks[task].chance for r in report.runs if task in r.record.tasks]
        chance = next((c[metric] for c in declared if metric in c), None)  # the task's own declaration
        columns.append({"key": key, "task": task, "metric": metric, "chance": chance})
    rows = []
    for k, run in enumerate(report.runs):
        by_key, why = {m.key: m for m in run.metric_values}, no_interval(run)
        # [value, CI low, CI high], and a 4th, why, where the run withheld the interval (tables.no_interval)
        cells = {key: [by_key[key].value, *(by_key[key].ci or (None, None)), *([why[key]] if key in why else [])]
                 for key in keys if key in by_key}
        rows.append({"label": run.label, "quant": run.quant, "kind": "run", "source": run.source, "run": k,
                     "cells": cells})
    for model, source, values in pub.group_rows(report.baselines):
        cells = {key: [values[key], None, None] for key in keys if key in values}
        if cells:
            rows.append({"label": model, "quant": "", "kind": "published", "source": source, "run": None,
                         "cells": cells})
    return columns, rows


def _quant(report: Report) -> list[dict]:
    return [{"base": q.base_cell, "task": q.task, "ref": q.ref.label, "refQuant": q.ref.quant, "other": q.other.label,
             "otherQuant": q.other.quant, "n": q.n_common, "agreement": q.agreement, "kl": q.kl_mean,
             "notes": list(q.notes)} for q in report.quant]


def _checks(report: Report) -> list[dict]:
    """The page's published checks; a row a --until-settled rule judged: the rule's verdict in the run's own line,
    the fixed-n one first in its notes and each of its figures after it, said not to account for the looks, then what
    settles the rule's (settled.SettledVerdict.notes)."""
    return [{"label": rc.run.label, "reference": f"{rc.check.reference} ({rc.check.source})", "task": rc.check.task,
             "published": rc.check.published, "value": rc.check.value,
             "ci": list(rc.check.ci95) if rc.check.ci95 else None,
             "verdict": rc.settled.line if rc.settled else words(rc.check),
             "notes": [*(f"not comparable: {d}" for d in rc.check.differences),
                       *(rc.settled.notes(rc.check) if rc.settled else rc.check.reasons),
                       *rc.check.notes]}
            for rc in report.checks]


def _labels(sample: Sample) -> list[str]:
    labels = [c.strip() for c in sample.continuations or ()]
    if len(labels) != len(sample.choices) or not all(labels) or any(len(x) > 12 for x in labels):
        labels = [str(k + 1) for k in range(len(sample.choices))]
    return labels


def _context_ref(ctx: str, base: str, pool: _Pool):
    """How a model's context is stored: -1 = the item's own, [head, tail] around it, or its own text."""
    if ctx == base:
        return -1
    at = ctx.find(base) if base else -1
    if at >= 0:
        return [pool(ctx[:at]), pool(ctx[at + len(base):])]
    return pool(ctx)


def _changed(found: list, pairs: list[tuple[int, int]]) -> int:
    """2 when some run's answer differs from its reference's (compare's pairs) by a decisive change,
    1 when every such change is a near tie, 0 when none changed (analysis/changes.py's rule)."""
    kind = 0
    for other, ref in pairs:
        o, r = found[other], found[ref]
        if o is not None and r is not None and o.pred != r.pred and len(o.logprobs) == len(r.logprobs):
            kind = max(kind, 1 if top_two_margin(r.logprobs) < NEAR_TIE else 2)
    return kind


OUTCOME_BITS = {FIXED: 1, BROKEN: 2, STILL_WRONG: 4}  # the page's filters: report.js


def _outcomes(found: list, pairs: list[tuple[int, int]], gold: int) -> int:
    """The changed answers against each run's reference (compare's pairs), against the gold answer:
    a bit per outcome seen (fixed 1, broken 2, still wrong 4; analysis/changes.py's rule)."""
    bits = 0
    for other, ref in pairs:
        o, r = found[other], found[ref]
        if o is not None and r is not None and o.pred != r.pred and len(o.logprobs) == len(r.logprobs):
            bits |= OUTCOME_BITS[outcome(gold, r.pred, o.pred)]
    return bits


def _explorer(report: Report, task: str, samples: dict, pool: _Pool, texts: _Pool) -> dict:
    """Items as rows, the runs that scored ``task`` as columns; choices in ``pool``, contexts in ``texts``."""
    run_idx = [k for k, r in enumerate(report.runs) if task in r.tasks]
    at = {report.runs[k].label: n for n, k in enumerate(run_idx)}
    pairs = [(at[o], at[r]) for o, r in references([report.runs[k] for k in run_idx])]
    by_run = [{s.id: s for s in samples[(k, task)]} for k in run_idx]
    order = list(dict.fromkeys(i for rows in by_run for i in rows))
    extras = list(dict.fromkeys(f for rows in by_run for s in rows.values() for f in s.fields))  # the task's own
    # a field that differs between runs on some item (ABRICOT's expected_score) belongs to each run's answer
    per_run = {f for f in extras for i in order if len({json.dumps(rows[i].fields.get(f), sort_keys=True)
                                                         for rows in by_run if i in rows}) > 1}
    per_item = [f for f in extras if f not in per_run]
    bases = [next(rows[i] for rows in by_run if i in rows).context or "" for i in order]
    prefix = os.path.commonprefix(bases) if len(bases) > 1 else ""
    prefix = prefix if len(prefix) >= MIN_PREFIX else ""
    labels = None
    items, sources = [], {}
    for item_id in order:
        found = [rows.get(item_id) for rows in by_run]
        first = next(s for s in found if s is not None)
        sources[first.source or ""] = None
        lab = _labels(first)
        labels = lab if labels is None else labels
        item = {"id": item_id, "src": first.source or "", "g": first.gold,
                "ch": [pool(c) for c in first.choices], "c": texts((first.context or "")[len(prefix):]),
                "x": {f: first.fields[f] for f in per_item if f in first.fields}, "m": []}
        if lab != labels:
            item["lab"] = lab
        changed = _changed(found, pairs)
        if changed:
            item["chg"], item["out"] = changed, _outcomes(found, pairs, first.gold)
        for s in found:
            if s is None:
                item["m"].append(None)
                continue
            entry = {"p": s.pred, "lp": list(s.logprobs)}
            ref = _context_ref(s.context or "", first.context or "", texts)
            if ref != -1:
                entry["c"] = ref
            if s.choices != first.choices or s.gold != first.gold:
                entry["ch"], entry["g"] = [pool(c) for c in s.choices], s.gold
            own = {f: s.fields[f] for f in extras if f in per_run and f in s.fields}
            if own:
                entry["x"] = own
            item["m"].append(entry)
        items.append(item)
    short = [f for f in per_item if all(_short(it["x"].get(f)) for it in items)]
    return {"name": task, "runs": run_idx, "labels": labels or [], "sources": list(sources),
            "columns": short, "prefix": prefix, "items": items}


def _short(value) -> bool:
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, str) and len(value) <= SHORT_TEXT


def _png_figures(report: Report, keys: list[str]) -> tuple[list[dict], list[str]]:
    """plots.py's per-run figures as data URIs, and what could not be drawn; none when
    matplotlib is not installed.

    Its bar charts are left out: the page draws the same values (with the
    published rows and the chance level) as SVG."""
    if importlib.util.find_spec("matplotlib") is None:
        return [], ['per-run figures need matplotlib: pip install "abricot-local[plot]"']
    from abricot_local.report import plots

    out = []
    with tempfile.TemporaryDirectory(prefix="abricot-html-") as tmp:
        drawn = plots.write_plots(report, tmp, metrics=tuple(keys), bar_charts=False)
        for path in drawn.paths:
            data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
            out.append({"caption": Path(path).stem, "src": "data:image/png;base64," + data})
    return out, [f"not drawn: {n}" for n in drawn.notes]


def primary_keys(report: Report, keys: list[str]) -> list[str]:
    """Each task's first shown metric (the one its results.json lists first)."""
    seen: dict[str, str] = {}
    for key in keys:
        seen.setdefault(key.split(".", 1)[0], key)
    return list(seen.values())


def report_data(report: Report, *, metrics: tuple[str, ...] = (), figures: bool = True) -> dict:
    """Everything the page shows, as plain data (texts from data files stay as they are)."""
    keys = metric_keys(report, metrics)
    samples = {(k, t): r.samples_of(t) for k, r in enumerate(report.runs) for t in r.tasks}
    tasks = list(dict.fromkeys(t for r in report.runs for t in r.tasks))
    pool, texts = _Pool(), _Pool()
    columns, rows = _leaderboard(report, keys)
    primary = primary_keys(report, keys)
    pngs, png_notes = _png_figures(report, primary) if figures else ([], [])
    empty = () if report.quant else no_pairs(report.runs)  # the text table's words, the ladders' notes read once
    return {
        "version": 1,
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": _runs(report),
        "columns": columns,
        "rows": rows,
        "primary": primary,
        "forests": [f for f in (forest.figure(c, rows) for c in columns if c["key"] in primary) if f is not None],
        "checks": _checks(report),
        "quant": _quant(report),
        "ladder": ladder_rows.page_records(ladders(report.runs, given=report.given)) if report.quant else [],
        "ladderNotes": list(ladder_notes(report.runs) if report.quant else empty[1:]),
        "quantEmpty": empty[0] if empty else "",
        "nearTie": NEAR_TIE,
        "prompts": prompt_report.page_data(prompt_study(report.runs)),
        "figures": pngs,
        "figuresNote": "; ".join(png_notes),
        "pairwise": pairwise(report),
        "tasks": [_explorer(report, t, samples, pool, texts) for t in tasks],
        "strings": pool.strings,
        "contexts": packed(texts.strings),
    }


# -- the page --------------------------------------------------------------------------------
def asset(name: str) -> str:
    """The page's style or script, from the package data (abricot_local/assets/)."""
    return resources.files("abricot_local").joinpath("assets", name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


ITEMS = ("tasks", "strings", "contexts")  # the page data's items (texts from data files, a model's): no message


def render_html(report: Report, *, metrics: tuple[str, ...] = (), figures: bool = True,
                title: str = "abricot-local report", namer=None) -> str:
    """The whole report as one self-contained HTML page; the options its messages name (errors.opt) in ``namer``'s
    words, written into each text of its data before the data is (comparison.worded; None: left to the caller)."""
    data = report_data(report, metrics=metrics, figures=figures)
    data = script_json({k: v if k in ITEMS else worded(v, namer) for k, v in data.items()})
    css, js = asset("report.css"), asset("report.js")
    csp = (f"default-src 'none'; script-src {_csp_hash(js)}; style-src {_csp_hash(css)}; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style>{css}</style>\n</head>\n<body>\n"
        '<noscript><p class="note">This report needs JavaScript to show its tables.</p></noscript>\n'
        '<div id="app"></div>\n'
        f'<script type="application/json" id="report-data">{data}</script>\n'
        f"<script>{js}</script>\n</body>\n</html>\n"
    )
