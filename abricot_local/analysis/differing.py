"""Recorded settings that differ between two finished runs (runs.Run): what compare names for each pair, and
the page's pairwise view (report/pairs.py) beside its verdicts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from abricot_local.analysis.runs import Run


@dataclass(frozen=True)
class SettingDiff:
    a: str
    b: str
    key: str
    value_a: Any  # None: not recorded by run a
    value_b: Any


def differing_settings(a: Run, b: Run) -> tuple[SettingDiff, ...]:
    """Settings recorded differently (a key only one run records counts); a provenance key
    that repeats a differing config key with the same values is left out."""
    sa, sb = a.settings, b.settings
    out = []
    for key in dict.fromkeys([*sa, *sb]):
        va, vb = sa.get(key), sb.get(key)
        if va == vb:
            continue
        leaf = key.rsplit(".", 1)[-1]
        if "." in key and leaf != key and (sa.get(leaf), sb.get(leaf)) == (va, vb):
            continue
        out.append(SettingDiff(a.label, b.label, key, va, vb))
    return tuple(out)
