"""The pairwise view of a report (the HTML page's matrices and the leaderboard's best groups):
for each task, analysis/compare.py over the report's runs that scored it.

Per task, every pair of those runs gets the task's verdict and the comparison it rests on
(the task's primary metric, else its first tested one: difference, CI, Holm-adjusted p), over the
items both runs scored alike (runs that scored different items: each pair its own, the cell's ``n``);
per metric, the runs not distinguishable from the best; per pair of runs, the recorded
settings that differ and, apart as compare says them, those only one side's door can record (an lm-eval
output's beside a run: analysis/differing.one_side_settings). A task's N is compare's, counted in the data the
report was given (``Report.given``) where the runs' recorded files are not here. Plain data (a dict of lists); pure: nothing is printed.
"""

from __future__ import annotations

import json
from itertools import combinations
from typing import Any, Mapping, Sequence

from abricot_local.analysis import compare as cmp
from abricot_local.analysis import stats
from abricot_local.analysis.differing import differing_settings, one_side_settings
from abricot_local.analysis.matching import item_key
from abricot_local.analysis.overview import Report
from abricot_local.analysis.runs import Run
from abricot_local.report.comparison import ONE_SIDE  # compare's words for them, the page's heading

LONGEST = 160  # a setting's value longer than this is cut on the page (compare --format json has it whole)


def _short(v: Any) -> str:
    if v is None:
        return "(not recorded)"
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return text if len(text) <= LONGEST else text[: LONGEST - 3] + "..."


def _cell(v: cmp.Verdict, m: cmp.MetricComparison | None, index: Mapping[str, int]) -> dict:
    cell = {"a": index[v.a], "b": index[v.b], "kind": v.kind, "line": v.line}
    if m is not None:
        cell.update(metric=m.metric, test=m.test, n=m.n, valueA=m.value_a, valueB=m.value_b, diff=m.diff,
                    ci=list(m.ci), p=m.p_holm, adjusted=m.p_holm != m.p)
    return cell


def _items(c: cmp.Comparison) -> int | str:
    """The items a group's pairs are compared over, for the matrix's heading: their number when every pair has the
    same (the items common to the group), else the range of the pairs' own ("20 to 40"; each cell's ``n`` is its
    pair's, and compare's note names them)."""
    ns = sorted({g.n for g in c.agreements})
    return ns[0] if len(ns) == 1 else f"{ns[0]} to {ns[-1]}"


def clusters(views: Sequence[Run], task: str) -> list[list[int]]:
    """The runs (indices into ``views``) in groups that share items on ``task`` (same id and
    scored context, common to the whole group): each run joins the first group it keeps
    non-empty, else starts one. A chat-wrapped run and a plain one land in different groups."""
    groups: list[tuple[list[int], set]] = []
    for k, v in enumerate(views):
        keys = {item_key(s) for s in v.task(task).samples}
        for members, common in groups:
            if common & keys:
                members.append(k)
                common &= keys
                break
        else:
            groups.append(([k], keys))
    return [members for members, _ in groups]


def pairwise(report: Report, *, alpha: float = stats.ALPHA, tolerance: float = cmp.TOLERANCE) -> dict:
    """The pairwise view of ``report``.

    Per task, the runs that scored it are compared in groups sharing items (:func:`clusters`);
    a pair across two groups has no cell, and a note says which runs share nothing."""
    views = list(report.runs)
    index = {v.label: k for k, v in enumerate(views)}
    tasks, best, notes = [], {}, []
    for task in dict.fromkeys(t for r in report.runs for t in r.tasks):
        members = [k for k, r in enumerate(report.runs) if task in r.tasks]
        if len(members) < 2:
            continue
        entry = {"task": task, "runs": members, "n": [], "metric": "", "cells": [], "notes": []}
        groups = clusters([views[k].only(task) for k in members], task)
        if len(groups) > 1:
            notes.append(f"{task}: the runs do not all share items, so no best group is marked for it")
        for group in groups:
            runs = [members[g] for g in group]
            if len(runs) < 2:
                entry["notes"].append(f"{views[runs[0]].label} shares no item (same id and scored context) "
                                      "with the other runs")
                continue
            c = cmp.compare([views[k].only(task) for k in runs], tolerance=tolerance, alpha=alpha,
                            given=report.given)
            primary = dict(c.primary)
            entry["metric"] = entry["metric"] or primary.get(task, "")
            entry["n"].append(_items(c))
            entry["cells"] += [_cell(v, cmp.deciding(v.a, v.b, task, c.metrics, primary), index) for v in c.verdicts]
            entry["notes"] += c.notes
            # the best group: compare's, over the items all the group's runs share (two runs: every metric's)
            found = c.groups if len(runs) > 2 else cmp.best_groups([r.label for r in c.runs], c.metrics, alpha)
            for g in found if len(groups) == 1 else ():
                best[f"{g.task}.{g.metric}"] = {"best": index[g.best], "members": [index[x] for x in g.members]}
        if entry["cells"]:
            tasks.append(entry)
        else:
            notes.append(f"{task}: no two runs share an item (same id and scored context)")
    def listed(found, a: Run, b: Run) -> list[list[str]]:
        return [[d.key, _short(d.value_a), _short(d.value_b)] for d in found(a, b)]

    settings = [{"a": i, "b": j, "differs": listed(differing_settings, views[i], views[j]),
                 "one_side": listed(one_side_settings, views[i], views[j])}
                for i, j in combinations(range(len(views)), 2)]
    return {"alpha": alpha, "tolerance": tolerance, "tasks": tasks, "best": best, "settings": settings,
            "one_side": ONE_SIDE, "notes": list(dict.fromkeys(notes))}
