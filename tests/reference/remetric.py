"""Recompute the committed reference runs' metrics from their samples with this version's code, and
rewrite each results.json with them; the samples, the log-probabilities and every other field stay as
they are. Run it when a metric's computation changes (issue 47: an accuracy's CI became Wilson's):

    python tests/reference/remetric.py

`check` (and tests/test_reference.py) then finds the record and its samples in agreement again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from abricot_local.analysis.runs import recompute
from abricot_local.record import read_run, write_record

HERE = Path(__file__).resolve().parent

for folder in sorted(p for p in HERE.iterdir() if (p / "results.json").is_file()):
    record = read_run(folder)
    fresh = {c.task: c for c in recompute(folder)}
    tasks = {name: replace(entry, metrics={k: v for k, v in fresh[name].recomputed.items() if k != "n"})
             for name, entry in record.tasks.items()}
    moved = {name: c.mismatches for name, c in fresh.items() if c.mismatches}
    write_record(folder / "results.json", replace(record, tasks=tasks))
    print(f"{folder.name}: {moved or 'no metric moved'}")
