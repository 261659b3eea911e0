"""Paired comparisons of finished runs, item by item.

Each task is compared among the runs that have it (matching.py), over the items all of those runs
scored with the same id and the same scored context (SHA-256 of the sample's ``context``), in id
order, so the numbers depend neither on item order nor on sharding (``by_id``: on the id alone, the same
item under two contexts, said in the notes and every verdict); a task one run recorded under
another key (another prompt-variant spelling, an lm-eval output) is paired by the same items
(alignment.py). For each pair of runs that share a task, each CI metric the task declares
(``Task.metric_inputs``) is compared over the items both runs scored alike (runs of different items: each pair
its own; the best group over those common to all, said in a note): the paired difference with Tango's score
interval and McNemar's exact test (accuracy) or a paired-bootstrap CI and Williams' t (correlations,
when both runs share the gold vector); p-values are Holm-adjusted over the pairs of each task and metric
(a pair's verdict: over its tasks too). The runs' predictions and log-probs are compared too (agreement,
|delta log-prob|, KL), every recorded setting that differs is named (differing.py), each pair gets one
verdict, and each run one with a margin against its reference on each task (equivalence.py, over the
task's N items: population.py). Pure: reads finished runs (runs.Run), returns frozen dataclasses;
report/comparison.py writes the text."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any, Mapping, Sequence

import numpy as np

from abricot_local.analysis import stats
from abricot_local.analysis.changes import NEAR_TIE, OTHER_CONTEXTS, AnswerChanges, changed_answers, compared
from abricot_local.analysis.differing import SettingDiff, differing_settings
from abricot_local.analysis.equivalence import Equivalence, judge, references
from abricot_local.analysis.reproduction import checked_margin
from abricot_local.analysis.matching import (CONTEXT, ID, TaskMatch, absent_notes, by_id_note, by_id_words,
                                            compared_runs, match, n_other_context, no_common_note, not_paired,
                                            own_items_note, pair_items, refusal, spread, taking_part, task_references)
from abricot_local.analysis.paired_notes import ci_against_test, few_off
from abricot_local.analysis.population import NOTHING_GIVEN, GivenData, task_count
from abricot_local.analysis.runs import Run
from abricot_local.core import DEFAULT_SEED, MAX_SEED
from abricot_local.errors import ResultsError, UsageError, opt
from abricot_local.metrics import ROW_STATS, require_finite
from abricot_local.record import Sample

TOLERANCE = 1e-3  # nats: "numerically close" when every |delta log-prob| is within it
IDENTICAL, CLOSE, CANNOT_TELL, DIFFERENT, UNTESTED = (
    "identical", "numerically close", "cannot tell apart", "different", "not comparable")


@dataclass(frozen=True)
class MetricComparison:
    task: str
    metric: str
    stat: str
    a: str
    b: str
    n: int
    value_a: float  # over the common items (may differ from results.json's value)
    value_b: float
    diff: float  # value_a - value_b
    ci: tuple[float, float]  # 95% CI of diff: Tango's score interval (accuracy), else the paired bootstrap's
    test: str  # "McNemar exact", "Williams t", or "" (not tested: see note)
    statistic: float
    p: float
    p_holm: float = math.nan
    mdd: float | None = None  # accuracy: the smallest difference these items detect (80%, 5%)
    detail: tuple[tuple[str, Any], ...] = ()
    note: str = ""
    ci90: tuple[float, float] = (math.nan, math.nan)  # the same method's 90% interval (equivalence.py)


@dataclass(frozen=True)
class Agreement:
    task: str
    a: str
    b: str
    n: int
    same_pred: float  # share of common items with the same prediction
    max_abs_delta: float  # max |delta log-prob| over every choice of every common item (nats)
    mean_abs_delta: float
    mean_kl: float  # mean KL(a || b) between the normalised choice distributions (nats)
    identical: bool  # every log-prob bit-equal
    n_shape_differs: int = 0  # common items whose choice counts differ (left out)


@dataclass(frozen=True)
class BestGroup:
    task: str
    metric: str
    best: str
    members: tuple[str, ...]  # not distinguishable from the best (Holm-adjusted p >= alpha)


@dataclass(frozen=True)
class TaskPower:
    """What a pair's common items of a task can detect: the ``detectable`` of its paired
    differences table (the task's main accuracy metric), the same number in the same unit."""

    task: str
    metric: str
    a: str
    b: str
    n: int
    detectable: float  # the smallest accuracy difference these items detect (80% power, 5% two-sided)


@dataclass(frozen=True)
class Verdict:
    a: str
    b: str
    kind: str
    reason: str
    p: float | None = None

    @property
    def line(self) -> str:
        return f"{self.a} vs {self.b}: {self.kind} ({self.reason})"


@dataclass(frozen=True)
class Comparison:
    runs: tuple[Run, ...]
    matches: tuple[TaskMatch, ...]
    metrics: tuple[MetricComparison, ...]
    agreements: tuple[Agreement, ...]
    differs: tuple[SettingDiff, ...]
    groups: tuple[BestGroup, ...]
    power: tuple[TaskPower, ...]
    verdicts: tuple[Verdict, ...]
    notes: tuple[str, ...]
    tolerance: float
    alpha: float
    seed: int
    n_boot: int
    primary: tuple[tuple[str, str], ...] = ()  # (task, its primary metric): what a verdict looks at first
    equivalence: tuple[Equivalence, ...] = ()  # each run against its reference, per metric, with a margin
    changes: tuple[AnswerChanges, ...] = ()  # per pair and task: the answers that changed, near ties or decisive
    margin: float | None = None  # --margin (None: each task's per metric)
    near_tie: float = NEAR_TIE
    totals: Mapping[str, int | None] = field(default_factory=dict)  # per task, its items (population.py; None: unknown)
    paired_on: str = CONTEXT  # matching.CONTEXT: same id and scored context; matching.ID: the id alone (by_id)


# -- comparing -------------------------------------------------------------------------------
def agreement(task: str, a: Run, b: Run, sa: Sequence[Sample], sb: Sequence[Sample]) -> Agreement:
    """Predictions and log-probs of two runs over the same items (choice counts must agree)."""
    pairs = [(np.asarray(x.logprobs, float), np.asarray(y.logprobs, float))
             for x, y in zip(sa, sb) if len(x.logprobs) == len(y.logprobs)]
    n = len(sa)
    if not pairs:
        return Agreement(task, a.label, b.label, n, math.nan, math.nan, math.nan, math.nan, False, n)
    deltas = np.concatenate([np.abs(x - y) for x, y in pairs])
    agree = float(np.mean([x.pred == y.pred for x, y in zip(sa, sb)]))
    kl = float(np.mean([stats.label_kl(x, y) for x, y in pairs]))
    same = len(pairs) == n and all(np.array_equal(x, y) for x, y in pairs)
    return Agreement(task, a.label, b.label, n, agree, float(deltas.max()), float(deltas.mean()), kl, same,
                     n - len(pairs))


def compare_metric(task: str, a: str, b: str, ia, ib, *, seed: int, n_boot: int) -> MetricComparison:
    """One metric of two runs over the same items (their MetricInputs, in the same order): an accuracy's
    difference with Tango's score interval and McNemar's test; a correlation's with the paired
    bootstrap (no interval when the difference is the same in every resample, nor below 10 items off a side's most
    common value: paired_notes.few_off, the rule of a run's own CI) and Williams' t."""
    n = len(ia.x)
    if ia.stat == "accuracy":
        ca, cb = np.asarray(ia.x) == np.asarray(ia.y), np.asarray(ib.x) == np.asarray(ib.y)
        mc = stats.mcnemar_exact(ca, cb)
        va, vb = (float(np.mean(ca)), float(np.mean(cb))) if n else (math.nan, math.nan)
        mdd = stats.min_detectable_difference(n, mc.discordant / n if n else 0.0)
        ci = stats.paired_score_ci(mc.a_only, mc.b_only, n)
        return MetricComparison(task, ia.name, ia.stat, a, b, n, va, vb, (mc.a_only - mc.b_only) / n if n else math.nan,
                                ci, "McNemar exact", float(mc.a_only),
                                mc.p, mdd=mdd, detail=(("a_only", mc.a_only), ("b_only", mc.b_only),
                                                       ("mid_p", mc.mid_p)),
                                note=ci_against_test(ci, mc.p, "McNemar exact", "Tango's score interval"),
                                ci90=stats.paired_score_ci(mc.a_only, mc.b_only, n, level=0.90))
    row = ROW_STATS[ia.stat]
    boot = stats.paired_bootstrap(row, ia.x, ia.y, ib.x, ib.y, seed=seed, n_boot=n_boot)
    few = few_off(ia, ib)  # the 10-answer rule of a run's own CI: its interval not read, the test made
    flat = f"the difference is the same in every resample (the same ratings on these {n} items)" \
        if boot.ci90[0] == boot.ci90[1] else ""  # why it has no interval, said once where it is shown
    base = dict(task=task, metric=ia.name, stat=ia.stat, a=a, b=b, n=n, value_a=boot.a, value_b=boot.b,
                diff=boot.diff, ci=(math.nan,) * 2 if flat or few else boot.ci,
                ci90=(math.nan,) * 2 if flat or few else boot.ci90)
    if not np.array_equal(np.asarray(ia.y, float), np.asarray(ib.y, float)):
        return MetricComparison(**{**base, "diff": math.nan, "ci": (math.nan,) * 2, "ci90": (math.nan,) * 2}, test="",
                                statistic=math.nan, p=math.nan,
                                note="the gold vectors differ over the common items: not compared")
    r_ab = float(row(np.asarray(ia.x, float), np.asarray(ib.x, float))) if n >= 2 else math.nan
    w = stats.williams_t(boot.a, boot.b, r_ab, n)
    z = stats.steiger_z(boot.a, boot.b, r_ab, n)
    note = flat or ("undefined (a constant vector or too few items): not tested" if math.isnan(w.p) else
                    few or ci_against_test(base["ci"], w.p, "Williams t", "the paired bootstrap's percentiles"))
    return MetricComparison(**base, test="Williams t", statistic=w.statistic, p=w.p, note=note,
                            detail=(("r_ab", r_ab), ("df", w.df), ("steiger_z", z.statistic), ("steiger_p", z.p),
                                    ("changed", int(np.sum(np.asarray(ia.x, float) != np.asarray(ib.x, float))))))


def _inputs(run: Run, task: str, samples: Sequence[Sample]):
    t = run.task(task).instance()  # (a task not registered here: the plugin its run recorded, named)
    return t, {m.name: m for m in t.metric_inputs(samples)}


def _power(metrics: Sequence[MetricComparison], primary: dict) -> tuple[TaskPower, ...]:
    """Per pair and task, the detectable difference of its main metric when that is an
    accuracy, else of its first accuracy metric: the very figure of the differences table."""
    out: dict[tuple, TaskPower] = {}
    for m in metrics:
        key = (m.a, m.b, m.task)
        if m.mdd is not None and (key not in out or m.metric == primary.get(m.task) != out[key].metric):
            out[key] = TaskPower(m.task, m.metric, m.a, m.b, m.n, m.mdd)
    return tuple(out.values())


def compare(runs: Sequence[Run], *, tolerance: float = TOLERANCE, alpha: float = stats.ALPHA,
            seed: int = DEFAULT_SEED, n_boot: int = stats.N_BOOT, margin: float | None = None,
            reference: str | None = None, near_tie: float = NEAR_TIE, given: GivenData = NOTHING_GIVEN,
            by_id: bool = False) -> Comparison:
    """Every pair of ``runs`` that share a task compared on it, over the items both scored alike, when the task has
    an item all its runs scored alike (matching.py; refused only when no two runs share an item). ``alpha``: the
    level of the verdicts and the best group (the power figures stay at 5% / 80%); ``margin``
    (else each task's per metric) and ``reference`` (a label or folder, else equivalence.references'
    default among each task's runs): the equivalence verdicts, over each task's N (population.py; ``given``: the data
    a user gave, where it is counted when the runs' recorded files are not here); ``near_tie``: nats, changes.py's
    threshold; ``by_id``: items paired on their id alone (matching.py), each pair one item under two contexts
    (another seed, prompt variant...), the notes and each verdict saying on how many the context differs."""
    if len(runs) < 2:
        raise UsageError("compare needs at least two runs")
    if not 0 <= tolerance < math.inf:  # NaN fails too
        raise UsageError(f"{opt('tolerance')} must be a finite number of nats, 0 or more, got {tolerance}")
    margin = None if margin is None else checked_margin(margin)
    if not 0 <= near_tie < math.inf:
        raise UsageError(f"{opt('near_tie')} must be a finite number of nats, 0 or more, got {near_tie}")
    if not 0 <= seed <= MAX_SEED:
        raise UsageError(f"{opt('seed')} must be between 0 and {MAX_SEED}, got {seed}")
    runs, aligned = compared_runs(runs, by_id)  # labelled over what they compare; instances under other keys paired
    named = references(runs, reference)[0][1] if reference is not None else None  # checked against every run
    for r in runs:  # a NaN log-prob compares as nothing: refused, never "cannot tell apart"
        for t in r.run_tasks:
            try:
                require_finite(list(t.samples), t.name)
            except ResultsError as err:
                raise ResultsError(f"run {r.label} ({r.path}): {err}") from None
    tasks = taking_part(runs)  # each task among the runs that have it (matching.py)
    notes = aligned + absent_notes(runs, tasks)
    matches, metrics, agreements, primary, margins, changes, refs, size = [], [], [], {}, {}, [], {}, {}
    side: list[MetricComparison] = []  # each pair over its task's items common to all its runs: the best groups'
    moved: dict[tuple[str, str], int] = {}  # by_id: per pair, its common items scored under another context
    for task, members in tasks:
        if len(members) < 2:
            continue
        group = [runs[k] for k in members]
        m, per_run = match(group, task, by_id)
        matches.append(spread(m, members, len(runs)))
        if not m.n_common:
            notes.append(no_common_note(runs, m, members, by_id))
            continue
        notes += [by_id_note(m)] if by_id else []
        size[task], refs[task] = len(group), task_references(group, named, task, notes)
        built = [_inputs(r, task, s) for r, s in zip(group, per_run)]
        primary[task] = built[0][0].primary_metric
        margins.update({(task, name): built[0][0].margin(name) for name in built[0][1]})
        wider = []  # the pairs whose own common items are more than the task's common ones: (a, b, n)
        for i, j in combinations(range(len(group)), 2):
            xi, xj, wide = pair_items(group, i, j, task, by_id, m, per_run)  # the items both scored alike
            xs = {i: xi, j: xj}
            ins = {k: _inputs(group[k], task, xs[k])[1] if wide else built[k][1] for k in (i, j)}
            wider += [(group[i].label, group[j].label, len(xs[i]))] if wide else []
            agreements.append(agreement(task, group[i], group[j], xs[i], xs[j]))
            other = by_id and n_other_context(xs[i], xs[j])
            if by_id:
                key = (group[i].label, group[j].label)
                moved[key] = moved.get(key, 0) + other
            r, o = (j, i) if (group[i].label, group[j].label) in refs[task] else (i, j)  # the reference first
            changes.append(changed_answers(task, group[r].label, group[o].label, xs[r], xs[o], near_tie,
                                           what=OTHER_CONTEXTS if other else compared(group[r], group[o])))
            for name, ia in ins[i].items():
                if name in ins[j]:
                    metrics.append(compare_metric(task, group[i].label, group[j].label, ia, ins[j][name],
                                                  seed=seed, n_boot=n_boot))
                    if name in built[i][1] and name in built[j][1]:  # the best group's: over the task's common items
                        side.append(compare_metric(
                            task, group[i].label, group[j].label, built[i][1][name], built[j][1][name],
                            seed=seed, n_boot=n_boot) if wide else metrics[-1])
        notes += [own_items_note(task, m.n_common, len(group), wider)] if wider else []
    if not agreements:
        raise refusal(runs, tasks, by_id)
    counts = {t: task_count(runs, t, given) for t in size}
    totals, notes = {t: n for t, (n, _) in counts.items()}, notes + [w for _, w in counts.values() if w]
    same = {(g.a, g.b, g.task) for g in agreements if g.identical}
    metrics = _holm(metrics)
    labels = [r.label for r in runs]
    paired = {(g.a, g.b) for g in agreements}  # only runs sharing a compared task are paired
    notes += not_paired(runs, paired)
    power = _power(metrics, primary)
    verdicts = tuple(verdict(a, b, metrics, agreements, primary, tolerance, alpha)
                     for a, b in combinations(labels, 2) if (a, b) in paired)
    if by_id:  # every verdict says it: no one reads it as two runs on the same prompts
        n = {(v.a, v.b): sum(g.n for g in agreements if (g.a, g.b) == (v.a, v.b)) for v in verdicts}
        verdicts = tuple(replace(v, reason=f"{by_id_words(moved[(v.a, v.b)], n[(v.a, v.b)])}; {v.reason}")
                         for v in verdicts)
    differs = tuple(d for x, y in combinations(runs, 2) if (x.label, y.label) in paired
                    for d in differing_settings(x, y))
    groups = tuple(g for g in best_groups(labels, _holm(side), alpha) if size[g.task] > 2)
    index = {lab: k for k, lab in enumerate(labels)}
    judged = sorted((e for t in size for e in judge([m for m in metrics if m.task == t], refs[t], margins, margin,
                                                       totals=totals, identical=same)),
                    key=lambda e: (index[e.other], index[e.reference]))  # a run and its references, in order
    return Comparison(tuple(runs), tuple(matches), tuple(metrics), tuple(agreements), differs, groups, power,
                      verdicts, tuple(notes), tolerance, alpha, seed, n_boot, tuple(primary.items()),
                      tuple(judged), tuple(changes), margin, near_tie, totals, ID if by_id else CONTEXT)


def _holm(metrics: list[MetricComparison]) -> list[MetricComparison]:
    """Holm over the pairs of runs, separately for each task and metric."""
    families: dict[tuple[str, str], list[int]] = {}
    for k, m in enumerate(metrics):
        families.setdefault((m.task, m.metric), []).append(k)
    out = list(metrics)
    for members in families.values():
        for k, p in zip(members, stats.holm([metrics[k].p for k in members])):
            out[k] = replace(metrics[k], p_holm=p)
    return out


def best_groups(labels: Sequence[str], metrics: Sequence[MetricComparison], alpha: float) -> tuple[BestGroup, ...]:
    """Per task and metric, the best run and the runs not distinguishable from it."""
    out = []
    index = {lab: k for k, lab in enumerate(labels)}
    for task, metric in dict.fromkeys((m.task, m.metric) for m in metrics):
        rows = [m for m in metrics if (m.task, m.metric) == (task, metric)]
        values = [math.nan] * len(labels)
        p = {}
        for m in rows:
            values[index[m.a]], values[index[m.b]] = m.value_a, m.value_b
            p[(index[m.a], index[m.b])] = m.p_holm
        best, members = stats.best_group(values, p, alpha)
        if best is not None:
            out.append(BestGroup(task, metric, labels[best], tuple(labels[k] for k in members)))
    return tuple(out)


def _fmt(v: float) -> str:
    return "nan" if v != v else f"{v:+.4f}" if abs(v) >= 1e-4 or v == 0 else f"{v:+.2e}"


def deciding(a: str, b: str, task: str, metrics: Sequence[MetricComparison],
             primary: Mapping[str, str]) -> MetricComparison | None:
    """The comparison a verdict reads for a pair on a task: its primary metric's, else the first
    tested one's (None: no metric of the task was tested)."""
    rows = [m for m in metrics if (m.task, m.a, m.b) == (task, a, b) and not math.isnan(m.p_holm)]
    rows.sort(key=lambda m: m.metric != primary.get(task))
    return rows[0] if rows else None


def verdict(a: str, b: str, metrics: Sequence[MetricComparison], agreements: Sequence[Agreement],
            primary: Mapping[str, str], tolerance: float, alpha: float) -> Verdict:
    """identical (every log-prob bit-equal) > numerically close (same predictions, every
    |delta log-prob| <= tolerance) > different (some task's primary metric, else its first
    tested one, has a p < alpha Holm-adjusted over the pairs and the tasks) > cannot tell apart."""
    ags = [g for g in agreements if (g.a, g.b) == (a, b)]
    n = sum(g.n for g in ags)
    if ags and all(g.identical for g in ags):
        return Verdict(a, b, IDENTICAL, f"on these {n} common items, every log-prob bit-identical")
    worst = max((g.max_abs_delta for g in ags), default=math.nan)
    if ags and all(g.same_pred == 1.0 and g.n_shape_differs == 0 for g in ags) and worst <= tolerance:
        return Verdict(a, b, CLOSE, f"same predictions on {n} items, max |delta log-prob| {worst:.2e} "
                                    f"<= {tolerance:g} nats")
    chosen = [m for m in (deciding(a, b, task, metrics, primary) for task in dict.fromkeys(m.task for m in metrics))
              if m is not None]
    if not chosen:
        return Verdict(a, b, UNTESTED, "no metric could be tested (undefined correlations or differing gold)")
    adj = stats.holm([m.p_holm for m in chosen])  # over the tasks too: "different" is a claim on any of them
    p, m = min(zip(adj, chosen), key=lambda x: (x[0], x[1].p, -x[1].n))
    over = " and the ".join(w for w, on in (("pairs", m.p_holm != m.p), (f"{len(chosen)} tasks", len(adj) > 1)) if on)
    text = (f"{'the smallest p of %d tasks: ' % len(chosen) if len(chosen) > 1 else ''}{m.task} {m.metric} "
            f"{m.value_a:.4f} vs {m.value_b:.4f}, difference {_fmt(m.diff)}, "
            f"{'no interval' if math.isnan(m.ci[0]) else f'95% CI [{_fmt(m.ci[0])}, {_fmt(m.ci[1])}]'}, "
            f"{m.test} p = {p:.3g}{f' (Holm-adjusted over the {over})' if over else ''}")
    zero_inside = m.ci[0] <= 0 <= m.ci[1] or math.isnan(m.ci[0])  # no interval: nothing to set against the test
    if p < alpha:
        return Verdict(a, b, DIFFERENT, text + ("; the CI includes 0" if zero_inside else ""), p)
    if not zero_inside:
        text += (f"; the CI (not adjusted over the {over}) excludes 0 but the Holm-adjusted test does not reject"
                 if over else "; the CI excludes 0 but the test does not reject")
    if m.mdd is not None:
        text += f"; {m.n} items detect only differences of {m.mdd:.3f} or more (80% power)"
    return Verdict(a, b, CANNOT_TELL, text, p)
