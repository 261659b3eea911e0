"""What ``--resume`` finds in an output folder: a run it continues (the checkpoint), the finished run
it is (nothing to score), or a finished ``--sample`` run it grows (``--sample`` larger, nothing else
changed: record.growth; the n items drawn lie inside the m, tasks.selection.sample_order, and with
--shard K/N shard K of the n inside shard K of the m, tasks.selection.dealt: every item held is kept),
which is reopened into a checkpoint before the new items are scored. A smaller ``--sample`` is refused: a run
does not shrink (record.resume_refusal). The folder's writer is run/folder.py."""

from __future__ import annotations

from pathlib import Path

from abricot_local.errors import ResultsError
from abricot_local.jsonfiles import atomic_write, dumps_line
from abricot_local.record import (CHECKPOINT, RESULTS, RUN_MANIFEST, Manifest, Record, growth, read_manifest, read_run,
                                  read_samples, resume_refusal, write_manifest)
from abricot_local.run.owned import refuse_link, remove_own, samples_name


def resumable(out_dir: Path) -> bool:
    """Whether ``out_dir`` holds a run that --resume continues (its recorded manifest)."""
    return (Path(out_dir) / CHECKPOINT / RUN_MANIFEST).is_file()


def finished_run(folder: str | Path, manifest: Manifest) -> Record | None:
    """With --resume: the finished run in ``folder`` when it is this run (None when the folder
    holds no finished run, or one this run grows: :func:`grows`); a run of other options, model or
    data is refused, naming them, and so is a smaller --sample."""
    folder = Path(folder)
    refuse_link(folder / RESULTS)
    if not (folder / RESULTS).is_file():
        return None
    record = read_run(folder)
    if record.manifest is None:
        raise ResultsError(f"{folder / RESULTS} records no manifest: it cannot be resumed")
    refusal = resume_refusal(folder, record.manifest, manifest)
    if refusal:
        raise ResultsError(refusal)
    return None if growth(record.manifest, manifest) else record


def grows(folder: str | Path, manifest: Manifest) -> tuple[int, int] | None:
    """(n, m) when a --resume of ``manifest`` in ``folder`` grows the run there (its checkpoint, else its
    finished record) from ``--sample n`` to m; else None (the same run, another, or none)."""
    folder = Path(folder)
    try:
        if resumable(folder):
            return growth(read_manifest(folder / CHECKPOINT / RUN_MANIFEST), manifest)
        if (folder / RESULTS).is_file():
            recorded = read_run(folder).manifest
            return None if recorded is None else growth(recorded, manifest)
    except ResultsError:
        return None  # a damaged record: taking the folder says what is wrong
    return None


def reopen(folder: Path, manifest: Manifest) -> None:
    """The finished run in ``folder`` (held: its lock taken), which ``manifest`` grows, made an unfinished
    run of ``manifest``: its samples carried into the checkpoint as they were written (none is scored
    again), the new manifest written, then its results.json and samples files removed, so the folder
    shows what it holds (RUNNING, then INTERRUPTED or finished anew), never a results file for part of
    the run. In this order every step is safe to cut: a --resume completes it."""
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
    write_manifest(ckpt / RUN_MANIFEST, manifest)
    remove_own(folder / RESULTS)
    for name in names:
        remove_own(folder / name)
