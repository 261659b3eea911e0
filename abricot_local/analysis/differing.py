"""Recorded settings that differ between two finished runs (runs.Run): what compare names for each pair, and
the page's pairwise view (report/pairs.py) beside its verdicts; and, apart, what only one side's door can record
(an lm-eval output beside a run), which is no difference in how the two were made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from abricot_local.analysis.lm_eval_input import LM_EVAL_PROVENANCE
from abricot_local.analysis.population import LM_EVAL_KEY
from abricot_local.analysis.runs import Run

# what only lm-eval's door records, so a run's own folder never does: lm-eval's request rules (lm_eval/requests.py),
# its version, its model and its --limit (the items chosen: the matching's), each task's lm-eval task
# (analysis/lm_eval_input.py: LM_EVAL_PROVENANCE, named there once). Beside a run they tell how lm-eval called the
# model, not how the numbers were made
LM_EVAL_ONLY = tuple(f"provenance.{key}" for key in LM_EVAL_PROVENANCE)


@dataclass(frozen=True)
class SettingDiff:
    a: str
    b: str
    key: str
    value_a: Any  # None: not recorded by run a
    value_b: Any


def lm_eval_only(key: str) -> bool:
    """Whether ``key`` (a dotted setting, record.settings.settings) is one only lm-eval's door records."""
    parts = key.split(".")
    return any(key == k or key.startswith(f"{k}.") for k in LM_EVAL_ONLY) or \
        (len(parts) == 3 and parts[1:] == ["config", LM_EVAL_KEY])


def _one_door(key: str, a: Run, va: Any, b: Run, vb: Any) -> bool:
    """A setting an lm-eval output records that the run beside it (not an lm-eval output) cannot."""
    return lm_eval_only(key) and any(v is None and not r.lm_eval and o.lm_eval for r, v, o in ((a, va, b), (b, vb, a)))


def _settings(a: Run, b: Run) -> list[tuple[SettingDiff, bool]]:
    """Each setting recorded otherwise, with whether only one side's door can record it; a provenance key that
    repeats a differing config key with the same values is left out."""
    sa, sb = a.settings, b.settings
    out = []
    for key in dict.fromkeys([*sa, *sb]):
        va, vb = sa.get(key), sb.get(key)
        if va == vb:
            continue
        leaf = key.rsplit(".", 1)[-1]
        if "." in key and leaf != key and (sa.get(leaf), sb.get(leaf)) == (va, vb):
            continue
        out.append((SettingDiff(a.label, b.label, key, va, vb), _one_door(key, a, va, b, vb)))
    return out


def differing_settings(a: Run, b: Run) -> tuple[SettingDiff, ...]:
    """Settings recorded differently (a key only one run records counts, but one only lm-eval's door records
    beside a run: :func:`one_side_settings`)."""
    return tuple(d for d, one in _settings(a, b) if not one)


def one_side_settings(a: Run, b: Run) -> tuple[SettingDiff, ...]:
    """What only one side's door can record, recorded by that side: an lm-eval output's own settings
    (:data:`LM_EVAL_ONLY`, each task's lm-eval task) beside a run, which cannot record them. Said apart from the
    settings that differ; two lm-eval outputs recording them otherwise differ."""
    return tuple(d for d, one in _settings(a, b) if one)
