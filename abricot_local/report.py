"""Reports over finished runs: tables of metrics, published baselines, quantization agreement.

Pure: reads output folders (results.json, samples-<task>.jsonl) and returns
frozen dataclasses, pandas DataFrames or strings; nothing is printed. Every
number in a table is the one in results.json (no recomputation);
:func:`recompute` checks that results.json matches its samples files.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from dataclasses import dataclass, field, replace
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from abricot_local import baselines as pub
from abricot_local.core import log_softmax
from abricot_local.metrics import metric_items
from abricot_local.tasks.base import Reference
from abricot_local.errors import ResultsError, UsageError
from abricot_local.results import CHECKPOINT, RESULTS, SCHEMA_VERSION, load_results, read_jsonl, samples_name

FORMATS = ("table", "markdown", "csv", "json")
TABLES = ("all", "runs", "published", "quant")
EMPTY = {"published": "No run's registry entry reproduces a published result.",
         "quant": "No two runs share a base model at different quants."}
_QUANT_RE = re.compile(r"(?<![a-z0-9])(i?q[1-8](?:_[a-z0-9]+)*|bf16|f16|f32)(?![a-z0-9])", re.IGNORECASE)


@dataclass(frozen=True)
class Metric:
    task: str
    name: str
    value: float
    ci: tuple[float, float] | None

    @property
    def key(self) -> str:
        return f"{self.task}.{self.name}"


@dataclass(frozen=True)
class Run:
    """One finished run folder, with the model identity the comparisons use."""

    path: Path
    name: str  # results.json model.name (alias, file stem, or the fake label)
    alias: str | None
    backend: str
    base: str  # registry ``base``, else the name without its quant suffix
    quant: str  # registry ``quant``, else parsed from the name or file, else ""
    registry_alias: str | None
    reproduces: tuple[Reference, ...]
    task_n: tuple[tuple[str, int], ...]
    metrics: tuple[Metric, ...]
    results: dict = field(repr=False, compare=False)

    @property
    def label(self) -> str:
        return self.alias or self.name

    @property
    def synthetic(self) -> bool:
        """Numbers from a synthetic backend (the fake), not from a model."""
        return bool(self.results.get("provenance", {}).get("synthetic"))

    @property
    def source(self) -> str:
        return f"run ({self.backend} backend, not a model)" if self.synthetic else "run"

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.task_n)


@dataclass(frozen=True)
class RunCheck:
    run: Run
    check: pub.CICheck


@dataclass(frozen=True)
class QuantPair:
    """Two quants of one base model on one task, over the items both scored."""

    base: str
    task: str
    ref: Run  # the higher-precision quant: KL(ref || other)
    other: Run
    n_common: int
    agreement: float  # share of common items with the same pred
    kl_mean: float  # mean KL(ref || other) in nats between label distributions
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    runs: tuple[Run, ...]
    baselines: tuple[Reference, ...]
    checks: tuple[RunCheck, ...]
    quant: tuple[QuantPair, ...]


# -- loading ---------------------------------------------------------------------------------
def quant_of(text: str) -> str:
    """The last quant tag in a model name or file name ("...-Q4_K_M.gguf" -> "Q4_K_M")."""
    found = _QUANT_RE.findall(Path(text).name.removesuffix(".gguf"))
    return found[-1].upper() if found else ""


def strip_quant(name: str) -> str:
    """The name without its quant tag and the separators around it."""
    return _QUANT_RE.sub("", name).strip("-_. ") or name


def _match(model: dict, registry: dict) -> object | None:
    folded = {k.lower(): v for k, v in registry.items()}
    for key in (model.get("alias"), model.get("name")):
        if key and key.lower() in folded:
            return folded[key.lower()]
    sha, path = (model.get("sha256") or "").lower(), model.get("path")
    for spec in registry.values():
        if sha and spec.sha256 and spec.sha256[0].lower() == sha:
            return spec
        if path and Path(spec.file).name == Path(path).name:
            return spec
    return None


def load_run(folder: str | Path, registry: dict | None = None) -> Run:
    """A finished run folder; clean :class:`ResultsError` when it is missing or incomplete."""
    path = Path(folder)
    if not path.exists():
        raise ResultsError(f"run folder not found: {path}")
    if not path.is_dir():
        raise ResultsError(f"{path} is not a folder (give the --out folder of a run)")
    if not (path / RESULTS).exists() and (path / CHECKPOINT).exists():
        raise ResultsError(f"{path} holds an interrupted run (no {RESULTS}); finish it with `run ... --resume`")
    doc = load_results(path)
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ResultsError(f"{path / RESULTS}: schema_version {doc.get('schema_version')!r}, this version reads {SCHEMA_VERSION}")
    try:
        model, tasks = doc["model"], doc["tasks"]
        metrics, task_n = [], []
        for task, entry in tasks.items():
            task_n.append((task, int(entry["n"])))
            metrics += [Metric(task, name, value, ci) for name, value, ci in metric_items(entry["metrics"])]
        backend = doc.get("config", {}).get("backend") or doc.get("provenance", {}).get("backend", "")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultsError(f"{path / RESULTS} is malformed ({type(exc).__name__}: {exc})") from None
    spec = _match(model, registry or {})
    label = model.get("alias") or model.get("name") or path.name
    quant = (spec.quant if spec else "") or quant_of(label) or quant_of(model.get("path") or "")
    base = (spec.base if spec else "") or strip_quant(label)
    reproduces = pub.parse_reproduces(spec.reproduces)[0] if spec else ()
    return Run(path, model.get("name") or path.name, model.get("alias"), backend, base, quant,
               spec.name if spec else None, reproduces, tuple(task_n), tuple(metrics), doc)


def load_samples(run: Run, task: str) -> list[dict]:
    """The sample records of one task of a run, in item order."""
    entry = run.results["tasks"].get(task)
    if entry is None:
        raise ResultsError(f"{run.path} has no task {task!r}")
    path = run.path / entry.get("samples_file", samples_name(task))
    if not path.exists():
        raise ResultsError(f"{path} is missing (results.json names it)")
    return read_jsonl(path)


def build(folders, *, registry: dict | None = None) -> Report:
    """Load the runs (each folder once), check them against the published rows, compare quants."""
    if not folders:
        raise UsageError("give at least one run folder")
    runs, seen = [], set()
    for folder in folders:
        key = Path(folder).resolve()
        if key not in seen:
            seen.add(key)
            runs.append(load_run(folder, registry))
    shown = tuple(dict.fromkeys(t for r in runs for t in r.tasks))
    bases = pub.all_references(shown)
    checks = []
    for r in runs:
        for ref in r.reproduces:
            if ref.task in r.tasks:
                c = pub.check(ref, r.results["tasks"][ref.task])
                if r.synthetic:
                    c = replace(c, notes=(f"{r.backend} backend, not the model", *c.notes))
                checks.append(RunCheck(r, c))
    return Report(tuple(runs), bases, tuple(checks), tuple(compare_quants(runs)))


# -- quantization comparison -----------------------------------------------------------------
def _bits(quant: str) -> float:
    q = quant.upper()
    if q in ("F32", "F16", "BF16"):
        return float(q.lstrip("BF"))
    m = re.match(r"I?Q(\d+)", q)
    return float(m.group(1)) if m else -1.0


def label_kl(lp_ref, lp_other) -> float:
    """KL(p || q) in nats, p and q the softmax of two logprob vectors over the same choices."""
    a, b = log_softmax(lp_ref), log_softmax(lp_other)
    p = np.exp(a)
    with np.errstate(invalid="ignore"):
        terms = np.where(p > 0, p * (a - b), 0.0)
    return float(np.sum(terms))


def compare_pair(ref: Run, other: Run, task: str) -> QuantPair:
    """Agreement and mean KL of two runs on ``task`` over their common item ids."""
    a = {s["id"]: s for s in load_samples(ref, task)}
    b = {s["id"]: s for s in load_samples(other, task)}
    common = [i for i in a if i in b and len(a[i]["logprobs"]) == len(b[i]["logprobs"])]
    notes = []
    ta, tb = ref.results["tasks"][task], other.results["tasks"][task]
    diff = sorted(k for k in set(ta.get("config", {})) | set(tb.get("config", {}))
                  if ta.get("config", {}).get(k) != tb.get("config", {}).get(k))
    if diff:
        notes.append(f"task config differs: {', '.join(diff)}")
    changed = sum(1 for i in common if a[i].get("context") != b[i].get("context"))
    if changed:
        notes.append(f"prompts differ on {changed} item(s)")
    if not common:
        return QuantPair(ref.base, task, ref, other, 0, math.nan, math.nan, (*notes, "no common items"))
    agree = sum(a[i]["pred"] == b[i]["pred"] for i in common) / len(common)
    kl = float(np.mean([label_kl(a[i]["logprobs"], b[i]["logprobs"]) for i in common]))
    return QuantPair(ref.base, task, ref, other, len(common), agree, kl, tuple(notes))


def compare_quants(runs) -> list[QuantPair]:
    """Every pair of runs with the same base (case-insensitive) and different quants."""
    out = []
    for x, y in combinations(runs, 2):
        if x.base.lower() != y.base.lower() or x.quant.upper() == y.quant.upper():
            continue
        ref, other = (y, x) if _bits(y.quant) > _bits(x.quant) else (x, y)
        out.extend(compare_pair(ref, other, t) for t in ref.tasks if t in other.tasks)
    return out


# -- recomputation ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskCheck:
    task: str
    recorded: dict = field(compare=False)
    recomputed: dict = field(compare=False)
    mismatches: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _same(x, y) -> bool:
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, float) and isinstance(y, float) and x != x and y != y:
        return True
    return x == y


def recompute(out_dir: str | Path) -> tuple[TaskCheck, ...]:
    """Each task's metrics recomputed from its samples file by the task's ``metrics()``."""
    from abricot_local.tasks import all_task_names, make_task
    from abricot_local.tasks.base import TaskOptions

    run = load_run(out_dir)
    checks = []
    for task, entry in run.results["tasks"].items():
        if task not in all_task_names():
            raise ResultsError(f"{run.path}: unknown task {task!r} (written by another version?)")
        cfg = {**run.results.get("config", {}), **entry.get("config", {})}
        opts = TaskOptions.from_config(cfg)
        fresh = json.loads(json.dumps(make_task(task, opts).metrics(load_samples(run, task))))
        recorded = entry["metrics"]
        bad = tuple(k for k in sorted(set(recorded) | set(fresh)) if not _same(recorded.get(k), fresh.get(k)))
        checks.append(TaskCheck(task, recorded, fresh, bad))
    return tuple(checks)


# -- tables ----------------------------------------------------------------------------------
def _selected(key: str, patterns: tuple[str, ...]) -> bool:
    name = key.split(".", 1)[1]
    return not patterns or any(fnmatch.fnmatchcase(key, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


def metric_keys(report: Report, patterns: tuple[str, ...] = ()) -> list[str]:
    keys: list[str] = []
    for run in report.runs:
        keys.extend(m.key for m in run.metrics if m.key not in keys and _selected(m.key, patterns))
    return keys


def runs_frame(report: Report, patterns: tuple[str, ...] = ()) -> pd.DataFrame:
    """Runs then published rows; per metric its value and CI bounds, exactly as recorded."""
    keys = metric_keys(report, patterns)
    tasks = list(dict.fromkeys(k.split(".", 1)[0] for k in keys))
    rows = []
    for run in report.runs:
        row = {"model": run.label, "quant": run.quant, "source": run.source, "folder": str(run.path)}
        row.update({f"{t}.n": dict(run.task_n).get(t) for t in tasks})
        by_key = {m.key: m for m in run.metrics}
        for k in keys:
            m = by_key.get(k)
            row[k] = m.value if m else None
            row[f"{k}.ci_lo"], row[f"{k}.ci_hi"] = m.ci if m and m.ci else (None, None)
        rows.append(row)
    for model, source, values in pub.group_rows(report.baselines):
        row = {"model": model, "quant": "", "source": source, "folder": ""}
        row.update({k: values.get(k) for k in keys})
        rows.append(row)
    columns = ["model", "quant", "source", "folder", *(f"{t}.n" for t in tasks)]
    columns += [c for k in keys for c in (k, f"{k}.ci_lo", f"{k}.ci_hi")]
    df = pd.DataFrame(rows, columns=columns)
    return df.astype({f"{t}.n": "Int64" for t in tasks})


def _check_records(report: Report) -> list[dict]:
    return [{
        "model": rc.run.label, "quant": rc.run.quant, "folder": str(rc.run.path),
        "reference": rc.check.reference.model, "source": rc.check.reference.source, "task": rc.check.task,
        "metric": rc.check.reference.metric, "published": rc.check.published, "value": rc.check.value,
        "ci95": list(rc.check.ci) if rc.check.ci else None, "inside": rc.check.inside, "notes": list(rc.check.notes),
    } for rc in report.checks]


def published_frame(report: Report) -> pd.DataFrame:
    rows = [{**r, "ci_lo": (r["ci95"] or [None])[0], "ci_hi": (r["ci95"] or [None, None])[1],
             "notes": "; ".join(r["notes"])} for r in _check_records(report)]
    return pd.DataFrame(rows, columns=["model", "quant", "folder", "reference", "source", "task", "metric",
                                       "published", "value", "ci_lo", "ci_hi", "inside", "notes"])


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


def _cell(value, ci, digits: int = 3) -> str:
    if value is None:
        return ""
    return _num(value, digits) + (f" [{_num(ci[0])}, {_num(ci[1])}]" if ci else "")


def _text_frames(report: Report, patterns: tuple[str, ...]) -> dict[str, tuple[str, pd.DataFrame]]:
    keys = metric_keys(report, patterns)
    tasks = list(dict.fromkeys(k.split(".", 1)[0] for k in keys))
    rows = []
    for run in report.runs:
        by_key = {m.key: m for m in run.metrics}
        row = {"model": run.label, "quant": run.quant, "source": run.source}
        row.update({f"{t}.n": str(dict(run.task_n).get(t, "")) for t in tasks})
        row.update({k: _cell(by_key[k].value, by_key[k].ci) if k in by_key else "" for k in keys})
        rows.append({**row, "folder": str(run.path)})
    for model, source, values in pub.group_rows(report.baselines):
        row = {"model": model, "quant": "", "source": source, "folder": ""}
        row.update({k: _cell(values[k], None, 2) if k in values else "" for k in keys})
        rows.append(row)
    cols = ["model", "quant", "source", *(f"{t}.n" for t in tasks), *keys, "folder"]
    text = pd.DataFrame(rows, columns=cols).fillna("")
    unpublished = [t for t in tasks if t not in {b.task for b in report.baselines}]
    title = "Runs and published results (value [95% bootstrap CI])" if report.baselines else \
        "Runs (value [95% bootstrap CI]); no published results exist for these tasks"
    if report.baselines and unpublished:
        title += f"; none are published for {', '.join(unpublished)}"
    out = {"runs": (title, text)}
    if report.checks:
        wide: dict[tuple, dict] = {}
        for rc in report.checks:
            key = (rc.run.label, rc.run.quant, rc.check.reference.label, str(rc.run.path))
            row = wide.setdefault(key, {"model": key[0], "quant": key[1], "reference": key[2], "notes": []})
            row[f"{rc.check.task}.{rc.check.reference.metric}"] = rc.check.text
            row["notes"].extend(n for n in rc.check.notes if n not in row["notes"])
        rows = [{**r, "notes": "; ".join(r["notes"])} for r in wide.values()]
        checked = dict.fromkeys(f"{rc.check.task}.{rc.check.reference.metric}" for rc in report.checks)
        cols = ["model", "quant", "reference", *checked, "notes"]
        out["published"] = ("Published value inside the run's 95% CI?", pd.DataFrame(rows, columns=cols).fillna(""))
    if report.quant:
        q = quant_frame(report)
        q["agreement"] = q["agreement"].map(_num)
        q["kl_mean"] = q["kl_mean"].map(lambda v: _num(v, 4))
        q = q.rename(columns={"kl_mean": "mean KL(ref||other)"}).drop(columns=["ref_folder", "other_folder"])
        out["quant"] = ("Quantization comparison (same base, different quants; common items)", q)
    return out


def _grid(df: pd.DataFrame, markdown: bool) -> str:
    cols = [str(c) for c in df.columns]
    rows = [[str(v) for v in r] for r in df.itertuples(index=False)]
    if markdown:
        esc = lambda s: s.replace("|", "\\|")  # noqa: E731
        lines = ["| " + " | ".join(esc(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
        return "\n".join(lines + ["| " + " | ".join(esc(v) for v in r) + " |" for r in rows])
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(cols)]
    fmt = lambda r: "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(cols), "  ".join("-" * w for w in widths), *(fmt(r) for r in rows)])


def to_json(report: Report) -> dict:
    """The whole report as plain data (metrics copied from results.json unchanged)."""
    return {
        "schema_version": 1,
        "runs": [{
            "folder": str(r.path), "model": r.label, "name": r.name, "alias": r.alias, "backend": r.backend,
            "quant": r.quant, "base": r.base, "registry_alias": r.registry_alias,
            "reproduces": [dict(t) for t in dict.fromkeys(
                (("model", b.model), ("source", b.source)) for b in r.reproduces)],
            "tasks": {t: {"n": e["n"], "metrics": e["metrics"]} for t, e in r.results["tasks"].items()},
        } for r in report.runs],
        "baselines": [{"model": model, "source": source, "values": values}
                      for model, source, values in pub.group_rows(report.baselines)],
        "published_checks": _check_records(report),
        "quant_comparison": [{**row, "notes": list(q.notes)}
                             for row, q in zip(quant_frame(report).to_dict("records"), report.quant)],
    }


def render(report: Report, fmt: str = "table", *, table: str = "all", metrics: tuple[str, ...] = ()) -> str:
    """The report as text: ``table`` (aligned), ``markdown``, ``csv`` or ``json``."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if table not in TABLES:
        raise UsageError(f"unknown table {table!r}; choose from {', '.join(TABLES)}")
    if fmt == "json":
        doc = to_json(report)
        keep = {"runs": ("runs", "baselines"), "published": ("published_checks",), "quant": ("quant_comparison",)}
        doc = doc if table == "all" else {k: doc[k] for k in ("schema_version", *keep[table])}
        return json.dumps(doc, indent=2, ensure_ascii=False)
    if fmt == "csv":
        frames = {"runs": runs_frame(report, metrics), "published": published_frame(report),
                  "quant": quant_frame(report)}
        # one plain table a CSV reader loads as is: "all" means the runs table here
        return frames["runs" if table == "all" else table].to_csv(index=False).rstrip("\n")
    sections = _text_frames(report, metrics)
    if table != "all" and table not in sections:
        return EMPTY[table]
    chosen = list(sections.values()) if table == "all" else [sections[table]]
    head = "### {}" if fmt == "markdown" else "{}"
    return "\n\n".join(f"{head.format(title)}\n\n{_grid(df, fmt == 'markdown')}" for title, df in chosen)
