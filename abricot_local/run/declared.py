"""What a task declares of its samples (``sample_fields``: what its metrics read), held against each sample a run
writes (run/folder.py's checkpoint lines and finished samples files): a sample its readers would refuse (its line,
record.check_line; a declared field missing or of another type, record.field_problem) is refused naming the task
that made it, and nothing of it is written."""

from __future__ import annotations

from typing import Mapping

from abricot_local.errors import ResultsError, TaskError
from abricot_local.record import Sample, check_line
from abricot_local.record.samples import field_problem
from abricot_local.tasks import base_name, task_class
from abricot_local.tasks.item_check import where


class Declared:
    """Each task's declaration (by its run key), read once: its ``sample_fields`` and the task as a refusal names it
    (``task 'x' (module.Class)``; a task not known here declares none and has no such name: "")."""

    def __init__(self) -> None:
        self._by_task: dict[str, tuple[Mapping, str]] = {}

    def _of(self, task: str) -> tuple[Mapping, str]:
        if task not in self._by_task:
            try:
                kind = task_class(task)
                self._by_task[task] = (kind.sample_fields, where(kind, base_name(task)))
            except TaskError:
                self._by_task[task] = ({}, "")
        return self._by_task[task]

    def _refusal(self, task: str, what: str) -> TaskError:
        return TaskError(f"{self._of(task)[1] or f'task {base_name(task)!r}'} made a sample its readers would "
                         f"refuse{what}; nothing of it was written: mend the task's items() or sample()")

    def line(self, task: str, sample: Sample, where_: str) -> None:
        """Refuse ``sample`` of ``task`` (its key) whose line a reader refuses (record.check_line, ``where_`` the file
        it is for): a task's sample() made it, the task named (one not known here: the reader's refusal as it is);
        then :meth:`fields`."""
        try:
            check_line(sample, where_)
        except ResultsError as err:
            if self._of(task)[1]:
                raise self._refusal(task, f": {err.raw()}") from None
            raise
        self.fields(task, sample)

    def fields(self, task: str, sample: Sample) -> None:
        """Refuse a sample of ``task`` (its key) that lacks a field its task declares (``sample_fields``: what its
        metrics read) or holds one of another type: the rule every reader keeps (record.field_problem; a task not
        known here declares none, as its readers take it), so a run never writes a file they refuse."""
        fields = self._of(task)[0]
        found = field_problem(sample, fields)
        if found:
            name, why = found
            tp = fields[name]
            declared = f"its sample_fields declare {name} {getattr(tp, '__name__', tp)}"
            raise self._refusal(task, f" (item {sample.id!r}): " + (f"it lacks the field {name!r} ({declared})"
                                                                    if why is None else f"{why} ({declared})"))
