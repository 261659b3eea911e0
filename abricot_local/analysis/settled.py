"""A ``--until-settled`` run's own verdict on a published row its rule judged (:func:`settled_verdict`): the rule's,
at the look it stopped at, in the run's own line; what the fixed-n verdict beside it is (:data:`FIXED_N`). Read by
`report` (overview.py) and the API's ``Run.published()`` (frames.py). Pure: reads a record."""

from __future__ import annotations

from dataclasses import dataclass

from abricot_local.analysis import sequential as sq
from abricot_local.record import PublishedCheck, Record

# what the fixed-n verdict of a row a --until-settled rule judged is, beside the rule's (console.settled's words)
FIXED_N = "the fixed-n 90% verdict over the same items: it does not account for the looks this run took"


@dataclass(frozen=True)
class SettledVerdict:
    """A published row as the ``--until-settled`` rule of the run that waited for it judged it, at the look the
    rule stopped at: the run's verdict. ``line``: the run's own verdict line (sequential.Sequential.line, the
    row's name left out: its words, at which look of how many, its interval, its guarantee)."""

    look: sq.Look
    looks: int  # the looks the rule planned
    line: str

    @property
    def verdict(self) -> str:
        return self.look.verdict

    @property
    def words(self) -> str:
        return self.look.words

    def to_json(self) -> dict:
        lk = self.look
        return {"verdict": lk.verdict, "words": lk.words, "settled": lk.settled, "look": lk.k, "looks": self.looks,
                "n": lk.n, "total": lk.total, "level": lk.level, "interval": list(lk.running) if lk.running else None,
                "line": self.line}


def settled_verdict(record: Record, check: PublishedCheck) -> SettledVerdict | None:
    """The verdict a run's ``--until-settled`` rule (its ``record``'s) reached on ``check``'s row (its question
    named as run/settle.py names it: sequential.question_name), at the look the task's rule stopped at; None
    for a row no rule waited for (a run without the rule, a row not made as the run's task instance)."""
    entry = record.tasks.get(check.task)
    if entry is None or entry.sequential is None:
        return None
    state = sq.from_recorded(entry.sequential.to_dict())
    name = sq.question_name(check.source, check.reference, check.task, check.metric)
    lk = next((lk for lk in state.latest if lk.question == name), None)
    return None if lk is None else SettledVerdict(lk, len(state.planned), state.line(lk).removeprefix(f"{name}: "))
