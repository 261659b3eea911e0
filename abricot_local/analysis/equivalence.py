"""Is one run as good as another: equivalence and non-inferiority verdicts with a margin.

For each run and its reference (:func:`references`: ``--reference``, else the highest-precision
quant of the same model, else the first run) and each metric compared, the difference
other - reference and its 90% paired-bootstrap interval (compare.py's resamples) are read
against the margin M, in the metric's own units (the task's ``margins``, else ``--margin``):

- ``equivalent within M``: the interval inside (-M, M) (two one-sided tests at 5%);
- ``not worse by more than M``: its lower bound above -M (and its upper bound M or more);
- ``worse by more than M``: its upper bound below -M;
- ``cannot tell yet``: the interval holds -M; with about how many items would settle it if the
  difference stayed what it is (stats.items_to_settle: the power figures at one-sided 5%).

Pure: reads compare.py's MetricComparison rows (duck-typed: no import of compare.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from abricot_local.analysis import stats
from abricot_local.analysis.runs import quant_bits
from abricot_local.errors import UsageError

EQUIVALENT, NOT_WORSE, WORSE, UNSETTLED, UNDEFINED = (
    "equivalent", "not worse", "worse", "cannot tell yet", "cannot tell")


@dataclass(frozen=True)
class Equivalence:
    other: str  # the run judged (label)
    reference: str  # the run it is judged against (label)
    task: str
    metric: str
    margin: float  # in the metric's units
    n: int
    diff: float  # other - reference
    ci90: tuple[float, float]  # 90% paired-bootstrap interval of diff
    kind: str
    items: int | None = None  # cannot tell yet: about how many items would settle it (stats.MAX_ITEMS: none would)
    note: str = ""
    stat: str = ""  # the metric's statistic (accuracy: the settling figure is McNemar's)

    @property
    def line(self) -> str:
        head = f"{self.other} vs {self.reference}, {self.task} {self.metric}: "
        if self.kind == UNDEFINED:
            return head + f"cannot tell ({self.note or 'the difference is undefined'})"
        lo, hi = self.ci90
        figures = f"(difference {self.diff:.3f}, 90% CI [{lo:.3f}, {hi:.3f}], {self.n} items)"
        m = f"{self.margin:g}"
        if self.kind == EQUIVALENT:
            return head + f"equivalent within {m} {figures}"
        if self.kind == NOT_WORSE:
            return head + f"not worse by more than {m} {figures}"
        if self.kind == WORSE:
            return head + f"worse by more than {m} {figures}"
        what = "discordance" if self.stat == "accuracy" else "spread"
        settle = (f"about {self.items:,} items would settle it at this {what}" if self.items < stats.MAX_ITEMS
                  else "no number of items settles it: the difference sits on the margin")
        return head + f"cannot tell yet within {m} {figures}; {settle}"


def classify(diff: float, ci90: tuple[float, float], margin: float) -> str:
    """The verdict of a difference's 90% interval against the margin (module docstring)."""
    lo, hi = ci90
    if any(math.isnan(v) for v in (diff, lo, hi)):
        return UNDEFINED
    if lo > -margin:
        return EQUIVALENT if hi < margin else NOT_WORSE
    return WORSE if hi < -margin else UNSETTLED


def _quant(run: Any) -> str:
    """A compared run's quant (a RunView's recorded settings, or a report's Run)."""
    settings = getattr(run, "settings", None)
    return str(settings.get("quant", "") if settings is not None else getattr(run, "quant", "")).upper()


def references(runs: Sequence[Any], reference: str | None = None) -> tuple[tuple[str, str], ...]:
    """(run, its reference) by label, in the runs' order (each with ``label``, ``path``, ``base`` and a
    quant). ``reference``: a run's label or folder, the reference of every other run. Otherwise the
    runs of one model (``base``) at several quants are judged against the highest-precision one (the
    first on a tie), and every other run against the first run."""
    labels = [r.label for r in runs]
    if reference is not None:
        ref = _named(runs, reference)
        return tuple((lab, ref) for lab in labels if lab != ref)
    groups: dict[str, list[int]] = {}
    for k, r in enumerate(runs):
        if r.base:
            groups.setdefault(r.base.lower(), []).append(k)
    out = []
    for k, r in enumerate(runs):
        members = groups.get(r.base.lower(), []) if r.base else []
        quants = {_quant(runs[j]) for j in members}
        if len(members) > 1 and len(quants) > 1:
            top = max(members, key=lambda j: (quant_bits(_quant(runs[j])), -j))
            if top != k:
                out.append((labels[k], labels[top]))
        elif k:
            out.append((labels[k], labels[0]))
    return tuple(out)


def _named(runs: Sequence[Any], name: str) -> str:
    from pathlib import Path

    for r in runs:
        if name == r.label or name == str(r.path):
            return r.label
    wanted = Path(name).resolve()
    for r in runs:
        if Path(r.path).resolve() == wanted:
            return r.label
    raise UsageError(f"--reference {name}: not one of the runs compared; give a folder or a label: "
                     + ", ".join(r.label for r in runs))


def judge(metrics: Sequence[Any], pairs: Sequence[tuple[str, str]], margins: Mapping[tuple[str, str], float],
          margin: float | None = None) -> tuple[Equivalence, ...]:
    """One :class:`Equivalence` per (run, reference) pair and metric compared. ``margins``: per (task,
    metric) the task's; ``margin``: one for every metric instead."""
    if margin is not None and not margin > 0:
        raise UsageError(f"--margin must be more than 0 (in the metric's own units), got {margin}")
    wanted = {pair: k for k, pair in enumerate(pairs)}
    out = []
    for m in metrics:
        if (m.a, m.b) in wanted:
            other, ref, sign = m.a, m.b, 1.0
        elif (m.b, m.a) in wanted:
            other, ref, sign = m.b, m.a, -1.0
        else:
            continue
        diff = sign * m.diff + 0.0  # never -0.0
        lo, hi = m.ci90 if sign > 0 else (-m.ci90[1] + 0.0, -m.ci90[0] + 0.0)
        mg = margin if margin is not None else margins.get((m.task, m.metric), 0.02)
        kind = classify(diff, (lo, hi), mg)
        items, note = None, ""
        if kind == UNSETTLED:
            detail = dict(m.detail)
            psi = (detail["a_only"] + detail["b_only"]) / m.n if m.stat == "accuracy" and m.n else None
            items = stats.items_to_settle(m.n, abs(diff + mg), discordance=psi, ci90=(lo, hi))
            items = items if items == stats.MAX_ITEMS else max(items, m.n + 1)
        elif kind == UNDEFINED:
            note = m.note or "the difference is undefined (a constant vector)"
        out.append(Equivalence(other, ref, m.task, m.metric, mg, m.n, diff, (lo, hi), kind, items, note, m.stat))
    order = {pair: k for k, pair in enumerate(pairs)}
    return tuple(sorted(out, key=lambda e: order[(e.other, e.reference)]))
