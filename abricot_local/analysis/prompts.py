"""Does the prompt matter? Runs' scores of one task under several prompt variants, compared.

A run made with ``--prompt-variant all`` (or a list) holds one instance per variant, keyed
``TASK[@PROTOCOL]~VARIANT`` (the default variant keeps ``TASK[@PROTOCOL]``); a run made with
one ``--prompt-variant`` holds that one under the plain key. Instances are grouped by their key
without the variant (the task under one protocol) and told apart by the variant each recorded
(``config.prompt_variant``), so runs made either way line up. For each group scored under two
or more prompts, over the runs that hold it under every one of them (:func:`study`):

- each run's metric per prompt (as recorded), its mean and spread (max - min) over the prompts;
- per run, each pair of prompts compared over the items both scored (same id; the contexts
  differ by design): compare.py's paired difference, its CI (Tango's or the bootstrap's) and test;
- per prompt, each pair of runs compared over the items both scored alike (compare.py's
  matching and paired tests, Holm-adjusted over the pairs of that prompt);
- the ranking of the runs on each prompt, the pairs whose order flips between two prompts (and
  whether either order is significant), and Kendall's tau between each two prompts' rankings.

The metric is the task's primary one. Pure: reads run folders, returns frozen dataclasses;
report/prompts.py renders them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Sequence

import numpy as np
from scipy.stats import kendalltau

from abricot_local.analysis import stats
from abricot_local.analysis.compare import MetricComparison, compare_metric
from abricot_local.analysis.matching import match
from abricot_local.analysis.runs import Run, RunTask, options_of
from abricot_local.core import DEFAULT_SEED
from abricot_local.errors import AbricotError
from abricot_local.record import Sample
from abricot_local.tasks import make_task, without_variant
from abricot_local.tasks.base import TaskOptions


@dataclass(frozen=True)
class PromptValue:
    """One run's metric on one prompt, as its results.json records it."""

    prompt: str
    key: str  # the run's task key of this prompt's instance
    value: float
    ci: tuple[float, float] | None
    n: int


@dataclass(frozen=True)
class PromptPair:
    """Two of one run's prompts over the items both scored: ``comparison.a`` / ``.b`` are the prompts."""

    run: str
    comparison: MetricComparison


@dataclass(frozen=True)
class RunPrompts:
    run: str  # the run's label
    values: tuple[PromptValue, ...]  # in the study's order of prompts
    mean: float
    spread: float  # max - min over the prompts
    sd: float  # standard deviation over the prompts (ddof 1)
    pairs: tuple[PromptPair, ...] = ()


@dataclass(frozen=True)
class PromptTest:
    """Two runs on one prompt over the items both scored alike (``comparison.a`` / ``.b``: the runs)."""

    prompt: str
    comparison: MetricComparison


@dataclass(frozen=True)
class Flip:
    """Two runs whose order differs between two prompts: ``diff_x`` = a - b on prompt ``x``."""

    a: str
    b: str
    x: str
    y: str
    diff_x: float
    diff_y: float
    p_x: float  # Holm-adjusted p of the pair's test on prompt x (NaN: not tested)
    p_y: float

    def significant(self, alpha: float) -> bool:
        """Whether the pair's order is significant on either prompt."""
        return any(p < alpha for p in (self.p_x, self.p_y) if not math.isnan(p))


@dataclass(frozen=True)
class Tau:
    """Kendall's tau (tau-b) between the runs' values on prompts ``x`` and ``y``."""

    x: str
    y: str
    tau: float
    p: float
    n: int  # runs with a finite value on both


@dataclass(frozen=True)
class PromptStudy:
    task: str  # the task key without the variant (TASK[@PROTOCOL])
    metric: str
    prompts: tuple[str, ...]
    runs: tuple[RunPrompts, ...]
    rankings: tuple[tuple[str, tuple[str, ...]], ...]  # prompt -> the runs, best first
    tests: tuple[PromptTest, ...]
    flips: tuple[Flip, ...]
    taus: tuple[Tau, ...]
    alpha: float
    notes: tuple[str, ...] = ()

    @property
    def holds(self) -> bool:
        """Whether every pair of runs keeps its order on every prompt."""
        return not self.flips


@dataclass(frozen=True)
class Prompts:
    studies: tuple[PromptStudy, ...]
    notes: tuple[str, ...] = ()


def _variant(run: Run, key: str) -> str | None:
    return run.record.tasks[key].config.get("prompt_variant") or None


def _options(run: Run, key: str):
    return options_of(run.record, key, None if run.lm_eval else run.path)


def _inputs(run: Run, key: str, samples: Sequence[Sample], metric: str):
    task = make_task(key, _options(run, key))
    return next((m for m in task.metric_inputs(list(samples)) if m.name == metric), None)


def _value(run: Run, key: str, metric: str) -> PromptValue:
    entry = run.record.tasks[key]
    got = next(((v, ci) for name, v, ci in entry.metric_items() if name == metric), (math.nan, None))
    return PromptValue(_variant(run, key) or "", key, float(got[0]), got[1], entry.n)


def _groups(runs: Sequence[Run]) -> dict[str, dict[int, dict[str, str]]]:
    """group -> run index -> prompt -> the run's key."""
    out: dict[str, dict[int, dict[str, str]]] = {}
    for k, run in enumerate(runs):
        for key in run.tasks:
            variant = _variant(run, key)
            if variant:
                out.setdefault(without_variant(key), {}).setdefault(k, {}).setdefault(variant, key)
    return out


def study(runs: Sequence[Run], *, alpha: float = stats.ALPHA, seed: int = DEFAULT_SEED,
          n_boot: int = stats.N_BOOT) -> Prompts:
    """Every task the runs (labelled: analysis.runs.labelled) hold under two or more prompts (see the module)."""
    studies, notes = [], []
    for group, held in _groups(runs).items():
        try:
            cls_order = make_task(group, TaskOptions(allow_download=False)).prompt_variants
        except AbricotError:
            continue  # a task this version does not know: the report names it elsewhere
        seen = dict.fromkeys(p for per in held.values() for p in per)
        prompts = tuple(sorted(seen, key=lambda p: cls_order.index(p) if p in cls_order else len(cls_order)))
        if len(prompts) < 2:
            continue
        every = [k for k in held if len(held[k]) == len(prompts)]
        if not any(len(per) >= 2 for per in held.values()):
            continue  # runs of one prompt each (made with one --prompt-variant): compare pairs them
        for k in held:
            if k not in every:
                notes.append(f"{group}: run {runs[k].label} lacks prompt(s) "
                             f"{', '.join(p for p in prompts if p not in held[k])}: left out of its prompt comparison")
        if not every:
            notes.append(f"{group}: no run holds every prompt ({', '.join(prompts)}): nothing to compare")
            continue
        studies.append(_study(group, prompts, [(runs[k], held[k]) for k in every], alpha, seed, n_boot))
    return Prompts(tuple(studies), tuple(notes))


def _study(group: str, prompts: tuple[str, ...], members: list[tuple[Run, dict[str, str]]], alpha: float,
           seed: int, n_boot: int) -> PromptStudy:
    first, keys = members[0]
    metric = make_task(keys[prompts[0]], _options(first, keys[prompts[0]])).primary_metric
    samples = {(r.label, p): r.samples_of(keys[p]) for r, keys in members for p in prompts}
    rows, notes = [], []
    for run, keys in members:
        values = tuple(_value(run, keys[p], metric) for p in prompts)
        v = np.array([x.value for x in values], dtype=float)
        pairs = tuple(PromptPair(run.label, c) for c in _prompt_pairs(run, keys, prompts, samples, metric, seed,
                                                                        n_boot))
        rows.append(RunPrompts(run.label, values, float(np.mean(v)), float(np.max(v) - np.min(v)),
                               float(np.std(v, ddof=1)), pairs))
    rows = _holm_pairs(rows)
    tests = _run_tests(members, prompts, samples, metric, seed, n_boot)
    value = {(r.run, pv.prompt): pv.value for r in rows for pv in r.values}
    labels = [r.run for r in rows]
    rankings = tuple((p, tuple(sorted(labels, key=lambda lab: (-_finite(value[(lab, p)]), labels.index(lab)))))
                     for p in prompts)
    p_of = {(t.prompt, t.comparison.a, t.comparison.b): t.comparison.p_holm for t in tests}
    flips = []
    for a, b in combinations(labels, 2):
        for x, y in combinations(prompts, 2):
            dx, dy = value[(a, x)] - value[(b, x)], value[(a, y)] - value[(b, y)]
            if dx * dy < 0:
                flips.append(Flip(a, b, x, y, dx, dy, p_of.get((x, a, b), math.nan), p_of.get((y, a, b), math.nan)))
    taus = []
    for x, y in combinations(prompts, 2):
        vx = np.array([value[(lab, x)] for lab in labels], dtype=float)
        vy = np.array([value[(lab, y)] for lab in labels], dtype=float)
        ok = np.isfinite(vx) & np.isfinite(vy)
        if ok.sum() >= 2 and np.ptp(vx[ok]) > 0 and np.ptp(vy[ok]) > 0:
            res = kendalltau(vx[ok], vy[ok])
            taus.append(Tau(x, y, float(res.statistic), float(res.pvalue), int(ok.sum())))
        else:
            taus.append(Tau(x, y, math.nan, math.nan, int(ok.sum())))
    return PromptStudy(group, metric, prompts, tuple(rows), rankings, tests, tuple(flips), tuple(taus), alpha,
                       tuple(notes))


def _finite(v: float) -> float:
    return v if math.isfinite(v) else -math.inf


def _prompt_pairs(run: Run, keys: dict[str, str], prompts, samples, metric: str, seed: int, n_boot: int):
    """The run's prompts two by two over the item ids both scored (in id order)."""
    out = []
    for x, y in combinations(prompts, 2):
        sx = {str(s.id): s for s in samples[(run.label, x)]}
        sy = {str(s.id): s for s in samples[(run.label, y)]}
        ids = sorted(set(sx) & set(sy))
        if not ids:
            continue
        ix = _inputs(run, keys[x], [sx[i] for i in ids], metric)
        iy = _inputs(run, keys[y], [sy[i] for i in ids], metric)
        if ix is not None and iy is not None:
            out.append(compare_metric(without_variant(keys[x]), x, y, ix, iy, seed=seed, n_boot=n_boot))
    return out


def _holm_pairs(rows: list[RunPrompts]) -> list[RunPrompts]:
    """Holm over each run's pairs of prompts."""
    out = []
    for r in rows:
        adjusted = stats.holm([p.comparison.p for p in r.pairs]) if r.pairs else []
        out.append(replace(r, pairs=tuple(replace(p, comparison=replace(p.comparison, p_holm=q))
                                          for p, q in zip(r.pairs, adjusted))))
    return out


def _run_tests(members, prompts, samples, metric: str, seed: int, n_boot: int) -> tuple[PromptTest, ...]:
    """Per prompt, every pair of runs over the items they scored alike (matching.match), Holm over the pairs."""
    out = []
    for p in prompts:
        views = [replace(run, run_tasks=(RunTask(p, given=samples[(run.label, p)]),)) for run, _ in members]
        family = []
        for i, j in combinations(range(len(members)), 2):
            _, (sa, sb) = match([views[i], views[j]], p)
            if not sa:
                continue
            (ra, ka), (rb, kb) = members[i], members[j]
            ia, ib = _inputs(ra, ka[p], sa, metric), _inputs(rb, kb[p], sb, metric)
            if ia is not None and ib is not None:
                family.append(compare_metric(without_variant(ka[p]), ra.label, rb.label, ia, ib, seed=seed,
                                             n_boot=n_boot))
        adjusted = stats.holm([c.p for c in family]) if family else []
        out += [PromptTest(p, replace(c, p_holm=q)) for c, q in zip(family, adjusted)]
    return tuple(out)
