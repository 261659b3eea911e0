"""Reports over finished runs: tables of metrics, published baselines, quantization agreement.

Pure: reads finished runs (:class:`abricot_local.analysis.runs.Run`, as
:mod:`abricot_local.analysis.overview` gathers them) and returns pandas DataFrames or strings; nothing is
printed. Every number in a table is the one in results.json (no recomputation);
:func:`recompute` checks that results.json matches its samples files. Every text a table
shows from the runs (names, folders, task and metric names) is made visible and harmless
(console.safe.visible; markdown's HTML escaped, long cells cut: texttable).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace

import pandas as pd

from abricot_local.analysis import baselines as pub
from abricot_local.analysis.frames import WITHHELD, ci_words, no_interval_words
from abricot_local.report import published as reproduction  # the reproduction table's rows, every format's
from abricot_local.report.published import published_frame
from abricot_local.report.safe import csv_text, markup, visible
from abricot_local.report.comparison import worded
from abricot_local.errors import UsageError, opt
from abricot_local.analysis.overview import (QuantPair, Report, RunCheck, TaskCheck, compare_pair, compare_quants,
                                             gather, metric_keys, no_pairs, recompute)
from abricot_local.analysis.runs import Metric, Run
from abricot_local.analysis.ladder import ladders
from abricot_local.analysis.ladder import notes as ladder_notes
from abricot_local.analysis.prompts import study as prompt_study
from abricot_local.analysis.stats import label_kl
from abricot_local.report import ladder as ladder_rows
from abricot_local.report import prompts as prompt_report
from abricot_local.report.texttable import WIDTH, fit, grid, shown, wrap

# the Python API of reports: the runs' loading (report_runs) and the tables (here)
__all__ = ["FORMATS", "TABLES", "Metric", "QuantPair", "Report", "Run", "RunCheck", "RunsRow", "TaskCheck", "build",
           "compare_pair", "compare_quants", "gather", "label_kl", "metric_keys", "no_interval", "no_interval_words",
           "published_frame", "quant_frame", "recompute", "render", "runs_frame", "runs_rows", "to_json", "value_words"]

FORMATS = ("table", "markdown", "csv", "json")
TABLES = ("all", "runs", "published", "quant", "prompts")
EMPTY = {"published": "No run's registry entry reproduces a published result.",
         "prompts": "No run holds a task under two or more prompt variants (run --prompt-variant all)."}


def build(folders, *, registry: dict | None = None, data: tuple[tuple[str, str], ...] = (), data_dir: str | None = None,
          skip=None) -> Report:
    """The report of finished run folders (and lm-eval outputs), each read once (analysis.loading.load_all:
    ``data``/``data_dir`` for the lm-eval outputs' tasks, and where its comparisons count a task's N when the
    runs' recorded data is not here, population.given_data: a path not here refused; ``skip`` told of one that
    cannot be read)."""
    from abricot_local.analysis.loading import load_all
    from abricot_local.analysis.population import given_data

    if not folders:
        raise UsageError("give at least one run folder")
    given = given_data(data, data_dir)
    return gather(load_all(list(dict.fromkeys(str(f) for f in folders)), registry, data=data, data_dir=data_dir,
                           skip=skip), given)


# -- tables ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunsRow:
    """One row of the runs table: a run, or a published row (``published``; no folder, no n)."""

    model: str  # the model's label (a published row: the model named by the source)
    quant: str
    source: str
    folder: str
    n: dict  # task -> items scored
    cells: dict  # "task.metric" -> (value, CI or None)
    published: bool = False
    label: str = ""  # a run: its label, unique among the report's runs (run_labels)
    why: dict = field(default_factory=dict)  # "task.metric" -> why a value has no interval (no_interval)


def no_interval(run: Run) -> dict[str, str]:
    """Each metric of ``run`` recorded with a value and no interval ([NaN, NaN]: metrics.interval_read; `run`'s
    summary says "no interval", analysis.frames.ci_words), "task.metric" -> why, in the words the run printed: its
    task's recorded warning on it (metrics.few_words: ``NAME rests on ...``); "" where the record gives none."""
    out = {}
    for task, entry in run.record.tasks.items():
        for name, value, ci in entry.metric_items():
            if isinstance(value, (int, float)) and ci_words(value, ci) == "no interval":
                out[f"{task}.{name}"] = next((w for w in entry.warnings if w.startswith(f"{name} rests on ")), "")
    return out


def runs_rows(report: Report, patterns: tuple[str, ...] = ()) -> tuple[list[str], list[str], list[RunsRow]]:
    """The runs table (the one builder every format uses): its tasks, metric keys and rows,
    the runs first, then the published rows, each number as recorded."""
    keys = metric_keys(report, patterns)
    tasks = list(dict.fromkeys(k.split(".", 1)[0] for k in keys))
    rows = [RunsRow(run.model_label, run.quant, run.source, str(run.path), dict(run.task_n),
                    {m.key: (m.value, m.ci) for m in run.metric_values if m.key in keys}, label=run.label,
                    why={k: w for k, w in no_interval(run).items() if k in keys})
            for run in report.runs]
    rows += [RunsRow(model, "", source, "", {}, {k: (v, None) for k, v in values.items() if k in keys}, True)
             for model, source, values in pub.group_rows(report.baselines)]
    return tasks, keys, rows


def _withheld(why: dict) -> str:
    """The runs table's ``no_interval`` cell: each metric whose interval the run withheld (recorded [NaN, NaN]: its
    CI cells blank, as a metric recorded with no interval has them), ``task.metric: why`` (:func:`no_interval`),
    joined by `` | ``; "" for none."""
    return " | ".join(f"{k}: {w or WITHHELD}" for k, w in why.items())


def runs_frame(report: Report, patterns: tuple[str, ...] = ()) -> pd.DataFrame:
    """Runs then published rows; per metric its value and CI bounds, exactly as recorded (a withheld interval's
    NaN bounds blank, as no interval recorded: ``no_interval`` names the metrics the run withheld one of, and why)."""
    tasks, keys, table = runs_rows(report, patterns)
    rows = []
    for r in table:
        row = {"model": r.model, "quant": r.quant, "source": r.source, "folder": r.folder, "label": r.label}
        row.update({f"{t}.n": r.n.get(t) for t in tasks})
        for k in keys:
            value, ci = r.cells.get(k, (None, None))
            row[k] = value
            row[f"{k}.ci_lo"], row[f"{k}.ci_hi"] = ci or (None, None)
        row["no_interval"] = _withheld(r.why)
        rows.append(row)
    columns = ["model", "quant", "source", "folder", "label", *(f"{t}.n" for t in tasks)]
    columns += [c for k in keys for c in (k, f"{k}.ci_lo", f"{k}.ci_hi")] + ["no_interval"]
    df = pd.DataFrame(rows, columns=columns)
    return df.astype({f"{t}.n": "Int64" for t in tasks})


def quant_frame(report: Report) -> pd.DataFrame:
    rows = [{
        "base": q.base, "task": q.task, "ref_model": q.ref.label, "ref_quant": q.ref.quant,
        "other_model": q.other.label, "other_quant": q.other.quant, "n_common": q.n_common,
        "agreement": q.agreement, "kl_mean": q.kl_mean, "ref_folder": str(q.ref.path),
        "other_folder": str(q.other.path), "notes": "; ".join(q.notes),
    } for q in report.quant]
    return pd.DataFrame(rows, columns=["base", "task", "ref_model", "ref_quant", "other_model", "other_quant",
                                       "n_common", "agreement", "kl_mean", "ref_folder", "other_folder", "notes"])


# -- rendering -------------------------------------------------------------------------------
def _num(v, digits: int = 3) -> str:
    if v is None or v is pd.NA:
        return ""
    return "nan" if v != v else f"{v:.{digits}f}"


def value_words(value, ci, digits: int = 3) -> str:
    """A value and its 95% CI as `run`'s summary says them (frames.ci_words), in every table and figure of a report:
    "0.250 [0.112, 0.469]", "-0.123 no interval" (a correlation's withheld: why, :func:`no_interval_words`)."""
    if value is None:
        return ""
    return _num(value, digits) + (f" {ci_words(value, ci)}" if ci else "")


@dataclass(frozen=True)
class Section:
    """One table of the text report, and how it fits the terminal (texttable.fit)."""

    title: str
    frame: pd.DataFrame
    keys: int = 1  # columns each block repeats when the table is split
    wrap: tuple[str, ...] = ()  # columns whose long cells may take several lines
    groups: tuple[tuple[str, ...], ...] = ()  # columns kept in one block where they fit
    notes: tuple[str, ...] = ()  # lines under the table (what it leaves out)
    lines: tuple[str, ...] = ()  # lines under the table before its notes (the quant ladder's: which quant to keep)
    keep_rows: bool = False  # every row in every block when split (texttable.fit)


def _text_frames(report: Report, patterns: tuple[str, ...]) -> dict[str, Section]:
    tasks, keys, table = runs_rows(report, patterns)
    rows = []
    for r in table:
        digits = 2 if r.published else 3
        row = {"model": r.label or r.model, "quant": r.quant, "source": r.source, "folder": r.folder}
        row.update({f"{t}.n": str(r.n.get(t, "")) for t in tasks})
        row.update({k: value_words(*r.cells[k], digits) if k in r.cells else "" for k in keys})
        rows.append(row)
    groups = tuple((f"{t}.n", *(k for k in keys if k.split(".", 1)[0] == t)) for t in tasks)
    cols = ["model", "quant", "source", "folder", *(c for g in groups for c in g)]
    text = pd.DataFrame(rows, columns=cols).fillna("")
    listed, checked = {b.instance for b in report.baselines}, {rc.check.task for rc in report.checks}
    recorded = [t for t in tasks if t in checked and t not in listed]  # published values a run recorded only
    unpublished = [t for t in tasks if t not in listed and t not in checked]
    withheld = tuple(f"{shown(r.label or r.model)} {key.split('.', 1)[0]}: {no_interval_words(why)}" for r in table
                     for key, why in r.why.items() if why)  # the run's warning on it, as the run printed it
    title = "Runs and published results (value [95% CI])" if report.baselines else "Runs (value [95% CI])" \
        if recorded else "Runs (value [95% CI]); no published results exist for these tasks"
    if recorded:  # their task here lists none (not installed, or another version): the runs' verdicts below say them
        title += f"; the published values of {', '.join(recorded)} are those the runs recorded (below)"
    if (report.baselines or recorded) and unpublished:
        title += f"; none are published for {', '.join(unpublished)}"
    out = {"runs": Section(title, text, 1, ("source", "model"), groups, withheld)}
    if report.checks:  # what qualifies a verdict that it does not say itself under the table (never cut)
        frame, settled, lines = reproduction.text_section(report)
        unheld = any(rc.check.comparable and rc.check.verdict is None for rc in report.checks)
        out["published"] = Section("Did the run reproduce the published value? (90% CI of run - published "
                                   "against the margin" + ("; a run held to no verdict: whether the published value "
                                                           "is inside its 95% CI" if unheld else "") +
                                   ("; a row judged by a --until-settled run's rule: that rule's verdict, the run's, "
                                    "at the look it stopped at; the fixed-n one in the notes" if settled else "") + ")",
                                   frame, 3, ("notes", "reference", "model", *settled), notes=lines)
    if report.quant:
        q = quant_frame(report)
        q["base"] = [p.base_cell for p in report.quant]  # as its ladder's rows (and the page's)
        q["agreement"], q["kl_mean"] = q["agreement"].map(_num), q["kl_mean"].map(lambda v: _num(v, 4))
        q = q.rename(columns={"kl_mean": "mean KL(ref||other)"}).drop(columns=["ref_folder", "other_folder"])
        q.insert(2, "ref_quant", q.pop("ref_quant"))  # key columns: every block names the reference quant
        q.insert(3, "other_quant", q.pop("other_quant"))  # and the rung's (its rows' order is no key)
        out["quant"] = Section("Quantization comparison (same base, different quants; common items)", q, 4,
                               ("notes", "ref_model", "other_model"))
        rungs = ladders(report.runs, given=report.given)
        left_out = ladder_notes(report.runs)
        if rungs or left_out:
            out["ladder"] = Section(ladder_rows.TITLE, ladder_rows.marked(ladder_rows.frame(rungs), rungs), 3,
                                    ("verdict", "run", "answers changed", "difference [90% CI]", "KLD mean [95% CI]"),
                                    notes=left_out, lines=ladder_rows.choice_lines(rungs),
                                    keep_rows=True)
    return out


def finite(obj):
    """``obj`` (plain data) with every NaN and infinity as None: strict JSON, which has neither (a withheld
    interval's [NaN, NaN] reads [null, null]; the reason beside it, where the data has one)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def strict_json(doc) -> str:
    """``doc`` as indented strict JSON (:func:`finite`): a parser that refuses NaN (JSON.parse, jq) reads it."""
    return json.dumps(finite(doc), indent=2, ensure_ascii=False, allow_nan=False)


def _run_tasks(run: Run) -> dict:
    """A run's tasks as the JSON report gives them: ``n``, the ``metrics`` as recorded (NaN: null, :func:`finite`)
    and ``no_interval``: each metric whose interval the run withheld, with why (its warning, "" for none)."""
    why = no_interval(run)
    return {t: {"n": e.n, "metrics": finite(e.metrics),
                "no_interval": {k.split(".", 1)[1]: w for k, w in why.items() if k.split(".", 1)[0] == t}}
            for t, e in run.record.tasks.items()}


def to_json(report: Report) -> dict:
    """The whole report as plain data (metrics copied from results.json unchanged, but NaN as null: a withheld
    interval said in ``no_interval``)."""
    return {
        "schema_version": 1,
        "runs": [{
            "folder": str(r.path), "model": r.model_label, "label": r.label, "name": r.name, "alias": r.alias, "backend": r.backend,
            "quant": r.quant, "base": r.base, "registry_alias": r.registry_alias,
            "reproduces": [dict(t) for t in dict.fromkeys(
                (("model", b.model), ("source", b.source)) for b in r.reproduces)],
            "tasks": _run_tasks(r),
        } for r in report.runs],
        "baselines": [{"model": model, "source": source, "values": values}
                      for model, source, values in pub.group_rows(report.baselines)],
        "published_checks": reproduction.records(report),
        "quant_comparison": [{**row, "notes": list(q.notes)}
                             for row, q in zip(quant_frame(report).to_dict("records"), report.quant)],
        "quant_ladder": ladder_rows.records(ladders(report.runs, given=report.given)) if report.quant else [],
        "quant_ladder_notes": list(ladder_notes(report.runs)) if report.quant else [],
    }


def _harmless(df: pd.DataFrame, namer=None) -> pd.DataFrame:
    """Every text cell and header of a table with its control characters (newlines included) as
    escapes, a cell's options (errors.opt) in ``namer``'s words first (comparison.worded); numbers as they are."""
    out, kept = df.rename(columns=visible), lambda v: not isinstance(v, str) or visible(worded(v, namer)) == v
    for k, dtype in enumerate(out.dtypes):  # a column is set again only where a text changes (most change none)
        if not pd.api.types.is_numeric_dtype(dtype) and not all(map(kept, out.iloc[:, k].tolist())):
            out.iloc[:, k] = out.iloc[:, k].map(lambda v: visible(worded(v, namer)) if isinstance(v, str) else v)
    return out


def render(report: Report, fmt: str = "table", *, table: str = "all", metrics: tuple[str, ...] = (), namer=None) -> str:
    """The report as text: ``table`` (aligned), ``markdown``, ``csv`` or ``json``; the options its texts name in
    ``namer``'s words, written into each text before the whole is (comparison.worded; None: left to the caller)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if table not in TABLES:
        raise UsageError(f"unknown table {table!r}; choose from {', '.join(TABLES)}")
    if fmt == "json":
        doc = to_json(report)
        if table in ("all", "prompts"):
            doc["prompts"] = prompt_report.to_json(prompt_study(report.runs))
        keep = {"runs": ("runs", "baselines"), "published": ("published_checks",),
                "quant": ("quant_comparison", "quant_ladder", "quant_ladder_notes"), "prompts": ("prompts",)}
        doc = doc if table == "all" else {k: doc[k] for k in ("schema_version", *keep[table])}
        return strict_json(worded(doc, namer))
    if fmt == "csv":
        if table == "prompts":  # a block per task and its variants: no one plain table
            raise UsageError(f"{opt('table', 'prompts')} is written as table, markdown, json or html; got "
                             f"{opt('fmt', fmt)}")
        frames = {"runs": runs_frame(report, metrics), "published": published_frame(report),
                  "quant": quant_frame(report)}
        # one plain table a CSV reader loads as is: "all" means the runs table here
        return csv_text(_harmless(frames["runs" if table == "all" else table], namer))
    prompts = prompt_report.render(prompt_study(report.runs), fmt) if table in ("all", "prompts") else ""
    if table == "prompts":
        return prompts or EMPTY[table]
    sections = {k: replace(sec, title=worded(sec.title, namer), frame=_harmless(sec.frame, namer), lines=worded(
        sec.lines, namer), notes=worded(sec.notes, namer)) for k, sec in _text_frames(report, metrics).items()}
    if table != "all" and table not in sections:  # quant: no pair; why, where the ladders' notes say (no_pairs)
        said = [worded(n, namer) for n in (no_pairs(report.runs) if table == "quant" else ())]
        return EMPTY.get(table) or ("\n\n- note: ".join(map(markup, said)) if fmt == "markdown" else "\n".join(
            wrap(visible(("note: " if k else "") + s), indent="  ") for k, s in enumerate(said)))
    chosen = list(sections.values()) if table == "all" else [sections[table], *(
        [sections["ladder"]] if table == "quant" and "ladder" in sections else [])]
    if fmt == "markdown":
        return "\n\n".join([*(f"### {markup(sec.title)}\n\n{grid(sec.frame, True)}" + "".join(
                                "\n\n" + markup(n) for n in sec.lines) + "".join(
                                "\n\n- note: " + markup(n) for n in sec.notes) for sec in chosen),
                            *([prompts] if prompts else [])])
    parts, split = [], False
    for sec in chosen:
        body, cut = fit(sec.frame, keys=sec.keys, wrap_cols=sec.wrap, groups=sec.groups, fold_last=("folder",),
                        keep_rows=sec.keep_rows) if len(sec.frame) else ("none", False)
        split |= cut
        parts.append(f"{wrap(visible(sec.title))}\n\n{body}" + ("\n" if sec.lines else "") + "".join(
            "\n" + wrap(visible(n), indent="  ") for n in sec.lines) + "".join(
            "\n" + wrap(visible("note: " + n), indent="  ") for n in sec.notes))
    if prompts:
        parts.append(prompts)
    if split:
        parts.append(wrap(f"(split to fit {WIDTH} columns: --format markdown, csv or html shows each table whole)"))
    return "\n\n".join(parts)
