"""What ``--resume`` finds in an output folder: a run it continues (the checkpoint), the finished run
it is (nothing to score), or a finished ``--sample`` run it grows (``--sample`` larger, nothing else
changed: record.growth; the n items drawn lie inside the m, tasks.selection.sample_order, and with
--shard K/N shard K of the n inside shard K of the m, tasks.selection.dealt: every item held is kept),
which is reopened into a checkpoint before the new items are scored (its record kept there as
``.checkpoint/grown-from.json``, :data:`GROWN_FROM`: a grow cut after its first new item still knows the looks the
run's rules took, settle_record.earlier_in). A smaller ``--sample`` is refused: a run does not shrink
(record.resume_refusal). The folder's writer is run/folder.py.

Which thread count scored the items a checkpoint holds (``.checkpoint/threads.jsonl``, :func:`thread_parts`): a
line ``{"threads": T, "calls": N}`` written by each process before its first item and before each item whose
scoring made N more decode calls that depend on the thread count (docs/numerics.md#threads). A --resume whose
count is not the one those calls were made with is refused (:func:`thread_refusal`): its record could state no
one thread count."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from abricot_local.errors import AbricotError, ResultsError, opt
from abricot_local.jsonfiles import atomic_write, dumps_line, write_error
from abricot_local.record import (CHECKPOINT, RESULTS, RUN_MANIFEST, Manifest, Record, growth, read_manifest, read_run,
                                  read_samples, resume_refusal, same_items, sample_words, write_manifest,
                                  write_record)
from abricot_local.record.kernel_path import Part, part
from abricot_local.record.outputs import SAMPLES_GLOB, samples_name, task_of
from abricot_local.run.owned import close_own, open_own, refuse_link, remove_own

THREADS = "threads.jsonl"  # in the checkpoint: the thread counts that scored its items (kernel_path.Part each line)
GROWN_FROM = "grown-from.json"  # in a grow's checkpoint: the record of the finished run it grows (reopen)
OWN_FILES = (RUN_MANIFEST, THREADS, GROWN_FROM)  # the checkpoint's files a run makes besides its tasks' samples


def resumable(out_dir: Path) -> bool:
    """Whether ``out_dir`` holds a run that --resume continues (its recorded manifest)."""
    return (Path(out_dir) / CHECKPOINT / RUN_MANIFEST).is_file()


def finished_in(folder: Path | None, sample: int | None) -> Record | None:
    """The finished run in a --resume's ``folder`` (its results.json) when a resume with ``sample`` scores no item
    it does not hold (none, or the whole of every task as it records them: record.same_items); None when it holds
    none, one that cannot be read (the resume says why as it takes the folder), or one that ``sample`` grows (its
    data is fetched as any run's). What the resume's plan takes of a task whose data is not here (run.plan: a
    finished run needs no data; :func:`finished_run` tells whether it is this one)."""
    try:
        record = read_run(folder) if folder is not None and (Path(folder) / RESULTS).is_file() else None
    except (AbricotError, OSError):
        return None  # (a link in its place: refused as the resume takes the folder, finished_run)
    n = record.manifest.config.sample if record is not None and record.manifest is not None else None
    if record is not None and n is not None and sample is not None and sample > n and \
            not same_items(n, sample, [t.available for t in record.tasks.values()]):
        return None  # a grow: new items scored, their data needed (no --sample: refused, record.growth)
    return record


def finished_run(folder: str | Path, manifest: Manifest) -> Record | None:
    """With --resume: the finished run in ``folder`` when it is this run (None when the folder
    holds no finished run, or one this run grows: :func:`grows`); a run of other options, model or
    data is refused, naming them, and so is a smaller --sample."""
    folder = Path(folder)
    refuse_link(folder / RESULTS)
    if not (folder / RESULTS).is_file():
        return None
    record = read_run(folder)
    why = _finished_refusal(folder, record, manifest)
    if why:
        raise ResultsError(why)
    return None if growth(record.manifest, manifest) else record


def _finished_refusal(folder: Path, record: Record, manifest: Manifest) -> str:
    if record.manifest is None:
        return f"{folder / RESULTS} records no manifest: it cannot be resumed"
    return resume_refusal(folder, record.manifest, manifest) or ""


def refusal(folder: str | Path, manifest: Manifest) -> str:
    """Why a --resume of ``manifest`` cannot take the run in ``folder`` ("" when it can, or the folder holds none):
    its checkpoint's recorded manifest, else its finished run's, compared by record.resume_refusal. The one rule
    OutputDir.check and :func:`finished_run` refuse by, and ``run --dry-run --resume`` says (its plan's manifest as
    far as a dry plan knows it: run.saved.as_recorded)."""
    folder = Path(folder)
    if resumable(folder):
        return resume_refusal(folder, read_manifest(folder / CHECKPOINT / RUN_MANIFEST), manifest) or ""
    return _finished_refusal(folder, read_run(folder), manifest) if (folder / RESULTS).is_file() else ""


def recorded_manifest(folder: str | Path) -> Manifest | None:
    """The manifest a --resume in ``folder`` is compared with (:func:`refusal`'s): its checkpoint's, else its
    finished run's; None when it holds neither."""
    folder = Path(folder)
    if resumable(folder):
        return read_manifest(folder / CHECKPOINT / RUN_MANIFEST)
    return read_run(folder).manifest if (folder / RESULTS).is_file() else None


def nothing_to_resume(folder: str | Path) -> str:
    """A --resume's refusal of a folder that does not exist (a typo in --out, or a run never started there)."""
    return (f"nothing to resume: {folder} does not exist; check the folder given as {opt('out')}, or start the run "
            f"there without {opt('resume', True)}")


def starts_there(folder: str | Path) -> str:
    """What a --resume says of an existing folder that holds nothing of a run (empty, or a lock a run killed before
    it showed its state left): the run starts there, from its first item."""
    return f"nothing saved in {folder}: the run starts there"


def grows(folder: str | Path, manifest: Manifest) -> tuple[int, int] | None:
    """(n, m) when a --resume of ``manifest`` in ``folder`` grows the run there (its checkpoint, else its
    finished record) from ``--sample n`` to m; else None (the same run, another, or none)."""
    try:
        recorded = recorded_manifest(folder)
    except ResultsError:
        return None  # a damaged record: taking the folder says what is wrong
    return None if recorded is None else growth(recorded, manifest)


def asked_growth(folder: Path | None, m: int | None) -> tuple[int, int] | None:
    """(n, m) when the finished run in ``folder`` records ``--sample n`` (a run --until-settled: the items it holds)
    below the ``m`` a --resume asks for (its --sample; --until-settled: its --max-items): what a signal before the
    resume's plan is made says it grows (run_folder.RunFolder.interrupted); once made, the plan's :func:`grows`."""
    try:
        record = read_run(folder) if folder is not None and m is not None and (folder / RESULTS).is_file() else None
    except (AbricotError, OSError):
        return None
    n = record.manifest.config.sample if record is not None and record.manifest is not None else None
    return (n, m) if n is not None and m > n else None


def starts_afresh(folder: str | Path, failed: bool) -> str:
    """What a --resume says of a folder whose run failed (``failed``; else was interrupted) before its first item: it
    starts there afresh, with its own options (the ones recorded there are not carried)."""
    return (f"nothing saved in {folder}: the run there {'failed' if failed else 'was interrupted'} before its first "
            "item, so this one starts there afresh with its own options (the recorded ones are not carried)")


def without_data(folder: Path, grown: tuple[int, int] | None, run, bound: str = "sample") -> str:
    """Why a --resume that scores items into the finished run in ``folder`` (``grown``: it grows it, --sample n -> m;
    ``bound`` "max_items": a run --until-settled, its bound --max-items) is refused when a task's data is not here
    (``run``: a tasks.selection.TaskRun planned from the run's record, run.plan: the finished run needed none), and how
    to get it."""
    more = f"grows the finished run there {grown_words(grown, bound)}" if grown else "scores items into the finished run there"
    return f"cannot resume {folder}: it {more}, which needs the data of {run.task.key}: {run.problem}"


def grown_words(grown: tuple[int, int], bound: str = "sample") -> str:
    """What a grow (n, m) takes a run from and to: ``from --sample n to --sample m``; a run --until-settled (``bound``
    "max_items") from the n items it holds (its rule may have stopped below its --max-items) to --max-items m."""
    n, m = grown
    return f"from {opt(bound, n) if bound == 'sample' else f'the {n} items it holds'} to {sample_words(m, bound)}"


def reopen(folder: Path, manifest: Manifest) -> None:
    """The finished run in ``folder`` (held: its lock taken), which ``manifest`` grows, made an unfinished
    run of ``manifest``: its samples carried into the checkpoint as they were written (none is scored
    again), its record kept there (:data:`GROWN_FROM`: what its rules took, for a --resume of this grow
    cut short), the new manifest written, then its results.json and samples files removed, so the folder
    shows what it holds (RUNNING, then INTERRUPTED or finished anew), never a results file for part of
    the run. In this order every step is safe to cut: until results.json goes, the finished run is whole (what a stop
    wrote of the checkpoint is its copies: OutputDir.unopened, tidied away); from then on the checkpoint holds every
    item (a samples file still beside it is read as saved items too): the grow INTERRUPTED, and a --resume completes
    it."""
    folder = Path(folder)
    record = read_run(folder)
    ckpt = folder / CHECKPOINT
    ckpt.mkdir(exist_ok=True)
    refuse_link(ckpt, folder=True)
    names = [samples_name(t) for t in record.tasks]
    for name in names:
        refuse_link(folder / name)
        rows = read_samples(folder / name, required=False)
        atomic_write(ckpt / name, "".join(dumps_line(r.line) for r in rows))
    refuse_link(ckpt / THREADS)
    atomic_write(ckpt / THREADS, part_line(part(record.provenance)))  # the finished run is one part of the larger
    refuse_link(ckpt / GROWN_FROM)
    write_record(ckpt / GROWN_FROM, record)
    write_manifest(ckpt / RUN_MANIFEST, manifest)
    remove_own(folder / RESULTS)
    for name in names:
        remove_own(folder / name)


def part_line(p: Part) -> str:
    return dumps_line({"threads": p[0], "calls": p[1]})


def holds_items(folder: Path) -> bool:
    """Whether ``folder``'s checkpoint holds a saved item (a samples file not empty)."""
    ckpt = Path(folder) / CHECKPOINT
    return ckpt.is_dir() and any(f.stat().st_size for f in ckpt.glob(SAMPLES_GLOB)
                               if task_of(f.name) is not None and not f.is_symlink())


def _read_part(line: str) -> Part:
    """A line of threads.jsonl; a value that is no count (a line changed by hand): not known."""
    try:
        obj = json.loads(line)
    except ValueError:
        obj = None
    t, c = (obj.get("threads"), obj.get("calls")) if isinstance(obj, dict) else (None, None)
    ok = lambda v, low: v if isinstance(v, int) and not isinstance(v, bool) and v >= low else None  # noqa: E731
    return ok(t, 1), ok(c, 0)


def thread_parts(folder: Path) -> list[Part]:
    """The parts that scored the items ``folder``'s checkpoint holds, one per line of its threads.jsonl (a torn
    last line, whose item was not written, left out); items saved by an abricot-local that kept no such file:
    one part whose count and calls are not known; no item saved: none."""
    path = Path(folder) / CHECKPOINT / THREADS
    if not holds_items(folder):
        return []
    refuse_link(path)  # (a link: said as every file of the run's is)
    try:
        with open_own(path, os.O_RDONLY, "r") as fh:
            text = fh.read()
    except FileNotFoundError:
        return [(None, None)]
    except OSError as exc:
        raise ResultsError(f"cannot read {path}: {exc.strerror or exc}") from None
    lines = text.split("\n")
    return [_read_part(line) for line in lines[:-1] if line.strip()]  # the last: "" after a whole line, else torn


def thread_refusal(folder: Path, earlier: list[Part], threads: int | None) -> str:
    """Why a --resume with ``threads`` cannot score more items into ``folder`` ("" when it can): the items there
    (``earlier``: their parts) made decode calls that depend on the thread count with another count, so no one
    count would make the run's numbers, and `check` could reproduce neither part."""
    calls: dict[int, int] = {}
    for t, c in earlier:
        if t is not None and c:
            calls[t] = calls.get(t, 0) + c
    other = [t for t in sorted(calls) if t != threads]
    if threads is None or not other:
        return ""
    said = " and ".join(f"{counted(t, 'thread')} ({counted(calls[t], 'decode call')} depending on it)"
                        for t in sorted(calls))
    return (f"the items saved in {folder} were scored with {said}: docs/numerics.md#threads; this run has "
            f"{counted(threads, 'thread')}: its items' numbers would be made with another count, and no one count "
            "would make the run's; " + (f"resume {_with_threads(folder, other[0])}" if len(calls) == 1
                                         else "score the run again into a new folder"))


def _with_threads(folder: Path, threads: int) -> str:
    """How a --resume of ``folder`` runs at ``threads`` threads (:func:`with_threads`; the backend read from the
    run's recorded manifest, not known where it cannot be read)."""
    kind = ""  # not known: said without the option
    try:
        config = (read_manifest(Path(folder) / CHECKPOINT / RUN_MANIFEST).config if resumable(folder)
                  else read_run(folder).config)  # (a finished run it grows)
        kind = (config.backend if config is not None else None) or ""
    except (AbricotError, OSError):
        pass
    return with_threads(kind, threads)


def takes_threads(kind: str) -> bool:
    """Whether backend ``kind`` has a ``threads`` option a user sets (``backends.has_option``; not known: False)."""
    from abricot_local.backends import has_option

    try:
        return bool(kind) and has_option(kind, "threads")
    except AbricotError:
        return False


def with_threads(kind: str, threads: int, shard: str | None = None) -> str:
    """How to score again at ``threads`` threads with backend ``kind`` ("" where not known): with its ``threads``
    option where it has one (:func:`takes_threads`), else where the backend's own settings make that count; with
    ``shard`` (`merge`'s advice for that shard), into a new folder too: in words, no one door's command."""
    said = opt("threads", threads)
    into = ", into a new folder" if shard is not None else ""
    if takes_threads(kind):
        return f"with {said}{into}"
    if not kind:
        return f"with {counted(threads, 'thread')} ({said} where the backend has that option){into}"
    return (f"with the backend running {counted(threads, 'thread')} (backend {kind!r} has no {opt('threads')} "
            f"option: its own settings or environment set the count){into}")


def counted(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


class ThreadLog:
    """A run folder's threads.jsonl as one process writes it: its thread count before its first item, and the
    thread-dependent decode calls made since the last item before the next (a call counted is on disk before
    its item)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.counted: Callable[[], int] | None = None  # the backend's thread-dependent decode calls so far
        self.threads: Callable[[], int | None] = lambda: None  # its thread count, asked once
        self.logged = 0  # of this process's calls, those written
        self.fh = None  # the file, once this process wrote to it

    def start(self, threads: Callable[[], int | None], counted: Callable[[], int], earlier: list[Part] | None) -> None:
        """The backend that scores from now; refused (:func:`thread_refusal`) when ``earlier`` (the parts of
        the items saved; None: the checkpoint's) made thread-dependent calls with another thread count."""
        memo: list = []
        self.threads = lambda: memo[0] if memo else memo.append(threads()) or memo[0]
        self.counted, self.logged = counted, counted()
        earlier = thread_parts(self.folder) if earlier is None else earlier
        if any(c for _, c in earlier):
            refusal = thread_refusal(self.folder, earlier, self.threads())
            if refusal:
                raise ResultsError(refusal)

    def note(self) -> None:
        """Before an item is appended: this process's part, and the calls made since the last item."""
        calls = self.counted() - self.logged if self.counted is not None else 0
        if self.counted is None or (self.fh is not None and not calls):
            return
        ckpt = self.folder / CHECKPOINT
        path, lines = ckpt / THREADS, ""
        try:
            if self.fh is None:
                held = holds_items(self.folder)  # saved by an abricot-local that kept no threads.jsonl: not known
                lines = part_line((None, None)) if held and not path.exists() else ""
                ckpt.mkdir(parents=True, exist_ok=True)
                refuse_link(ckpt, folder=True)  # nothing saved: a stale file (a run that failed) is not kept
                self.fh = open_own(path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if held else os.O_TRUNC),
                                   "a" if held else "w")
            self.fh.write(lines + part_line((self.threads(), calls)))
            self.fh.flush()
            if calls:
                os.fsync(self.fh.fileno())
        except OSError as exc:
            self.close()
            raise write_error(path, exc) from None
        self.logged += calls

    def close(self, *, sync: bool = False) -> None:
        if self.fh is not None:
            close_own(self.fh, sync=sync)
        self.fh = None


def remargined(record: Record, margin: float | None) -> bool:
    """Whether ``margin`` (a --resume's ``--margin``; None, not given: the recorded one kept) is another than the
    one the finished run ``record``'s published verdict was judged at (None there: each task's declared margin); a
    run with no published row has no verdict to judge again."""
    published = record.published
    return margin is not None and published is not None and bool(published.checks) and published.margin != margin
