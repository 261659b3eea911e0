"""Published references (declared by the tasks) and how a run is checked against them.

A registry entry's ``reproduces`` field names the published rows a model should
match, as ``"ABRICOT paper: llama-3.1-8b; CALAMITA leaderboard: Llama-3.1-8B-Instruct"``:
each part is ``SOURCE: MODEL``, SOURCE a task reference's ``source`` or one of
its ``aliases`` (case-insensitive). A part names every reference of that model
in that source, over all tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from abricot_local.record import PublishedCheck, TaskEntry
from abricot_local.tasks.base import Reference


def all_references(tasks: tuple[str, ...] | None = None) -> tuple[Reference, ...]:
    """The published references of every registered task (or of ``tasks``)."""
    from abricot_local.tasks import all_task_names, make_task
    from abricot_local.tasks.base import TaskOptions

    out: list[Reference] = []
    for name in tasks if tasks is not None else all_task_names():
        try:
            out.extend(make_task(name, TaskOptions(allow_download=False)).references())
        except Exception:  # an unknown task recorded by another version has no references here
            continue
    return tuple(out)


def _source_matches(ref: Reference, label: str) -> bool:
    label = label.strip().lower()
    return label == ref.source.lower() or label in (a.lower() for a in ref.aliases)


def find(source: str, model: str, refs: tuple[Reference, ...] | None = None) -> tuple[Reference, ...]:
    """The references of ``model`` in ``source`` (case-insensitive), over all tasks."""
    refs = all_references() if refs is None else refs
    return tuple(r for r in refs if _source_matches(r, source) and r.model.lower() == model.strip().lower())


def parse_reproduces(text: str, refs: tuple[Reference, ...] | None = None
                     ) -> tuple[tuple[Reference, ...], tuple[str, ...]]:
    """The references a registry ``reproduces`` field names, and the parts that name none."""
    refs = all_references() if refs is None else refs
    found: list[Reference] = []
    unknown: list[str] = []
    for part in (p.strip() for p in (text or "").split(";")):
        if not part:
            continue
        label, sep, model = part.partition(":")
        rows = find(label, model, refs) if sep else ()
        if not rows:
            unknown.append(part)
        found.extend(r for r in rows if r not in found)
    return tuple(found), tuple(unknown)


def group_rows(refs: tuple[Reference, ...]) -> list[tuple[str, str, dict[str, float]]]:
    """References as published rows: (model, source, {"task.metric": value})."""
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for r in refs:
        rows.setdefault((r.model, r.source), {})[f"{r.task}.{r.metric}"] = r.value
    return [(m, s, v) for (m, s), v in rows.items()]


@dataclass(frozen=True)
class CICheck:
    """Whether one published value lies inside a run's 95% CI for that task and metric."""

    reference: Reference
    value: float | None  # the run's point estimate (None: the run lacks the task)
    ci: tuple[float, float] | None
    notes: tuple[str, ...] = ()

    @property
    def task(self) -> str:
        return self.reference.task

    @property
    def published(self) -> float:
        return self.reference.value

    @property
    def difference(self) -> float | None:
        return None if self.value is None else self.value - self.published

    @property
    def inside(self) -> bool | None:
        """True/False; None when the run has no (finite) CI for the task."""
        if self.ci is None or any(c != c for c in self.ci):
            return None
        return self.ci[0] <= self.published <= self.ci[1]

    @property
    def text(self) -> str:
        """``0.22 in CI? yes`` (``n/a`` when there is no CI to check against)."""
        answer = {True: "yes", False: "no", None: "n/a"}[self.inside]
        return f"{self.published:.2f} in CI? {answer}"

    def to_record(self) -> PublishedCheck:
        """The check as results.json's ``published.checks`` records it."""
        return PublishedCheck(reference=self.reference.model, source=self.reference.source, task=self.task,
                              metric=self.reference.metric, published=self.published, value=self.value,
                              ci95=self.ci, difference=self.difference, inside=self.inside, notes=self.notes)


def protocol_notes(ref: Reference, task_config: dict) -> tuple[str, ...]:
    """Where a run's task settings differ from how ``ref`` was produced."""
    notes = []
    for key, want in ref.protocol:
        got = task_config.get(key)
        if want is not None and got is not None and got != want:
            notes.append(f"{key} {got} (published: {want})")
    return tuple(notes)


def check(ref: Reference, entry: TaskEntry | None) -> CICheck:
    """Compare ``ref`` with a run's task entry."""
    if entry is None:
        return CICheck(ref, None, None, ("the run has no such task",))
    ci = entry.metrics.get(f"{ref.metric}_ci95")
    return CICheck(ref, entry.metrics.get(ref.metric), (float(ci[0]), float(ci[1])) if ci else None,
                   protocol_notes(ref, entry.config))
