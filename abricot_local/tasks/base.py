"""What a task is: items to score, and metrics computed from sample records alone.

Metrics take the sample dicts exactly as written to ``samples-<task>.jsonl``,
so every number in results.json can be recomputed from the sample files.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from abricot_local.backends.base import Request, Scored


@dataclass(frozen=True)
class TaskOptions:
    """Task-side settings given on the command line; all recorded in results.json."""

    data: tuple[tuple[str, str], ...] = ()  # (task, path) from --data TASK=PATH
    data_dir: str | None = None
    seed: int = 1234
    shots: int | None = None  # None: the task's default
    prompt_variant: str = "paper"
    chat_template: bool = False
    allow_download: bool = True

    def data_for(self, task: str) -> str | None:
        return dict(self.data).get(task)


@dataclass(frozen=True)
class Item:
    """One scored question. ``context`` is the exact text before the continuation."""

    id: str
    source: str
    prefix: str
    context: str
    choices: tuple[str, ...]
    continuations: tuple[str, ...]
    gold: int
    fields: dict[str, Any] = field(default_factory=dict, compare=False)  # extra sample fields
    parse_special: bool = False

    def request(self) -> Request:
        return Request(
            context=self.context,
            continuations=self.continuations,
            prefix=self.prefix,
            label=self.id,
            parse_special=self.parse_special,
        )


@dataclass(frozen=True)
class DataFile:
    path: Path
    sha256: str


def argmax(values) -> int:
    """First index of the maximum (ties go to the earlier choice, deterministically)."""
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def text_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


class Task(ABC):
    """A benchmark task: built from data files, scored through any backend."""

    name: str
    version: str
    metric_names: tuple[str, ...]

    def __init__(self, options: TaskOptions):
        self.options = options

    @abstractmethod
    def items(self) -> list[Item]:
        """All items in release order (``--limit`` takes the first N)."""

    @abstractmethod
    def metrics(self, samples: list[dict]) -> dict:
        """Metrics from sample records (see module docstring)."""

    @abstractmethod
    def data_files(self) -> list[DataFile]:
        """The data files used, with their SHA-256."""

    def config(self) -> dict:
        """Task settings that can change a number."""
        return {"seed": self.options.seed}

    def prompt_hash(self) -> str:
        """A hash of the prompt templates, recorded in the provenance."""
        return ""

    def sample(self, item: Item, scored: Scored) -> dict:
        """The sample record of one scored item."""
        pred = argmax(scored.logprobs)
        return {
            "id": item.id,
            "source": item.source,
            "context": item.context,
            "choices": list(item.choices),
            "continuations": list(item.continuations),
            "continuation_tokens": [list(t) for t in scored.continuation_tokens],
            "logprobs": list(scored.logprobs),
            "gold": item.gold,
            "pred": pred,
            **item.fields,
        }
