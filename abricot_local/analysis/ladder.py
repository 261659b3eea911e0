"""A quant ladder: each quant of one model against its highest-precision quant, per task.

A ladder is per model (``base``) and task (:func:`plan`): the base's runs that hold the task, at two quants or more;
its reference the quant with the most bits per weight among them, then the others down (``gguf.file.by_precision``,
the one order of precision: each run's recorded ``model.bits_per_weight``, an older run's quant name's, ties by the
name, then the label: the same ladder whatever order the runs come in). Two runs of one quant are never one ladder
(split by their folders; what is left out, said in a note). Each other quant is compared with the reference
by compare.py over their common items: the equivalence verdict of the task's primary metric
(equivalence.py, the task's margin), the answers that changed (changes.py) beside how many near ties and decisive
answers the reference had on those items (its flip rate: changes.py counts them), the share of same
predictions and the mean KL(reference || quant) of the answer-label distributions
(``stats.label_kl``), beside each run's file size and measured items/s (results.json's
``model.size``, and ``scored_now / seconds`` of the task), and the full-vocabulary KLD the
quant's folder keeps against the reference's model (``abricot-local kld``: analysis/kld.py), if
measured. The task's N (the verdict's finite-population correction) is compare's: the N the runs recorded, else
counted where they recorded their data, else in the data the user gave (population.GivenData: `report
--data-dir`). A rung a
``run --quants --until-settled`` rule judged against this reference holds that rule's verdict too (``settled``:
settled.rung_verdict, at the look it stopped at): the run's verdict, the fixed-n one beside it judged at the
rule's margin (the run's ``--margin``, else the task's: the one the rule read) and not accounting for the looks;
none where that margin is one no difference can exceed (metrics.covered_difference: a rule recorded before such a
margin was refused), compare's cannot tell instead (:class:`Rung`). What a ladder's verdicts say about which quant
to keep (:func:`choices`): among the rungs shown as good as the reference within the margin, the smallest file
when each records its size (``model.size``: a small model's quant may outweigh one with fewer bits by its name, its
narrow tensors fallen back), ties by the order of precision; else the last in that order (the fewest bits by its
name); the rungs that cannot tell yet, those shown worse; no more. Pure: reads runs, returns rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from abricot_local.analysis.changes import AnswerChanges
from abricot_local.analysis.compare import Comparison, compare
from abricot_local.analysis.equivalence import BETTER, EQUIVALENT, NOT_WORSE, UNDEFINED, UNSETTLED, WORSE, \
    Equivalence, judge, words
from abricot_local.analysis.kld import KldStats, kld_of
from abricot_local.analysis.population import NOTHING_GIVEN, GivenData
from abricot_local.analysis.runs import Run
from abricot_local.analysis.settled import Reach, SettledVerdict, rung_verdict
from abricot_local.gguf.file import by_precision
from abricot_local.errors import ResultsError
from abricot_local.models.quants import precision_of, refuse_mixed


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
    verdict: Equivalence | None = None  # the task's primary metric, the task's margin (a rule's rung: the rule's)
    changes: AnswerChanges | None = None
    kld: KldStats | None = None  # full-vocabulary KL(reference || quant) on the task's text (`kld`), if measured
    settled: SettledVerdict | None = None  # a --until-settled rule's verdict against this reference: the run's
    ladder: str = ""  # the folder of its runs when its base has several ladders on the task ("": one)
    bits: float | None = None  # its model file's bits per weight as its run recorded it (None: not recorded)
    ref_near_ties: int | None = None  # the reference's near ties on the items compared (changes' threshold)
    ref_decisive: int | None = None  # and its decisive answers there: what ``changes`` flipped, of how many

    def __post_init__(self):
        # A rule's verdict recorded at a margin no difference can exceed (before such a margin was refused) is no
        # verdict: the rung holds none, compare's cannot tell stands (its table, its keep line: the one place).
        if self.settled is not None and self.verdict is not None and self.verdict.covered:
            object.__setattr__(self, "settled", None)
        # An open rule's estimate of the items that would settle it at a fixed n (settled.fixed_n_needed's, scaled
        # from its look) is moot where the fixed-n verdict beside it is settled: dropped, its reach with it (every
        # door of the rung: its keep line, JSON's sequential, the HTML page), that verdict said instead (Standing).
        if self.fixed_n_settled and self.settled.needed is not None:
            object.__setattr__(self, "settled", replace(self.settled, needed=None, basis=""))

    @property
    def fixed_n_settled(self) -> bool:
        """A rung a rule left open (not settled, not exact) whose fixed-n verdict beside it (compare's, at the rule's
        margin) is settled over its items: the verdict that does not account for the looks tells what no figure
        would at a fixed n."""
        s, e = self.settled, self.verdict
        lk = None if s is None else s.look
        return lk is not None and e is not None and e.kind in (*AS_GOOD, WORSE) and lk.verdict == UNSETTLED \
            and not lk.exact

    @property
    def is_reference(self) -> bool:
        return not self.reference


def speed(run: Run, task: str) -> float | None:
    """Items per second of a task as the run measured it (items scored by the last process over its time)."""
    e = run.record.tasks.get(task)
    if e is None or not e.seconds or not e.scored_now:
        return None
    return e.scored_now / e.seconds


@dataclass(frozen=True)
class Ladder:
    """One ladder: a base's runs on one task, the reference (the highest-precision quant among them) first, then
    down; ``where``: the folder holding its runs when the base has several ladders on the task ("": one)."""

    base: str
    task: str
    runs: tuple[Run, ...]
    where: str = ""


def _folder(r: Run) -> str:
    return str(Path(r.folder).parent)


def quant_groups(having: Sequence[Run]) -> dict[str, list[Run]]:
    """One base's runs that hold one task, grouped as its quant ladders are (the one rule: :func:`plan`, the report's
    quant pairs): one group ("") unless a quant is run twice, then one per folder holding the runs (a sweep's
    ``--out``, :attr:`Ladder.where`): two runs of one quant are never compared, nor runs of other folders (their items
    or settings may differ)."""
    quants = [r.quant.upper() for r in having]
    if len(set(quants)) == len(quants):
        return {"": list(having)}
    parts: dict[str, list[Run]] = {}
    for r in having:
        parts.setdefault(_folder(r), []).append(r)
    return parts


def plan(runs: Sequence[Run]) -> tuple[tuple[Ladder, ...], tuple[str, ...]]:
    """The ladders over ``runs`` and a note for each run or task left out. A ladder is per base and task: the runs
    of the base that hold the task, against the highest-precision quant among them. Two runs of one quant of a base
    (their items or settings may differ) are never a rung of each other: the runs are then split by the folder
    holding them (a sweep's ``--out``), one ladder per folder with two quants or more; a run alone in its folder, a
    second run of a quant in one folder, a task one quant holds: left out, said in a note."""
    groups: dict[str, list[Run]] = {}
    for r in runs:
        if r.base:
            groups.setdefault(r.base.lower(), []).append(r)
    out: list[Ladder] = []
    notes: list[str] = []
    for members in groups.values():
        if len({r.quant.upper() for r in members}) < 2:
            continue
        refuse_mixed(members[0].base, [(r.label, r.record) for r in members])  # one model's quants, or no ladder
        base = members[0].base
        for task in dict.fromkeys(t for r in members for t in r.tasks):
            for where, part in quant_groups([r for r in members if task in r.tasks]).items():
                kept: dict[str, Run] = {}
                for r in part:
                    if r.quant.upper() in kept:
                        notes.append(f"{task}: {r.label} left out of the quant ladder of {base}: "
                                     f"{kept[r.quant.upper()].label} is the same quant ({r.quant}) in the same folder; "
                                     "compare them with `abricot-local compare`")
                    else:
                        kept[r.quant.upper()] = r
                chosen = list(kept.values())
                if len(chosen) < 2:
                    alone = chosen[0]
                    notes.append(f"{task}: {alone.label} ({alone.quant}) left out of the quant ladders of {base}: "
                                 + ("no other quant of the base holds the task" if not where else
                                    f"no other quant of the base in its folder ({where}) holds the task, and the "
                                    "runs of its quant elsewhere are other ladders' (their items or settings may "
                                    "differ)"))
                    continue
                order = by_precision([precision_of(r) for r in chosen])
                out.append(Ladder(base, task, tuple(chosen[i] for i in order), where))
    return tuple(out), tuple(notes)


def ladders(runs: Sequence[Run], *, seed: int | None = None, given: GivenData = NOTHING_GIVEN) -> tuple[Rung, ...]:
    """Every ladder's rungs over ``runs`` (labelled as a report labels them; :func:`plan`: a ladder per base and
    task), its reference first; ``given``: the data where a task's N is counted when the runs' recorded files are
    not here (a report's ``given``)."""
    out: list[Rung] = []
    for lad in plan(runs)[0]:
        ref, task = lad.runs[0], lad.task
        out.append(Rung(ref.base, task, ref.label, ref.quant, "", ref.record.model.size, speed(ref, task),
                        n=ref.record.tasks[task].n, ladder=lad.where, bits=ref.record.model.bits_per_weight))
        out += [replace(_rung(ref, other, task, ref, seed, given), ladder=lad.where) for other in lad.runs[1:]]
    return tuple(out)


def notes(runs: Sequence[Run]) -> tuple[str, ...]:
    """What the ladders over ``runs`` leave out, and why (:func:`plan`)."""
    return plan(runs)[1]


def _rung(ref: Run, other: Run, task: str, ref_view, seed: int | None, given: GivenData) -> Rung:
    base = Rung(ref.base, task, other.label, other.quant, ref.label, other.record.model.size, speed(other, task),
                kld=kld_of(other.folder, ref.record.model).get(task), bits=other.record.model.bits_per_weight)
    views = [_only(ref_view, task), _only(other, task)]
    try:
        c = compare(views, reference=ref_view.path, given=given, **({} if seed is None else {"seed": seed}))
    except ResultsError:  # no common item
        return base
    g = c.agreements[0]
    primary = dict(c.primary).get(task)
    verdict = next((e for e in c.equivalence if e.metric == primary), c.equivalence[0] if c.equivalence else None)
    settled = _settled(ref, other, task, verdict.metric if verdict else primary)
    if settled is not None and verdict is not None and settled.look.margin != verdict.margin:
        verdict = _at_margin(c, verdict, settled.look.margin, g.identical)
    changes = c.changes[0] if c.changes else None
    return replace(base, n=g.n, same_pred=g.same_pred, kl_mean=g.mean_kl, verdict=verdict, changes=changes,
                   settled=settled, ref_near_ties=changes.ref_near_ties if changes else None,
                   ref_decisive=changes.ref_decisive if changes else None)


def _at_margin(c: Comparison, e: Equivalence, margin: float, identical: bool) -> Equivalence:
    """Compare's verdict ``e`` judged again at ``margin`` (a rule's: the fixed-n verdict beside the rule's reads the
    margin the rule read), from the same paired difference, as compare judges it (equivalence.judge)."""
    rows = [m for m in c.metrics if (m.task, m.metric) == (e.task, e.metric)]
    same = {(e.other, e.reference, e.task)} if identical else set()
    found = judge(rows, [(e.other, e.reference)], {}, margin, totals=c.totals, identical=same)
    return found[0] if found else e


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
        read = Path(other.folder) / rule.reference
        try:
            if read.is_dir() and not os.path.samefile(read, ref.folder):
                return None
        except OSError:  # the reference's folder is not here to compare: the names decide
            pass
    m = ref.record.model
    return rung_verdict(other.record, (ref.label, ref.model_label, m.alias, m.name, m.as_written), task, metric)


def _only(view, task: str):
    return view.only(task)


AS_GOOD = (EQUIVALENT, NOT_WORSE, BETTER)  # the verdicts that show a rung as good as its reference within the margin


@dataclass(frozen=True)
class Standing:
    """One rung's verdict as :func:`choices` reads it: the rule's where one judged it (``by_rule``), else compare's."""

    quant: str
    run: str
    kind: str  # equivalence's kinds; "" with no common item
    words: str  # ``equivalent within 0.02``, ``cannot tell yet within 0.02``, ``cannot tell``, ``no common item``
    margin: float | None
    n: int  # the items the verdict rests on (a rule's: the look it stopped at)
    items: int | None = None  # cannot tell yet: about how many of the task's items would settle it (compare's figure)
    by_rule: bool = False
    look: str = ""  # a rule's: ``look 1 of 2``
    note: str = ""  # cannot tell: why
    kld: float | None = None  # the full-vocabulary KLD's mean against the reference, if measured (not a verdict)
    exact: bool = False  # every item of the task compared: the task's own difference
    next_look: int | None = None  # a rule's open verdict: the items of its next look (settled.SettledVerdict's)
    max_items: int | None = None  # ... and the --max-items of the run grown to it (None: the rule goes on itself)
    reach: Reach | None = None  # ... and ``items`` far beyond that look (settled.Reach: the bound that could settle it)
    size: int | None = None  # its model file's bytes as its run recorded them (None: not recorded)
    basis: str = ""  # where ``items`` comes from when not the fixed-n verdict's own figure (settled.SCALED)
    fixed_n: str = ""  # a rule's open rung whose fixed-n verdict is settled (Rung.fixed_n_settled): its words ...
    fixed_n_n: int = 0  # ... and the items it rests on (then no ``items``)


@dataclass(frozen=True)
class Choice:
    """What one ladder's verdicts say about which quant to keep: among the rungs shown as good as the reference
    within the margin, the smallest file (``kept``: None when none is; :attr:`by_size`), the rungs that cannot tell
    yet, those shown worse; nothing beyond the verdicts (the KLDs are how far the distributions moved, not a
    verdict)."""

    base: str
    task: str
    ladder: str  # the folder of its runs when its base has several ladders on the task ("": one)
    reference: str  # the reference's quant
    metric: str  # the task's primary metric, the verdicts'
    rungs: tuple[Standing, ...]  # the other quants, the most bits first

    @property
    def by_size(self) -> bool:
        """Whether :attr:`kept` is the smallest file: every rung shown as good records its file's size (else the
        fewest bits by its name, the last of the order of precision; False with none shown as good)."""
        good = self.having(*AS_GOOD)
        return bool(good) and all(s.size is not None for s in good)

    @property
    def kept(self) -> Standing | None:
        """The rung to keep as far as the verdicts go: of those shown as good, the smallest file when each records
        its size (a quant's name does not say its file: a small model's narrow tensors fall back to wider types),
        ties by the order of precision (the fewer bits); else the last in that order (the fewest bits by its name)."""
        good = self.having(*AS_GOOD)
        if not good:
            return None
        if not self.by_size:
            return good[-1]
        return min(reversed(good), key=lambda s: s.size)  # the first smallest from the end: the fewer bits of a tie

    def having(self, *kinds: str) -> tuple[Standing, ...]:
        return tuple(s for s in self.rungs if s.kind in kinds)

    @property
    def by_kld(self) -> tuple[Standing, ...]:
        """The rungs whose KLD was measured, the lowest first (how far the distributions moved: not a verdict)."""
        return tuple(sorted((s for s in self.rungs if s.kld is not None), key=lambda s: s.kld))


def _standing(r: Rung) -> Standing:
    e, s = r.verdict, r.settled
    kld = None if r.kld is None or r.kld.mean != r.kld.mean else r.kld.mean
    if e is None:
        return Standing(r.quant, r.run, "", "no common item", None, r.n, kld=kld, size=r.size)
    items = e.items if e.kind == UNSETTLED else None
    if s is not None:  # (none at a margin no difference can exceed: Rung)
        lk = s.look
        need, basis = _needed(r) if lk.verdict == UNSETTLED else (None, "")
        fixed = (words(e.kind, e.margin), e.n) if r.fixed_n_settled else ("", 0)
        return Standing(r.quant, r.run, lk.verdict, lk.words, lk.margin, lk.n, need, True, f"look {lk.k} of {s.looks}",
                        lk.note, kld, lk.exact, s.next_look, s.max_items, s.reach, r.size, basis, *fixed)
    said = words(e.kind, e.margin) if e.kind not in (UNSETTLED, UNDEFINED) else \
        f"cannot tell yet within {e.margin:g}" if e.kind == UNSETTLED else "cannot tell"
    return Standing(r.quant, r.run, e.kind, said, e.margin, e.n, items, note=e.note, kld=kld, exact=e.exact,
                    size=r.size)


def _needed(r: Rung) -> tuple[int | None, str]:
    """(items, basis) of what settles an open rule's rung at a fixed n, beside its fixed-n verdict (the one rule of its
    keep line, text, JSON and the HTML page): that verdict settled, none (:attr:`Rung.fixed_n_settled`); its figure
    far beyond the rule's next look, the rule's estimate its advice grows the run to (settled.Reach, labelled there);
    the fixed-n verdict cannot tell yet, its own figure (compare's, as its column says it); else the rule's estimate,
    labelled for what it is (settled.SCALED), if any."""
    s, e = r.settled, r.verdict
    if r.fixed_n_settled:
        return None, ""
    if s.reach is None and e is not None and e.kind == UNSETTLED:
        return e.items, ""
    return s.needed, s.basis if s.needed is not None else ""


def choices(rungs: Sequence[Rung]) -> tuple[Choice, ...]:
    """A :class:`Choice` per ladder of ``rungs`` (:func:`ladders`' order: each reference, then its rungs down)."""
    out: list[Choice] = []
    for r in rungs:
        if r.is_reference:
            out.append(Choice(r.base, r.task, r.ladder, r.quant, "", ()))
        elif out:
            c = out[-1]
            metric = c.metric or (r.verdict.metric if r.verdict is not None else "")
            out[-1] = replace(c, metric=metric, rungs=(*c.rungs, _standing(r)))
    return tuple(out)
