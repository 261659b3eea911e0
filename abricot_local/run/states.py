"""Run folders and their states, read from what the output folder shows (run/results.py
writes it): complete (results.json), running (a RUNNING file and a live lock), stopped (RUNNING,
no process holds the lock), interrupted, failed; :func:`find_runs` lists them (``runs``,
``report``), :func:`unfinished` says why a folder holds no finished run (``check``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from abricot_local.errors import ResultsError, opt
from abricot_local.record.outputs import FAILED, LOCK, MARKERS, RUNNING, SAMPLES_GLOB, samples_name, task_of
from abricot_local.record import CHECKPOINT, RESULTS, read_run
from abricot_local.run.kept import scanned
from abricot_local.run.owned import lock_holder, refuse_link, refuse_links


@dataclass(frozen=True)
class RunState:
    """A run folder's state: complete, running, interrupted, failed, or stopped (a RUNNING
    folder whose process is gone: killed or crashed; --resume continues it)."""

    path: Path
    state: str
    done: int
    total: int | None
    detail: str = ""  # items per task, the error, the pid
    shard: str | None = None  # "K/N": the run is that part of a run's items (run --shard; `merge` joins the parts)
    resume: str = ""  # the call that resumes the run, as its state file holds it (the door's that ran it)

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def describe(self) -> str:
        """"complete, 40 of 40 items; discotex 40"; a shard's said first ("shard 1/2 of a run: complete, 20 of 20
        items"): its items are a part of its run's, not a whole run. A run stopped (killed: it said nothing) or
        failed ends with the call that resumes it, as its state file holds it (an interrupted one said it as it
        stopped: ``--resume continues``)."""
        items = f"{self.done} of {self.total} items" if self.total is not None else f"{self.done} items"
        call = f"; resume with: {self.resume}" if self.resume and self.state in ("stopped", "failed") else ""
        return (f"shard {self.shard} of a run: " if self.shard else "") + f"{self.state}, {items}" + \
            (f"; {self.detail}" if self.detail else "") + call


def _fields(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")  # a state file is ours; never a traceback
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, sep, v in (ln.partition(":") for ln in text.splitlines()) if sep}


def is_run_folder(folder: Path) -> bool:
    """A folder to list: results.json, a state file, a checkpoint folder, or a lone ``.lock`` (a run killed before
    it showed its state: stopped, --resume starts it there) (record.outputs.is_run_folder, which a run must find
    before it writes there, also wants the checkpoint's manifest); or an lm-eval output folder (its results_*.json:
    read as a run, analysis/lm_eval_input.py)."""
    return ((folder / RESULTS).is_file() or (folder / CHECKPOINT).is_dir()
            or any((folder / m).is_file() for m in MARKERS) or _lock_alone(folder) or _lm_eval(folder))


def _lock_alone(folder: Path) -> bool:
    """A folder holding only a run's ``.lock``: a run starting there, or one killed before it showed its state."""
    try:
        return (folder / LOCK).is_file() and not (folder / LOCK).is_symlink() and os.listdir(folder) == [LOCK]
    except OSError:
        return False


def _lm_eval(path: Path) -> bool:
    from abricot_local.analysis.lm_eval_input import is_lm_eval_output

    return is_lm_eval_output(path)


def lm_eval_state(path: Path) -> RunState:
    """An lm-eval output, complete: its items as its results file counts them (n-samples)."""
    from abricot_local.analysis.lm_eval_input import results_file
    from abricot_local.jsonfiles import read_json

    try:
        doc = read_json(results_file(path), ResultsError)
    except ResultsError as err:
        return RunState(path, "failed", 0, None, str(err))
    counts = doc.get("n-samples") if isinstance(doc, dict) and isinstance(doc.get("n-samples"), dict) else {}
    per = {t: c.get("effective") for t, c in counts.items()
           if isinstance(c, dict) and isinstance(c.get("effective"), int)}
    n = sum(per.values())
    return RunState(path, "complete", n, n, "lm-eval output: " + ", ".join(f"{k} {v}" for k, v in per.items()))


def run_state(folder: str | Path) -> RunState:
    """The state of one run folder, from results.json, its state file and its checkpoint."""
    folder = Path(folder)
    if not (folder / RESULTS).is_file() and _lm_eval(folder):
        return lm_eval_state(folder)
    if (folder / RESULTS).is_file():
        try:
            record = read_run(folder)
        except ResultsError as err:
            return RunState(folder, "failed", 0, None, str(err))  # names the file and what is wrong
        n = sum(t.n for t in record.tasks.values())
        return RunState(folder, "complete", n, n, ", ".join(f"{k} {v.n}" for k, v in record.tasks.items()),
                        record.config.shard if record.config is not None else None)
    holder = lock_holder(folder)  # in use: the run's own rule (owned.guard refuses such a folder in these words)
    if _lock_alone(folder):  # nothing saved, no state shown yet
        if holder is not None:
            return RunState(folder, "running", 0, None, "starting")
        return RunState(folder, "stopped", 0, None, f"killed before it started; {opt('resume', True)} starts it there")
    marker = next((m for m in MARKERS if (folder / m).is_file()), None)
    fields = _fields(folder / marker) if marker else {}
    totals = {}
    for part in filter(None, (p.strip() for p in fields.get("totals", "").split(","))):
        task, _, n = part.partition("=")
        if n.isdigit():
            totals[task] = int(n)
    problems: list[str] = []
    try:
        refuse_links(folder)  # a link where the run keeps its files: what a run and a dry run refuse, said first
    except ResultsError as err:
        problems.append(_refused(err.raw()))
    done = saved_counts(folder, totals, problems)
    total = sum(totals.values()) if totals else None
    per = items_text(done, totals).partition("(")[2].rstrip(")")
    n = sum(done.values())
    resumes = problems[0] if problems else f"{opt('resume', True)} continues"  # what the resume refuses: said

    def detail(*parts: str) -> str:
        return "; ".join(p for p in (*parts, per) if p)

    shard, call = _checkpoint_shard(folder), fields.get("resume", "")
    if marker == RUNNING:
        if holder is not None:
            return RunState(folder, "running", n, total,
                            detail(f"pid {fields.get('pid', '?')} since {fields.get('started', '?')}"), shard, call)
        return RunState(folder, "stopped", n, total, detail(  # (the call it holds said last: describe)
            f"process {fields.get('pid', '?')} no longer holds it (killed or crashed)", "" if call and not problems
            else resumes), shard, call)
    if holder is not None:  # a run that took the folder and has not shown its state yet (a --resume loading)
        return RunState(folder, "running", n, total, detail(f"pid {holder or '?'}, starting"), shard, call)
    if marker == FAILED:
        return RunState(folder, "failed", n, total, "; ".join([fields.get("error", "unknown error"), *problems[:1]]),
                        shard, call)
    return RunState(folder, "interrupted", n, total, detail(resumes), shard, call)


def _checkpoint_shard(folder: Path) -> str | None:
    """The shard an unfinished run scores (its checkpoint's recorded config), None when none or not read."""
    config = _checkpoint_config(folder)
    return config.shard if config is not None else None


def recorded_tasks(folder: Path) -> tuple[str, ...]:
    """The task keys the unfinished run in ``folder`` records (its checkpoint's config), () when none or not read."""
    from abricot_local.record.settings import task_keys

    return task_keys(_checkpoint_config(folder))


def _checkpoint_config(folder: Path):
    """An unfinished run's recorded config (its checkpoint's manifest), None when none or not read."""
    from abricot_local.errors import AbricotError
    from abricot_local.record import RUN_MANIFEST, read_manifest

    path = folder / CHECKPOINT / RUN_MANIFEST
    try:
        return read_manifest(path).config if path.is_file() and not path.is_symlink() else None
    except (AbricotError, OSError):
        return None


def unfinished(folder: str | Path) -> str | None:
    """Why ``folder`` holds no finished run to read, from its state (None: it holds one, or is
    no run folder): a run still writing it, interrupted, stopped or failed, and how to go on."""
    folder = Path(folder)
    if (folder / RESULTS).is_file() or not folder.is_dir() or not is_run_folder(folder) or _lm_eval(folder):
        return None
    state = run_state(folder)
    then = {"running": "a run is still writing it; wait for it to finish",
            "failed": f"finish it with the same run and {opt('resume', True)} once the cause is fixed"}.get(
        state.state, f"finish it with the same run and {opt('resume', True)}")
    return f"{folder} holds no finished run ({state.describe()}): {then}"


def find_runs(paths) -> list[RunState]:
    """Run folders under each path (itself, and any folder below it: a run inside another run's
    folder too, which `run` now refuses but earlier versions made), in path order."""
    out: list[RunState] = []
    for given in paths:
        root = Path(given)
        if not root.exists():
            raise ResultsError(f"run folder not found: {root}")
        if root.is_file() and _lm_eval(root):  # an lm-eval results file
            out.append(lm_eval_state(root))
            continue
        if not root.is_dir():
            raise ResultsError(f"{root} is not a folder (give the {opt('out')} folder of a run, or a folder of runs)")
        if is_run_folder(root):
            out.append(run_state(root))
        for here, dirs, _ in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != CHECKPOINT)  # a checkpoint holds no run
            out.extend(run_state(Path(here) / d) for d in dirs if is_run_folder(Path(here) / d))
    return out


def saved_counts(folder: Path, tasks: Iterable[str] = (), problems: list[str] | None = None) -> dict[str, int]:
    """Items on disk per task in a run folder (finished samples files and the checkpoint; :func:`_saved_ids`)."""
    return {task: len(ids) for task, ids in _saved_ids(folder, tasks, problems).items()}


def _saved_ids(folder: Path, tasks: Iterable[str] = (), problems: list[str] | None = None) -> dict[str, set]:
    """The ids of the items on disk per task in a run folder (finished samples files and the checkpoint), keyed by
    the task of each file's name (record.outputs.task_of), or by its key among ``tasks`` (the run's task keys: one
    whose file name is not the key itself, a ``/`` in a plugin's variant, is found by its samples_name); each file
    read by the rule a --resume reads it by (:func:`saved_lines`), what it refuses (a line that is no sample; a file
    that is a link or no regular file: owned.refuse_link, not read through) said in ``problems``."""
    folder = Path(folder)
    found: dict[str, set] = {}
    named = {samples_name(t): t for t in tasks}
    for where in (folder, folder / CHECKPOINT):
        for f in sorted(where.glob(SAMPLES_GLOB)) if where.is_dir() and not where.is_symlink() else []:
            task = named.get(f.name, task_of(f.name))
            if task is None:
                continue  # not the run's own
            try:
                refuse_link(f)
            except ResultsError as err:
                if problems is not None:
                    problems.append(_refused(err.raw()))
                continue
            ids, refused = saved_lines(f)
            if refused and problems is not None:
                problems.append(refused)
            found[task] = found.get(task, set()) | ids
    return found


def saved_lines(path: Path) -> tuple[set, str]:
    """The ids of the saved items of a samples file as a --resume reads them (run.kept.scanned), and what the
    resume says of it where it refuses it ("" when it does not): its first line that is JSON but no sample, or the
    file itself (one that cannot be read: too large: nothing of it counted)."""
    try:
        scan = scanned(path)
    except ResultsError as err:
        return set(), _refused(err.raw())
    return {s.id for s in scan.samples}, "" if scan.refused is None else (
        f"damaged: {scan.refused.raw()}: {opt('resume', True)} refuses it; delete that line (its item is scored again)")


def _refused(why: str) -> str:
    """What `runs` says of a samples file the resume refuses as a whole (``why``: the resume's words)."""
    return f"{opt('resume', True)} refuses it: {why}"


def items_text(done: dict[str, int], totals: dict[str, int]) -> str:
    """"12 of 40 items (discotex 12/40)"; without totals, "12 items (discotex 12)"."""
    tasks = list(totals) or list(done)
    n = sum(done.get(t, 0) for t in tasks)
    per = ", ".join(f"{t} {done.get(t, 0)}" + (f"/{totals[t]}" if t in totals else "") for t in tasks)
    head = f"{n} of {sum(totals.values())} items" if totals else f"{n} items"
    return f"{head} ({per})" if per else head
