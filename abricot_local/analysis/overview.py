"""What `report` makes of finished runs (runs.Run): their published checks and quantization pairs
(:class:`Report`), with a ``--until-settled`` run's own verdict on a row its rule judged (settled.py), the
recomputation of recorded metrics from the samples (:func:`recompute`, `report
--verify` and `check`), and the metrics a report shows.

Pure: reads runs, returns frozen dataclasses; nothing is printed. ``report/tables.py`` makes tables of them.
"""

from __future__ import annotations

import fnmatch
import json
import math
from dataclasses import dataclass, field, replace
from itertools import combinations
from pathlib import Path
from typing import Sequence

import numpy as np

from abricot_local.analysis import baselines as pub
from abricot_local.analysis.baselines import VerdictTask, reproduced_tasks  # (here too: run/held.py's)
from abricot_local.analysis.ladder import notes as ladder_notes
from abricot_local.analysis.ladder import quant_groups
from abricot_local.analysis.settled import SettledVerdict, qualifying, settled_verdict
from abricot_local.analysis.population import NOTHING_GIVEN, GivenData
from abricot_local.analysis.runs import Run, labelled, options_of
from abricot_local.gguf.file import highest_precision
from abricot_local.analysis.stats import label_kl
from abricot_local.errors import ResultsError, UsageError
from abricot_local.models.quants import precision_of
from abricot_local.paths import once_each
from abricot_local.record import Published, PublishedCheck, Record
from abricot_local.record import settings as recorded
from abricot_local.tasks.base import Reference


@dataclass(frozen=True)
class RunCheck:
    """A published row against a run, as the run recorded it (results.json's ``published.checks``); ``settled``:
    the run's ``--until-settled`` rule's verdict on it, the run's verdict (None: no rule judged the row); ``warnings``:
    what the run recorded of the row's task that qualifies its verdict (settled.qualifying)."""

    run: Run
    check: PublishedCheck
    settled: SettledVerdict | None = None
    warnings: tuple[str, ...] = ()


def run_checks(run: Run) -> tuple[PublishedCheck, ...]:
    """The published checks of a run: those its record holds (the verdict made when it ran), else, for
    a run that recorded none, its registry entry's rows (``--models``) against its CIs, with no verdict."""
    published = run.record.published
    if published is not None and (published.reproduces or published.checks):
        return published.checks
    found = (pub.check_run(ref, run.record.tasks) for ref in run.reproduces)
    return tuple(c.to_record() for c in found if c is not None)


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
    ladder: str = ""  # both runs' folder where a quant of the base was run twice on the task (ladder.quant_groups)

    @property
    def base_cell(self) -> str:
        """The quant tables' ``base`` cell (text and HTML): the base, with the runs' folder where it is one folder's
        pair (``ladder``), as its ladder's rows name it."""
        return f"{self.base} ({self.ladder})" if self.ladder else self.base


@dataclass(frozen=True)
class Report:
    runs: tuple[Run, ...]
    baselines: tuple[Reference, ...]
    checks: tuple[RunCheck, ...]
    quant: tuple[QuantPair, ...]
    given: GivenData = NOTHING_GIVEN  # the data the user gave (report --data/--data-dir): a task's N where the
    # runs' recorded files are not here, for the report's comparisons (the quant ladder, the page's pairs)


def gather(runs: Sequence[Run], given: GivenData = NOTHING_GIVEN) -> Report:
    """The report of finished runs (each once, by its path): labelled, checked against the published
    rows, quants compared; ``given``: where its comparisons count a task's N when the runs' data is elsewhere."""
    if not runs:
        raise UsageError("give at least one run folder")
    runs = labelled(once_each(runs, lambda r: r.folder))
    shown = tuple(dict.fromkeys(t for r in runs for t in r.tasks))
    bases = pub.all_references(shown, strict=False)  # a broken plugin's runs: their recorded rows, as uninstalled
    checks = []
    for r in runs:
        for c in run_checks(r):
            if r.synthetic:
                c = replace(c, notes=tuple(dict.fromkeys((f"{r.backend} backend, not the model", *c.notes))))
            checks.append(RunCheck(r, c, settled_verdict(r.record, c), qualifying(r.record, c)))
    return Report(tuple(runs), bases, tuple(checks), tuple(compare_quants(runs)), given)


# -- quantization comparison -----------------------------------------------------------------
def compare_pair(ref: Run, other: Run, task: str) -> QuantPair:
    """Agreement and mean KL of two runs on ``task`` over their common item ids."""
    a = {s.id: s for s in ref.samples_of(task)}
    b = {s.id: s for s in other.samples_of(task)}
    common = [i for i in a if i in b and len(a[i].logprobs) == len(b[i].logprobs)]
    notes = []
    ca, cb = ref.record.tasks[task].config, other.record.tasks[task].config  # a task's own settings (JSON)
    diff = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
    if diff:
        notes.append(f"task config differs: {', '.join(diff)}")
    changed = sum(1 for i in common if a[i].context != b[i].context)
    if changed:
        notes.append(f"prompts differ on {changed} item(s)")
    if not common:
        return QuantPair(ref.base, task, ref, other, 0, math.nan, math.nan, (*notes, "no common items"))
    agree = sum(a[i].pred == b[i].pred for i in common) / len(common)
    kl = float(np.mean([label_kl(a[i].logprobs, b[i].logprobs) for i in common]))
    return QuantPair(ref.base, task, ref, other, len(common), agree, kl, tuple(notes))


def no_pairs(runs) -> tuple[str, ...]:
    """What the quant comparison says with no pair (text and HTML): that no two runs share a base at different quants,
    or, where the quant ladders left runs out, that no two of one base at different quants are one folder's, then the
    ladders' notes saying why (analysis.ladder.notes: the one grouping, ladder.quant_groups)."""
    if not (left := ladder_notes(runs)):
        return ("No two runs share a base model at different quants.",)
    return ("No pair of runs of one base at different quants holds a task within one folder (the quant ladder's notes "
            "say why).", *left)


def compare_quants(runs) -> list[QuantPair]:
    """Every pair of runs with the same base (case-insensitive) and different quants, on each task both hold, in one
    group of the quant ladders' (ladder.quant_groups, their own rule): where a quant was run twice, the runs of each
    folder holding several (a sweep's ``--out``) are paired among themselves only (``ladder``: that folder), never
    with another folder's; the runs alone in their folder (given one by one) among themselves, as always."""
    where: dict[tuple[str, int], str] = {}  # (task, the run's id): its group ("": the base's one, or its lone runs)
    for base in dict.fromkeys(r.base.lower() for r in runs):
        of = [r for r in runs if r.base.lower() == base]
        for task in dict.fromkeys(t for r in of for t in r.tasks):
            for w, part in quant_groups([r for r in of if task in r.tasks]).items():
                where.update({(task, id(r)): w if len(part) > 1 else "" for r in part})
    out = []
    for x, y in combinations(runs, 2):
        if x.base.lower() != y.base.lower() or x.quant.upper() == y.quant.upper():
            continue
        ref, other = (y, x) if highest_precision([precision_of(x), precision_of(y)]) else (x, y)
        out.extend(replace(compare_pair(ref, other, t), ladder=where[t, id(x)]) for t in ref.tasks
                   if t in other.tasks and where[t, id(x)] == where[t, id(y)])
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


def recompute_entry(record: Record, task: str, samples, where: Path | str) -> TaskCheck:
    """One task's metrics and ``n`` recomputed from ``samples`` (its Sample lines) by the task's
    ``metrics()``, against the record's; a mismatch names the metric (or ``n``)."""
    from abricot_local.analysis.runs import unknown_task
    from abricot_local.tasks import make_task

    entry = record.tasks[task]
    if (err := unknown_task(task, entry, where, record.provenance.abricot_local if record.provenance else None)):
        raise err
    try:
        fresh = json.loads(json.dumps(make_task(task, options_of(record, task, where)).metrics(list(samples))))
    except KeyError as exc:  # another task's samples (DISCOTEX's metrics read `class`): one line, no traceback
        raise ResultsError(f"{where}: the samples of task {task} lack its field {exc.args[0]!r}: the file holds "
                           "another task's samples, or was changed") from None
    recorded_values = {**entry.metrics, "n": entry.n}
    fresh["n"] = len(samples)
    bad = tuple(k for k in sorted(set(recorded_values) | set(fresh))
                if not _same(recorded_values.get(k), fresh.get(k)))
    return TaskCheck(task, recorded_values, fresh, bad)


def recompute(run: Run) -> tuple[TaskCheck, ...]:
    """Each task's metrics recomputed from its samples by the task's ``metrics()``."""
    return tuple(recompute_entry(run.record, task, run.samples_of(task), run.folder) for task in run.record.tasks)


def holds_verdict(run: Run) -> bool:
    """Whether the run recorded a published verdict that :func:`verdict_differences` makes again."""
    rec = run.record.published
    return rec is not None and bool(rec.reproduces) and not run.lm_eval


def verdict_differences(run: Run) -> tuple[str, ...]:
    """The published block made again from the recorded metrics, the published rows the record's
    ``reproduces`` names and the samples' 90% intervals (each task's N: baselines.items_total, the task's data
    not read here), against the recorded one (:func:`published_differences`)."""
    if not holds_verdict(run):
        return ()
    rec = run.record.published
    wanted = reproduced_tasks(rec.reproduces)
    tasks = [VerdictTask(t.name, t.instance(), tuple(t.samples))
             for t in run.run_tasks if pub.base_name(t.name) in wanted and t.entry is not None]
    return published_differences(run.record, rec.reproduces, tasks)


def published_differences(record: Record, reproduces: str, tasks: Sequence[VerdictTask], *,
                          block: bool = False) -> tuple[str, ...]:
    """The published block made again (baselines.rejudge, as the run made it: each task's N by its one rule) from
    ``reproduces`` (the published rows the run is held to), the record's metrics and each of ``tasks``' samples'
    90% intervals, against the recorded one (none:
    an empty block): each field of a check that differs, as "published.checks[K] (MODEL, TASK.METRIC) FIELD:
    recorded X, made again Y" (a run recorded before verdicts existed, or by another method, is held to its
    other fields); ``block``: the block's ``reproduces``, ``tasks_not_run`` and ``unknown`` too (`check`'s).
    `report --verify` (:func:`verdict_differences`) and `check` (run/held.py) make it again."""
    rec = record.published or Published()
    fresh = pub.rejudge(reproduces, record.tasks, tasks, rec.margin, drawn=record.config.limit is None,
                        recorded=record.published)
    out = []
    if block and (rec.reproduces or "") != (fresh.reproduces or ""):
        out.append(f"published.reproduces: recorded {_shown(rec.reproduces)}, the model's registry entry says "
                   f"{_shown(fresh.reproduces)}")
    for name in ("tasks_not_run", "unknown") if block else ():
        if list(getattr(rec, name)) != list(getattr(fresh, name)):
            out.append(f"published.{name}: recorded {_shown(list(getattr(rec, name)))}, made again "
                       f"{_shown(list(getattr(fresh, name)))}")
    if len(rec.checks) != len(fresh.checks):
        out.append(f"published.checks: recorded {len(rec.checks)}, made again {len(fresh.checks)}")
    for k, (a, b) in enumerate(zip(rec.checks, fresh.checks)):
        where = f"published.checks[{k}] ({b.reference}, {b.task}.{b.metric})"
        for d in recorded.differences(a, b, depth=1, same=recorded.close):
            if (a.verdict is None or rec.method != fresh.method) and d.key in VERDICT_FIELDS:
                continue  # a run of a version before the verdict, or of another method: its other fields are held
            out.append(f"{where} {d.key}: recorded {_shown(d.a)}, made again {_shown(d.b)}")
    return tuple(out)


VERDICT_FIELDS = ("verdict", "margin", "ci90", "n", "items_total", "items_to_settle", "settles", "reasons")


def _shown(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 70 else text[:67] + "..."


# -- metric selection --------------------------------------------------------------------------
def _selected(key: str, patterns: tuple[str, ...]) -> bool:
    name = key.split(".", 1)[1]
    return not patterns or any(fnmatch.fnmatchcase(key, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


def metric_keys(report: Report, patterns: tuple[str, ...] = ()) -> list[str]:
    keys: list[str] = []
    for run in report.runs:
        keys.extend(m.key for m in run.metric_values if m.key not in keys and _selected(m.key, patterns))
    return keys


def unmatched(report: Report, patterns: tuple[str, ...]) -> list[str]:
    """The ``patterns`` (``report --metrics``) that select no metric of the report's runs."""
    keys = metric_keys(report)
    return [p for p in patterns if not any(_selected(k, (p,)) for k in keys)]

