"""Recorded settings that differ between two finished runs (runs.Run): what compare names for each pair, and
the page's pairwise view (report/pairs.py) beside its verdicts; and, apart, what only one side's door can record
(an lm-eval output beside a run), which is no difference in how the two were made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection

from abricot_local.analysis.labels import per_task_options
from abricot_local.analysis.lm_eval_input import LM_EVAL_PROVENANCE
from abricot_local.analysis.population import LM_EVAL_KEY
from abricot_local.analysis.runs import Run
from abricot_local.record import settings as recorded

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


PER_TASK = ("config", "version", "prompt_hash", "data_sha256")  # record.settings.settings' own of each task
RECORDED_KEY = "recorded_key"  # TASK.recorded_key: the key a run recorded the instance compared as TASK under


def compared_settings(run: Run, compared: Collection[str] | None = None) -> dict[str, Any]:
    """``run``'s recorded settings (Run.settings) as a comparison reads them: each task instance's under the key it is
    compared under (RunTask.name: alignment.align's, matching.paired_by_id's pairing), not the key the run recorded
    (RunTask.own_key), which ``TASK.recorded_key`` says, first among the instance's settings. The one place the
    pairing renames a run's settings, for every reader (compare's table, its JSON, the page, the API). An option of
    the run judged task by task over the instances ``compared`` (their names; None: every one it holds) is said by
    those tasks alone, not as the run's (labels.per_task_options, the labels' rule: `protocol` given to a run of
    ABRICOT and DISCOTEX is none of DISCOTEX's)."""
    named = {t.own_key: t.name for t in run.run_tasks}
    tasks = run.record.tasks
    configs = [tasks[t.own_key].config for t in run.run_tasks if t.own_key in tasks and (
        compared is None or t.name in compared)]
    theirs = per_task_options([e.config for e in tasks.values()], configs) & set(recorded.options(run.record))
    out: dict[str, Any] = {}
    for key, value in run.settings.items():
        own, _, rest = key.partition(".")
        if own in theirs and own not in named:
            continue
        if own in named and rest.split(".", 1)[0] in PER_TASK:
            out.setdefault(f"{named[own]}.{RECORDED_KEY}", own)
            key = f"{named[own]}.{rest}"
        out[key] = value
    return out


def _settings(a: Run, b: Run) -> list[tuple[SettingDiff, bool]]:
    """Each setting recorded otherwise, with whether only one side's door can record it; a provenance key that
    repeats a differing config key with the same values is left out, and the key a run recorded an instance
    under is said only where the other run holds the instance under another key (compared together). A task only
    one of the two holds is not compared (matching.absent_notes says so): its own settings are left out."""
    ta, tb = ({t.name for t in r.run_tasks} for r in (a, b))
    sa, sb = compared_settings(a, ta & tb), compared_settings(b, ta & tb)
    out = []
    for key in dict.fromkeys([*sa, *sb]):
        va, vb = sa.get(key), sb.get(key)
        if va == vb or (key.endswith(f".{RECORDED_KEY}") and None in (va, vb)):
            continue
        task, _, rest = key.partition(".")
        if task in ta ^ tb and rest.split(".", 1)[0] in (*PER_TASK, RECORDED_KEY):
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
