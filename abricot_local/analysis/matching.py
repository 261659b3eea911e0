"""Which runs a comparison pairs on each task, and the items they share (compare.py).

A task is compared among the runs that have it (after alignment.py has paired the instances one
prompt was recorded under), over the items all of those runs scored alike: the same id and the same
scored context (SHA-256 of the sample's ``context``), in id order (each pair over the items both of its runs
scored alike, :func:`pair_items`, when those are more); ``by_id`` (`compare --by-id`): the
same id alone, each pair one item scored under two contexts (another seed, say), said in the notes
and each verdict (:func:`by_id_note`, :func:`by_id_words`). A run without the task is named
in the task's note and takes no part in it; two runs that share no compared task are not paired.
``by_id`` also pairs one task's instances recorded under other keys (``abricot_abs`` of a `--protocol paper`
run, ``abricot_abs@calamita`` of a `--protocol calamita` one: :func:`paired_by_id`). The runs are labelled over
the tasks they compare (:func:`compared_runs`). Each task's runs are judged against its own reference
(equivalence.references over them). A comparison is refused only when no two runs share an item in any task."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Sequence

from abricot_local.analysis.alignment import align
from abricot_local.analysis.equivalence import references
from abricot_local.analysis.labels import unique_labels
from abricot_local.analysis.runs import Run
from abricot_local.errors import ResultsError, opt
from abricot_local.record import Sample
from abricot_local.tasks import base_name


@dataclass(frozen=True)
class TaskMatch:
    task: str
    n: tuple[int | None, ...]  # items per run, in the runs' order (None: the run has not the task)
    n_common: int
    n_context_differs: int  # ids every run of the task has whose scored context differs between them
    paired_on: str = "id+context"  # PAIRED_ON: what makes two runs' samples one item (ID: `compare --by-id`)


CONTEXT, ID = "id+context", "id"  # TaskMatch.paired_on: the same id and scored context (the default), the id alone


def item_key(sample: Sample) -> tuple[str, str]:
    """(id, SHA-256 of the scored context): what makes two runs' samples the same item."""
    return sample.id, hashlib.sha256(str(sample.context).encode("utf-8")).hexdigest()


def match(runs: Sequence[Run], task: str, by_id: bool = False) -> tuple[TaskMatch, list[tuple[Sample, ...]]]:
    """The items every run scored alike, in id order: per run its samples of them. ``by_id``: the items
    every run has, on their id alone (``n_context_differs``: those of them scored under other contexts)."""
    keyed = [{item_key(s): s for s in r.task(task).samples} for r in runs]
    alike = set.intersection(*(set(k) for k in keyed))
    ids = set.intersection(*({i for i, _ in k} for k in keyed))
    if by_id:
        by = [{i: s for (i, _), s in k.items()} for k in keyed]
        common = sorted(ids)
        m = TaskMatch(task, tuple(len(k) for k in keyed), len(common), len(ids) - len(alike), ID)
        return m, [tuple(k[i] for i in common) for k in by]
    common = sorted(alike)
    m = TaskMatch(task, tuple(len(k) for k in keyed), len(common), len(ids) - len(common))
    return m, [tuple(k[key] for key in common) for k in keyed]


def n_other_context(xs: Sequence[Sample], ys: Sequence[Sample]) -> int:
    """How many of two runs' paired samples (in the same order) were scored under another context."""
    return sum(item_key(x)[1] != item_key(y)[1] for x, y in zip(xs, ys))


def by_id_words(k: int, n: int) -> str:
    """What a pair paired on id alone compared: "paired by id, the scored context differing on 40 of 40 items"."""
    return f"paired by id, the scored context differing on {k} of {n} item{'s' * (n != 1)}"


def by_id_note(m: TaskMatch) -> str:
    """The note of a task paired on id alone: what each pair is, and what it is not."""
    return (f"task {m.task}: items paired by id alone, the scored context differing on {m.n_context_differs} of "
            f"{m.n_common} common items: each pair is one item under two contexts ({WHY}), not two runs on the same "
            "prompts (docs/compare.md)")


OWN_ITEMS = "each pair is compared over the items both of its runs scored alike"  # own_items_note's words


def pair_items(group: Sequence[Run], i: int, j: int, task: str, by_id: bool, m: TaskMatch,
               per_run: Sequence[tuple[Sample, ...]]) -> tuple[tuple[Sample, ...], tuple[Sample, ...], bool]:
    """The items runs ``i`` and ``j`` of ``group`` are compared over on ``task``: the items both scored alike (the
    most the pair's data supports), whose samples, and whether they are more than the ``m.n_common`` items common
    to all of ``group`` (``per_run``: those, :func:`match`'s); the very ``per_run`` samples when they are not."""
    if len(group) > 2 and min(m.n[i], m.n[j]) > m.n_common:  # (else the pair has no item more)
        xs, ys = match([group[i], group[j]], task, by_id)[1]
        if len(xs) > m.n_common:
            return xs, ys, True
    return per_run[i], per_run[j], False


def own_items_note(task: str, n_common: int, n_runs: int, wider: Sequence[tuple[str, str, int]]) -> str:
    """The note of a task whose runs scored different items: the pairs compared over more than the ``n_common`` items
    all ``n_runs`` runs share (``wider``: (a, b, their items)), and what those common items are still for."""
    rest = n_runs * (n_runs - 1) // 2 - len(wider)
    pairs = [f"{a} vs {b} on {n}" for a, b, n in wider]
    pairs += [f"the other pair{'s' * (rest != 1)} on the {n_common} all {n_runs} runs share"] if rest else []
    return (f"task {task}: its runs scored different items, so {OWN_ITEMS} ({'; '.join(pairs)}); the best group, "
            f"and the common items of compare's first table, are over the {n_common} items all {n_runs} runs share")


def paired_by_id(runs: Sequence[Run]) -> tuple[list[Run], list[str], list[str]]:
    """``by_id``'s pairing of one task's instances under other keys (after alignment.py's): per task (its
    base name), an instance that no other run holds under its key is compared under the first such run's key
    when every run holding one holds exactly one (a `--protocol paper` run's ``abricot_abs`` and a `--protocol
    calamita` run's ``abricot_abs@calamita``: the same items, by id); with several on a run, none of them is (which
    to pair is the user's: Run.only). The runs, a note per instance paired or task left, and the pairs in words."""
    runs, notes, pairs = list(runs), [], []
    held: dict[str, list[int]] = {}  # instance key -> the runs holding it
    for k, r in enumerate(runs):
        for t in r.run_tasks:
            held.setdefault(t.name, []).append(k)
    left: dict[str, dict[int, list[str]]] = {}  # base task -> run -> its instances no other run holds
    for name, ks in held.items():
        if len(ks) == 1:
            left.setdefault(base_name(name), {}).setdefault(ks[0], []).append(name)
    for task, per in left.items():
        if len(per) < 2:
            continue
        names = {k: ", ".join(v) for k, v in per.items()}
        if any(len(v) > 1 for v in per.values()):
            notes.append(f"task {task}: {opt('by_id')} pairs one instance of a task per run, and these runs hold "
                         f"several not paired by key ({'; '.join(f'{runs[k].label}: {n}' for k, n in names.items())}"
                         "): none of them is compared (from Python, Run.only(KEY) keeps the one to compare)")
            continue
        (first, [key]), *rest = per.items()
        for k, [own] in rest:
            runs[k] = replace(runs[k], run_tasks=tuple(t.renamed(key) if t.name == own else t
                                                       for t in runs[k].run_tasks))
            pairs.append(f"{runs[k].label}'s {own} with {runs[first].label}'s {key}")
            notes.append(f"task {key}: run {runs[k].label} recorded it as {own}; paired with run {runs[first].label}'s "
                         f"by id alone ({opt('by_id')}: each holds one instance of task {task} not paired by key)")
    return runs, notes, pairs


def _aligned(runs: Sequence[Run], by_id: bool) -> tuple[list[Run], list[str]]:
    runs, notes = align(runs)
    if by_id:
        runs, more, _ = paired_by_id(runs)
        notes += more
    return runs, notes


def compared_runs(runs: Sequence[Run], by_id: bool = False) -> tuple[list[Run], list[str]]:
    """The runs labelled over the task instances they compare (labels.unique_labels: an option that differs between
    those, not the runs' others), with their instances paired (alignment.align; ``by_id``: :func:`paired_by_id`),
    and a note per instance paired under another key."""
    found, _ = _aligned(runs, by_id)  # which instances are compared (the labels do not change it)
    shared = {task for task, members in taking_part(found) if len(members) > 1}
    keys = [{t.own_key for t in r.run_tasks if t.name in shared} for r in found]
    over = [replace(r, run_tasks=tuple(t for t in r.run_tasks if t.own_key in ks))  # the record whole: Run.identity
            if ks else r for r, ks in zip(runs, keys)]  # no task compared: the whole run (a refusal names it)
    labels = unique_labels([r.identity for r in over])
    return _aligned([replace(r, label=lab) for r, lab in zip(runs, labels)], by_id)


def taking_part(runs: Sequence[Run]) -> list[tuple[str, tuple[int, ...]]]:
    """Per task (the first run's in its order, then the others' as they come), the indices of the runs
    that have it."""
    names = dict.fromkeys(t.name for r in runs for t in r.run_tasks)
    return [(task, tuple(k for k, r in enumerate(runs) if r.task(task))) for task in names]


def spread(m: TaskMatch, members: Sequence[int], n_runs: int) -> TaskMatch:
    """``m`` (a match of the runs ``members``) with its items per run over all ``n_runs`` runs."""
    per = dict(zip(members, m.n))
    return replace(m, n=tuple(per.get(k) for k in range(n_runs)))


def _labels(runs: Sequence[Run]) -> str:
    return ", ".join(r.label for r in runs)


def absent_notes(runs: Sequence[Run], tasks: Sequence[tuple[str, tuple[int, ...]]]) -> list[str]:
    """A note per task not in every run: which runs it is compared among, and which lack it."""
    out = []
    for task, members in tasks:
        if len(members) < 2:
            out.append(f"task {task} is not in every run: not compared")
        elif len(members) < len(runs):
            out.append(f"task {task} is not in every run: compared among {_labels([runs[k] for k in members])}; "
                       f"not in {_labels([r for k, r in enumerate(runs) if k not in members])}")
    return out


def no_common_note(runs: Sequence[Run], m: TaskMatch, members: Sequence[int], by_id: bool = False) -> str:
    """A task whose runs share no item: its runs named, and (the ids they share under other contexts) how many
    and the way forward."""
    mine = "all runs" if len(members) == len(runs) else f"its runs {_labels([runs[k] for k in members])}"
    same = _same_ids([m])
    return (f"task {m.task}: no item in common to {mine} ({_SAME[by_id]})"
            + (f": {same}{_way_forward()}" if same else ""))


def task_references(group: Sequence[Run], reference: str | None, task: str,
                    notes: list[str]) -> tuple[tuple[str, str], ...]:
    """(run, its reference) on ``task`` among ``group`` (its runs): ``reference`` (a label, checked against
    every run already) when it is one of them, else equivalence.references' default, with a note."""
    labels = [r.label for r in group]
    if reference is None or reference in labels:
        return references(group, reference)
    refs = references(group)
    notes.append(f"task {task}: the reference {reference} does not have this task; its runs are judged against "
                 f"{', '.join(dict.fromkeys(ref for _, ref in refs))} (the default reference, docs/compare.md)")
    return refs


def not_paired(runs: Sequence[Run], paired: set[tuple[str, str]]) -> list[str]:
    """The note naming the pairs of runs that share no compared task (none: every pair is paired)."""
    left = [f"{x.label} and {y.label}" for x, y in combinations(runs, 2) if (x.label, y.label) not in paired]
    return [f"not paired (no compared task in common): {'; '.join(left)}"] if left else []


WHY = "another seed, prompt variant, shot count or chat template"  # why one id was scored under two contexts
WHY_CONTEXT = f"{WHY}: see docs/compare.md"
SAME_IDS = "an id but not the scored context"  # what two runs' items share under another seed (WHY_CONTEXT)
_SAME = {False: "same id and scored context", True: "same id"}  # an item in common, without and with by_id


def _way_forward() -> str:
    """The end of a refusal whose runs share ids but not contexts: the pairing on id alone."""
    return (f"; to pair them on id alone (each item under its two contexts: is the result sensitive to the seed?), "
            f"compare with {opt('by_id', True)}")


def _counts(matches: Sequence[TaskMatch]) -> str:
    """The items that share an id but not the scored context in ``matches`` (a pair's, on the tasks it
    shares), per task: "127 in abricot_inc, 12 in discotex" ("" when none)."""
    return ", ".join(f"{m.n_context_differs} in {m.task}" for m in matches if m.n_context_differs)


def _same_ids(matches: Sequence[TaskMatch]) -> str:
    """What two runs' items that share an id but not the scored context are, in words ("" when none):
    "127 items share an id but not ... (another seed, ...)" on their one task."""
    counts = [m.n_context_differs for m in matches if m.n_context_differs]
    if len(matches) == 1 and counts:
        n = counts[0]
        return f"{n} item{'s' * (n != 1)} share{'s' * (n == 1)} {SAME_IDS} ({WHY_CONTEXT})"
    return f"items that share {SAME_IDS}: {_counts(matches)} ({WHY_CONTEXT})" if counts else ""


def refusal(runs: Sequence[Run], tasks: Sequence[tuple[str, tuple[int, ...]]], by_id: bool = False) -> ResultsError:
    """Why nothing was compared: no two runs share an item in a task they both have (the runs named, and
    the items that share an id but not the scored context: another seed, say, with the way forward, the
    pairing on id alone), or no task has an item common to all the runs that have it."""
    def shared(x: int, y: int) -> list[str]:
        return [t for t, members in tasks if x in members and y in members]

    matched = {(x, y): [match([runs[x], runs[y]], t, by_id)[0] for t in shared(x, y)]
               for x, y in combinations(range(len(runs)), 2)}
    pairs = [(x, y) for (x, y), ms in matched.items() if any(m.n_common for m in ms)]
    alike = "same id" if by_id else "same id and same scored context"
    forward = _way_forward() if any(_counts(ms) for ms in matched.values()) else ""  # by_id: none counted
    _, several, keyed = paired_by_id(runs)  # one task's instances under other keys (by_id: those it could not pair)
    if not by_id and not forward and keyed:
        forward = (f"; to pair one task's instances recorded under other keys on their ids ({'; '.join(keyed)}: each "
                   f"item under its two contexts), compare with {opt('by_id', True)}")
    forward += "".join(f"; {n}" for n in several if not forward or by_id)
    if not pairs:
        if len(runs) == 2:
            where = ", ".join(shared(0, 1)) or "any task: they share no task"
            same = _same_ids(matched[(0, 1)])
            x, y = runs
            return ResultsError(f"runs {x.label} ({x.path}) and {y.label} ({y.path}) have no common items ({alike}) "
                                f"in {where}{': ' + same if same else ''}; nothing to compare{forward}")
        names = ", ".join(f"{r.label} ({r.path})" for r in runs)
        where = ", ".join(t for t, members in tasks if len(members) > 1)
        same = "; ".join(f"{runs[x].label} and {runs[y].label}: {text}" for (x, y), ms in matched.items()
                         if (text := _counts(ms)))
        same = f"; items that share {SAME_IDS}: {same} ({WHY_CONTEXT})" if same else ""
        return ResultsError(f"runs {names}: no two of them have common items ({alike}) in "
                            f"{'a task both ran (' + where + ')' if where else 'any task: no two share a task'}"
                            f"{same}; nothing to compare{forward}")
    names = ", ".join(f"{r.label} ({r.path})" for r in runs)
    some = "; ".join(f"{runs[x].label} and {runs[y].label}" for x, y in pairs)
    return ResultsError(f"runs {names}: no task has an item in common to all the runs that have it; compare fewer "
                        f"runs at once (these share items: {some}){forward}")
