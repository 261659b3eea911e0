"""An example abricot-local task plugin: the capital (capoluogo) of an Italian region, 4-way.

A complete task in one module: its data (a file shipped with the package), its
prompt, its metric and its declarations. Registered in pyproject.toml under the
entry-point group ``abricot_local.tasks``; nothing in abricot-local changes.

It is written for version 2 of the task contract (``contract = 2``): ``metrics()``
reads each sample as a ``Sample`` (``s.pred``, ``s.gold``; a task's own fields in ``s.fields``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from abricot_local.errors import DataError
from abricot_local.metrics import with_ci
from abricot_local.record import Sample
from abricot_local.tasks.base import DataSpec, Figure, Item, Task, text_hash

DESCRIPTION = "Rispondi alle domande di geografia italiana indicando la lettera della risposta corretta.\n\n"
PROMPT = "Domanda: Qual è il capoluogo della regione {regione}?\nA. {0}\nB. {1}\nC. {2}\nD. {3}\nRisposta:"
LETTERS = ("A", "B", "C", "D")
SHIPPED = Path(__file__).with_name("capitali.jsonl")


class CapitaliTask(Task):
    name = "capitali"
    version = "1"
    contract = 2  # the task contract it is written for (docs/tasks-and-plugins.md)
    description = "Example plugin: the capital of an Italian region, 4-way multiple choice"
    metric_names = ("accuracy",)
    primary_metric = "accuracy"
    chance = {"accuracy": 0.25}
    sources = ("nord", "centro", "sud")
    figures = (Figure("confusion", metric="accuracy"),)
    data = DataSpec(key="capitali", kind="file", files=("capitali*.jsonl",),
                    how="It ships with the plugin; or give another file with --data capitali=FILE.",
                    description="16 regions with four candidate cities each")

    def data_path(self) -> Path:
        """A file given with --data capitali=FILE (or in --data-dir), else the shipped one."""
        try:
            return super().data_path()
        except DataError:
            if self.options.data_for(self.data.key, self.name):
                raise
            return SHIPPED

    def items(self) -> list[Item]:
        path = self.data_path()
        items = []
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                prompt = PROMPT.format(*row["scelte"], regione=row["regione"])
                gold = int(row["gold"])
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise DataError(f"{path}, line {line_no}: not a valid item ({exc})") from None
            items.append(Item(id=row["id"], source=row.get("area", ""),
                              context=DESCRIPTION + prompt, choices=tuple(row["scelte"]),
                              continuations=tuple(" " + x for x in LETTERS), gold=gold))
        return items

    def prompt_hash(self) -> str:
        return text_hash(DESCRIPTION, PROMPT, *LETTERS)

    def metrics(self, samples: Sequence[Sample]) -> dict:
        pred = np.array([s.pred for s in samples])
        gold = np.array([s.gold for s in samples])
        acc, ci = with_ci("accuracy", pred, gold, seed=self.options.seed)
        return {"accuracy": acc, "accuracy_ci95": ci}
