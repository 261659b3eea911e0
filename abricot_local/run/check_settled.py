"""`check` of a `--until-settled` run: its rules' looks taken again over its samples (run/settle.py's replay), each
task's said in one note, what differs a difference of the run (or a note, for a record whose verdicts an earlier
method read)."""

from __future__ import annotations

from pathlib import Path

from abricot_local.errors import AbricotError
from abricot_local.record import Record, Sample


def settled_differences(record: Record, runs, read: dict[str, list[Sample]], home: Path) -> tuple[list[str], list[str]]:
    """A --until-settled run's rules taken again over its samples in the nested order (run/settle.py's replay: each
    look's verdict exactly, its intervals within a tolerance), and its stop where the last rule stopped; and what
    could not be taken again (a rung whose reference's folder is not here), as notes."""
    from abricot_local.run import settle, settle_record

    from abricot_local.analysis.reproduction import METHOD

    method = record.published.method if record.published is not None else METHOD
    earlier = (method, METHOD) if (method or 0) < METHOD else None  # None: no method recorded, the earliest
    out, notes, stops = [], [], []
    for run in runs:
        key, recorded = run.task.key, record.tasks[run.task.key].sequential
        if recorded is None:
            continue
        by_id = {s.id: s for s in read[key]}
        ordered = [by_id[i] for i in run.nested() if i in by_id]
        stops.append(recorded.n)
        reference = ()
        if any(q.published is None for q in recorded.questions):  # a rung: its reference's samples, item by item
            try:
                reference = settle.reference_samples(settle.Pairs("", home / (recorded.reference or ""), 0), key,
                                                     [s.id for s in ordered])
            except (AbricotError, OSError) as err:
                notes.append(f"{key}: its looks read the reference run in {recorded.reference}, which cannot be "
                             f"read here ({err}): not taken again")
                continue
        differs = [f"{key} {line}" for line in settle.replay(recorded, run.task, ordered, reference)]
        if differs and earlier:  # read by an earlier verdict method: today's may read a look otherwise
            notes.append(f"{key}: its rule's looks were read by verdict method {earlier[0]}, today's is "
                         f"{earlier[1]}; taken again they read otherwise (not held against the run): "
                         + "; ".join(differs))
            continue
        out += differs
        notes.append(_replayed(key, recorded, differs, settle.INTERVAL_TOLERANCE))
    if stops and record.config.sample != max(stops) and settle_record.stopped(record):
        out.append(f"sequential: the run holds {record.config.sample} items of each task, its rules stopped at "
                   f"{max(stops)}")
    return out, notes


def _replayed(key: str, recorded, differs: list[str], tolerance: float) -> str:
    """What check says of a task's rule it took again: how many looks, at which items, against what, and whether
    every one came back as recorded (``differs``: what did not, said with the record's differences)."""
    looks = sorted({(lk.k, lk.n) for lk in recorded.looks})
    at = ", ".join(str(n) for _, n in looks)
    against = f" against the reference run in {recorded.reference}" if recorded.reference else ""
    said = (f"not as recorded ({len(differs)} difference(s), below)" if differs else
            f"each as recorded (every verdict the same, every interval within {tolerance:g})")
    return (f"{key}: its rule's {len(looks)} look(s) (at {at} items) taken again over the run's "
            f"samples{against}: {said}")
