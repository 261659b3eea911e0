"""A quant ladder: each quant of one model against its highest-precision quant, per task.

For every model (``base``) with runs at two quants or more, the reference is the quant with the
most bits (``gguf.file.quant_bits``; the first run on a tie), and each other quant is compared with it
by compare.py over their common items: the equivalence verdict of the task's primary metric
(equivalence.py, the task's margin), the answers that changed (changes.py), the share of same
predictions and the mean KL(reference || quant) of the answer-label distributions
(``stats.label_kl``), beside each run's file size and measured items/s (results.json's
``model.size``, and ``scored_now / seconds`` of the task), and the full-vocabulary KLD the
quant's folder keeps against the reference's model (``abricot-local kld``: analysis/kld.py), if
measured. The task's N (the verdict's finite-population correction) is compare's: counted where the runs
recorded their data, else in the data the user gave (population.GivenData: `report --data-dir`). A rung a
``run --quants --until-settled`` rule judged against this reference holds that rule's verdict too (``settled``:
settled.rung_verdict, at the look it stopped at): the run's verdict, the fixed-n one beside it not accounting
for the looks. Pure: reads runs, returns rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from abricot_local.analysis.changes import AnswerChanges
from abricot_local.analysis.compare import compare
from abricot_local.analysis.equivalence import Equivalence
from abricot_local.analysis.kld import KldStats, kld_of
from abricot_local.analysis.population import NOTHING_GIVEN, GivenData
from abricot_local.analysis.runs import Run
from abricot_local.analysis.settled import SettledVerdict, rung_verdict
from abricot_local.gguf.file import highest_precision, quant_bits
from abricot_local.errors import ResultsError
from abricot_local.models.quants import refuse_mixed


@dataclass(frozen=True)
class Rung:
    base: str
    task: str
    run: str  # label
    quant: str
    reference: str  # the reference run's label ("" on the reference's own row)
    size: int | None  # the model file's bytes (None: not recorded)
    items_per_s: float | None  # measured while scoring the task (None: nothing scored by the last process)
    n: int = 0  # common items with the reference (the reference's own row: the items it scored)
    same_pred: float | None = None
    kl_mean: float | None = None  # mean KL(reference || this quant), nats
    verdict: Equivalence | None = None  # the task's primary metric
    changes: AnswerChanges | None = None
    kld: KldStats | None = None  # full-vocabulary KL(reference || quant) on the task's text (`kld`), if measured
    settled: SettledVerdict | None = None  # a --until-settled rule's verdict against this reference: the run's

    @property
    def is_reference(self) -> bool:
        return not self.reference


def speed(run: Run, task: str) -> float | None:
    """Items per second of a task as the run measured it (items scored by the last process over its time)."""
    e = run.record.tasks.get(task)
    if e is None or not e.seconds or not e.scored_now:
        return None
    return e.scored_now / e.seconds


def ladders(runs: Sequence[Run], *, seed: int | None = None, given: GivenData = NOTHING_GIVEN) -> tuple[Rung, ...]:
    """Every model's ladder over ``runs`` (labelled as a report labels them); ``given``: the data where a task's
    N is counted when the runs' recorded files are not here (a report's ``given``)."""
    groups: dict[str, list[Run]] = {}
    for r in runs:
        if r.base:
            groups.setdefault(r.base.lower(), []).append(r)
    out: list[Rung] = []
    for members in groups.values():
        if len({r.quant.upper() for r in members}) < 2:
            continue
        refuse_mixed(members[0].base, [(r.label, r.record) for r in members])  # one model's quants, or no ladder
        ref = members[highest_precision([r.quant for r in members])]
        ref_view = ref
        for task in ref.tasks:
            out.append(Rung(ref.base, task, ref.label, ref.quant, "", ref.record.model.size, speed(ref, task),
                            n=ref.record.tasks[task].n))
            for other in sorted(members, key=lambda r: -quant_bits(r.quant)):  # down the ladder
                if other is ref or task not in other.tasks:
                    continue
                out.append(_rung(ref, other, task, ref_view, seed, given))
    return tuple(out)


def _rung(ref: Run, other: Run, task: str, ref_view, seed: int | None, given: GivenData) -> Rung:
    base = Rung(ref.base, task, other.label, other.quant, ref.label, other.record.model.size, speed(other, task),
                kld=kld_of(other.path, ref.record.model).get(task))
    views = [_only(ref_view, task), _only(other, task)]
    try:
        c = compare(views, reference=ref_view.path, given=given, **({} if seed is None else {"seed": seed}))
    except ResultsError:  # no common item
        return base
    g = c.agreements[0]
    primary = dict(c.primary).get(task)
    verdict = next((e for e in c.equivalence if e.metric == primary), c.equivalence[0] if c.equivalence else None)
    return replace(base, n=g.n, same_pred=g.same_pred, kl_mean=g.mean_kl, verdict=verdict,
                   changes=c.changes[0] if c.changes else None,
                   settled=_settled(ref, other, task, verdict.metric if verdict else primary))


def _settled(ref: Run, other: Run, task: str, metric: str | None) -> SettledVerdict | None:
    """``other``'s rule's verdict against ``ref`` on ``task``'s ``metric`` (settled.rung_verdict: by the question's
    name, the reference as the runs may name it); None when its rule read another reference run (the folder it
    records, from its own, is there and is not ``ref``'s)."""
    if not metric:
        return None
    rule = other.record.tasks[task].sequential
    if rule is None:
        return None
    if rule.reference is not None:
        read = Path(other.path) / rule.reference
        try:
            if read.is_dir() and not os.path.samefile(read, ref.path):
                return None
        except OSError:  # the reference's folder is not here to compare: the names decide
            pass
    m = ref.record.model
    return rung_verdict(other.record, (ref.label, ref.model_label, m.alias, m.name, m.as_written), task, metric)


def _only(view, task: str):
    return view.only(task)
