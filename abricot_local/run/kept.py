"""The one reader of an output folder's saved lines: what a --resume keeps of them, and what its dry run and the
run's own plan lines count by (:func:`held`, given the folder and the plan). Per task of the plan, its samples files
(its finished one, a cut finish's, then its checkpoint's) are read in this module alone: each refused where it is a
link or no regular file (owned.refuse_link: never read through), its lines read (:func:`read_saved`: a line that is
damaged, not JSON, or an id found twice with other content, is set aside and its item scored again; one that is JSON
but no sample is refused, by the one rule :func:`scan_saved`, which `runs` counts by too: run.states), then each line
vouched for by the item the resume rebuilds (:func:`gives`: its id, context, choices, continuations, gold,
prediction and the task's own fields, byte for byte, from the log-probs it records). What is kept is the line as
written, so a resumed run's samples are an uninterrupted run's; what a task's files give is a frozen :class:`Kept`
(:func:`kept_lines`: run/folder.py's writer keeps by it, cutting a torn checkpoint line, so the dry run's "saved" is
what the resume then keeps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from abricot_local.core import Scored
from abricot_local.errors import ResultsError, opt
from abricot_local.jsonfiles import MAX_JSONL_BYTES, BadJSON, dumps_line, loads, read_regular
from abricot_local.record import CHECKPOINT, RESULTS, Sample, check_line, read_run, read_samples
from abricot_local.record.outputs import samples_name
from abricot_local.run.owned import refuse_link


@dataclass(frozen=True)
class Held:
    """What a plan's --out holds before it starts (:func:`held`, the one reading of its saved lines: the dry run's,
    saved.held_items, and a run's own plan lines): per task of the plan, how many of its items a --resume keeps
    there (``saved``: empty when it holds none), where a --resume of a folder holding no run starts (``starts``:
    resume.starts_there; "" otherwise), and whether the finished ``--until-settled`` run there is this one, stopped
    where it settled (``stopped``: saved.finished, nothing scored); the last two the dry run's."""

    saved: Mapping[str, int] = field(default_factory=dict)
    starts: str = ""
    stopped: bool = False


def held(folder: Path | None, plan) -> Held:
    """How many of its items a --resume of ``plan`` (run.plan.Plan: the dry run's, its items those the resume
    rebuilds; or the run's own) in ``folder`` keeps per task, by :func:`kept_lines` and nothing written; a task with
    no items (a dry plan's whose data is not here) is left out. A finished run no task of the plan grows past the
    items its record counts is the one the resume returns as it is: all kept; one it grows that would set a line
    aside is the resume's refusal (:func:`grow_refusal`). No folder (None, or none there yet): nothing held."""
    if folder is None or not Path(folder).is_dir():
        return Held()
    folder = Path(folder)
    runs = [r for r in plan.runs if r.items]
    done = (folder / RESULTS).is_file()
    if done:
        tasks = read_run(folder).tasks  # (a damaged record: the resume's error too)
        if all(r.task.key in tasks and len(r.items) <= tasks[r.task.key].n for r in runs):
            return Held({r.task.key: len({it.id for it in r.items}) for r in runs})  # as it is: nothing scored
    saved = {}
    for r in runs:
        kept = kept_lines(folder, r.task.key, r, chat=plan.task_options.chat_template)
        if done and (why := kept.why(r.task.key)):
            raise ResultsError(grow_refusal(folder, why[0]))
        saved[r.task.key] = len(set(kept.found) & {it.id for it in r.items})
    return Held(saved)


@dataclass(frozen=True)
class Kept:
    """What a --resume keeps of one task's saved lines (:func:`kept_lines`): ``found``, the samples by id as written
    (lines of items the plan does not hold included: not scored, not counted), and what it sets aside, each item
    scored again: the ``damaged`` lines ("PATH line N") and the ids whose line its item does not give (``changed``)."""

    found: Mapping[str, Sample]
    damaged: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()

    def why(self, task: str) -> tuple[str, ...]:
        """What the resume says of the lines set aside (a line each: the damaged ones, then the changed ones)."""
        off = self.changed
        return (*([f"{', '.join(self.damaged)}: damaged"] if self.damaged else []),
                *([f"{task}: the saved line of item {off[0]!r}" + (f" and {len(off) - 1} more" if len(off) > 1 else "")
                   + " is not what its item gives (changed, or another run's)"] if off else []))


def kept_lines(folder: Path, task: str, run=None, *, repair: bool = False, chat: bool = False) -> Kept:
    """The one rule of what a --resume in ``folder`` keeps of ``task``'s saved lines (its finished samples file, a
    cut finish's, then its checkpoint's; an id in both: the first), and what it sets aside: each file read by
    :func:`read_saved` (a damaged line, an id twice with other content: set aside; a line that is no sample: its
    refusal raised), then, given ``run`` (a tasks.selection.TaskRun as the resume rebuilds it), each line of one of
    its items vouched for by :func:`gives`. A file there that is a link or no regular file is refused
    (owned.refuse_link: the run's own refusal; a dry run reads nothing through it). ``repair``: the checkpoint's torn
    last line cut from the file (the resume's; what is kept is the same without). ``chat`` (a dry run's plan under a
    chat template: no model to render it): each item taken in the context its line records, the rest of the line
    vouched for."""
    folder, name = Path(folder), samples_name(task)
    found: dict[str, Sample] = {}
    damaged: list[str] = []
    for path in (folder / name, folder / CHECKPOINT / name):
        refuse_link(path)  # a link or a folder there: the run's refusal, never read through (`runs` says it too)
        rows, bad = read_saved(path, repair=repair and path.parent == folder / CHECKPOINT)
        damaged += [f"{path} line {n}" for n in bad]
        for s in rows:
            found.setdefault(s.id, s)
    items = {it.id: it for it in run.items} if run is not None else {}
    changed = tuple(i for i, s in found.items() if i in items and not gives(
        run.task, items[i].in_chat(s.context) if chat else items[i], s))
    for i in changed:
        del found[i]
    return Kept(found, tuple(damaged), changed)


def grow_refusal(folder: Path, why: str) -> str:
    """Why a --resume does not grow the finished run in ``folder`` (``why``: a line :meth:`Kept.why` gives): a saved
    line of it would be set aside, so it was changed."""
    return (f"{why}: the finished run in {folder} was changed, so it does not grow; `check` says more, or run it anew "
            f"in another {opt('out')}")


def read_saved(path: Path, *, repair: bool) -> tuple[list[Sample], list[int]]:
    """The samples of a checkpoint's (or a cut finish's) samples file, in file order, and the numbers of the lines
    set aside: damaged (not JSON: what a crash or a failing disk leaves, cut, zeros, garbage) or an id found again
    with other content (both lines: which is right cannot be told). A torn last line is cut (``repair``) as
    record.read_samples cuts it. A line that is JSON but no sample that holds together was written by something
    else (a hand, a tool): refused, naming it, with what to do; so is a file that cannot be read at all (a link)."""
    scan = scanned(path, repair=repair)  # what is wrong with the file itself raises here
    if scan.refused is not None:
        raise ResultsError(f"{scan.refused.raw()}: the checkpoint was changed; delete that line (its item is scored "
                           "again) and resume") from None
    return list(scan.samples), list(scan.off)


def gives(task, item, sample: Sample) -> bool:
    """Whether ``task`` makes ``sample``'s line, byte for byte, from ``item`` (as the resume rebuilt it) and the
    log-probs and continuation tokens the line records: nothing the item gives was changed (a prediction that is
    not the log-probs' either)."""
    try:
        scored = Scored(logprobs=tuple(sample.logprobs), n_context_tokens=0, fast_path=False,
                        continuation_tokens=tuple(tuple(t) for t in (sample.continuation_tokens or ())))
        again = task.sample(item, scored)
        again = again if isinstance(again, Sample) else check_line(again, "the sample its item gives")
        return dumps_line(again.line) == dumps_line(sample.line)
    except Exception:  # noqa: BLE001 - a line the task cannot remake is not vouched for: its item is scored again
        return False


@dataclass(frozen=True)
class SavedScan:
    """A samples file read line by line (:func:`scan_saved`): the ``samples`` kept, in file order; the numbers of the
    lines set aside (``off``); the first line that is JSON but no sample (``refused``: None when none)."""

    samples: tuple[Sample, ...]
    off: tuple[int, ...]
    refused: ResultsError | None


def scanned(path: Path, *, repair: bool = False) -> SavedScan:
    """A samples file's lines as a --resume reads them, :func:`read_saved`'s and `runs`' (run.states.saved_lines): read
    whole where they hold together (record.read_samples: a torn last line dropped, cut with ``repair``; none when the
    file is not there), else line by line (:func:`scan_saved`). Raises ResultsError when the file itself cannot be
    read (a link, too large)."""
    try:
        return SavedScan(tuple(read_samples(path, repair=repair, required=False)), (), None)
    except ResultsError:
        return scan_saved(path)


def scan_saved(path: Path) -> SavedScan:
    """The one rule a checkpoint's lines are read by where they do not hold together (:func:`scanned`): a line that
    is not JSON (what a crash or a failing disk leaves) is set aside, and so is every line of an id found again with
    other content (which is right cannot be told); a line that is JSON but no sample is the ``refused`` one. Raises
    ResultsError when the file itself cannot be read (a link, too large)."""
    data = read_regular(path, MAX_JSONL_BYTES)
    kept: dict[str, tuple[int, Sample | None]] = {}
    off: list[int] = []
    refused = None
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            sample = check_line(loads(raw), f"{path} line {number}")
        except BadJSON:
            off.append(number)
            continue
        except ResultsError as err:
            refused = refused or err
            continue
        if sample.id not in kept:
            kept[sample.id] = (number, sample)
            continue
        first, was = kept[sample.id]
        if was is None:  # an id already set aside: this line too
            off.append(number)
        elif dumps_line(was.line) != dumps_line(sample.line):
            off += [first, number]
            kept[sample.id] = (first, None)
    return SavedScan(tuple(s for _, s in kept.values() if s is not None), tuple(sorted(off)), refused)
