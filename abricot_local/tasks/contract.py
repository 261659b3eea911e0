"""Tasks written against an earlier version of the task contract, run under today's.

The contract's version is ``tasks.base.CONTRACT``; a task says which version it is written
for in ``Task.contract``, and one that does not say is of version 1, the contract before
samples were typed: its ``sample()`` returned the line as a dict, and its ``metrics()`` and
``metric_inputs()`` took the lines as dicts (``s["pred"]``, ``s["class"]``).

The registry (``tasks.task_class``) gives every task class through :func:`adapted`: a class
of today's contract as it is; one of version 1 as a subclass that speaks today's contract
around it (:class:`Contract1`): the dict its ``sample()`` returns is validated into a
:class:`Sample` as it leaves the task, the ``Sample``s its ``metrics()`` and ``metric_inputs()``
are given reach it as the dicts it was written for. Nothing of the task changes, and the
samples files it writes are the same bytes.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

from abricot_local.errors import TaskError
from abricot_local.record.samples import Sample, check_line
from abricot_local.tasks.base import CONTRACT, Task


def _lines(samples: Sequence[Any]) -> list[dict]:
    """Samples as contract 1's dicts (each a fresh copy: a task may change what it is given)."""
    return [s.to_dict() if isinstance(s, Sample) else s for s in samples]


def _samples(samples: Sequence[Any], task: str) -> list[Sample]:
    return [s if isinstance(s, Sample) else check_line(s, f"task {task}'s sample {k}")
            for k, s in enumerate(samples, 1)]


class Contract1:
    """Today's contract around a task of version 1 (put before it in the adapted class's bases)."""

    _written_for: type[Task]  # the task's own class

    def sample(self, item, scored) -> Sample:
        line = super().sample(item, scored)  # type: ignore[misc]
        if isinstance(line, Sample):
            return line
        return check_line(line, f"task {self.name}'s sample of item {item.id!r}")  # type: ignore[attr-defined]

    def metrics(self, samples: Sequence[Sample]) -> dict:
        return super().metrics(_lines(samples))  # type: ignore[misc]

    def metric_inputs(self, samples: Sequence[Sample]):
        if self._written_for.metric_inputs is Task.metric_inputs:  # the contract's own default: Samples
            return super().metric_inputs(_samples(samples, self.name))  # type: ignore[misc,attr-defined]
        return super().metric_inputs(_lines(samples))  # type: ignore[misc]


@functools.cache
def adapted(cls: type[Task]) -> type[Task]:
    """``cls`` as a task of today's contract (the same class when it is one); a version this
    abricot-local does not know is a :class:`TaskError` naming the task and both versions."""
    written = getattr(cls, "contract", 1)
    if written == CONTRACT:
        return cls
    if written != 1:
        raise TaskError(f"task {cls.name!r} ({cls.__module__}.{cls.__qualname__}) is written for task contract "
                        f"{written!r}; this abricot-local runs contracts 1 and {CONTRACT}: upgrade abricot-local "
                        "or the task's package")
    return type(cls.__name__, (Contract1, cls), {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                                 "__doc__": cls.__doc__, "_written_for": cls})
