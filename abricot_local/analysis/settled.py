"""A ``--until-settled`` run's own verdict on a published row its rule judged (:func:`settled_verdict`): the rule's,
at the look it stopped at, in the run's own line; what the fixed-n verdict beside it is (:data:`FIXED_N`: at the
margin the rule read, the run's ``--margin`` else the task's, so the two differ by the looks alone). Such a row's
every field is the rule's (:meth:`SettledVerdict.fields`: its verdict, its interval at its look and level, what settles
it: the next look, the ``--max-items`` a grow takes it at), the fixed-n figures under ``fixed_n``. Read by
`report` (overview.py, report/tables.py) and the API's ``Run.published()`` (frames.py). A rule and its record, typed both ways
(:func:`restored`, :func:`record_of`: sequential.Sequential <-> record.Settle, field by field). Pure: reads a record."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from abricot_local.analysis import sequential as sq
from abricot_local.analysis.reproduction import words as fixed_n_words
from abricot_local.errors import keywords, opt, recorded_words, render
from abricot_local.record import PublishedCheck, Record, Settle, SettleLook, SettleQuestion

# what the fixed-n verdict of a row a --until-settled rule judged is, beside the rule's (console.settled's words)
FIXED_N = ("the fixed-n 90% verdict over the same items, at the rule's margin: it does not account for the looks "
           "this run took")


def restored(recorded: Settle) -> sq.Sequential:
    """A recorded rule (``tasks.<key>.sequential``) as the ``sequential.Sequential`` it was: the one reader of a
    recorded rule (its lines, its replay, a grown run's looks already taken, a report's verdict)."""
    r = recorded
    return sq.Sequential(
        total=r.total, planned=r.planned, alpha=r.alpha, seed=r.seed, spend=r.spend,
        questions=tuple(sq.Question(name=q.name, stat=q.stat, margin=q.margin, published=q.published,
                                    rounding=q.rounding) for q in r.questions),
        looks=tuple(sq.Look(question=lk.question, k=lk.k, n=lk.n, total=lk.total, level=lk.level, margin=lk.margin,
                            verdict=lk.verdict, value=lk.value, interval=lk.interval, running=lk.running,
                            note=lk.note) for lk in r.looks))


def record_of(state: sq.Sequential, reference: str | None = None) -> Settle:
    """``state`` as results.json records it (``tasks.<key>.sequential``; ``reference``: a rung's, its reference run's
    folder named from its own): the one maker of a recorded rule (run/settle.py's section). An undefined value (NaN:
    a constant vector's correlation) is recorded as null, as :func:`restored` gives it back."""
    s = state
    return Settle(
        method=s.method, n=s.n, total=s.total, planned=tuple(s.planned), alpha=s.alpha, seed=s.seed, spend=s.spend,
        questions=tuple(SettleQuestion(name=q.name, stat=q.stat, margin=q.margin, published=_defined(q.published),
                                       rounding=q.rounding) for q in s.questions),
        looks=tuple(SettleLook(question=lk.question, k=lk.k, n=lk.n, total=lk.total, level=lk.level, margin=lk.margin,
                               verdict=lk.verdict, value=_defined(lk.value), interval=_pair(lk.interval),
                               running=_pair(lk.running), note=lk.note) for lk in s.looks),
        reference=reference)


def _defined(x: float | None) -> float | None:
    return None if isinstance(x, float) and math.isnan(x) else x


def _pair(p) -> tuple[float, float] | None:
    return None if p is None else tuple(p)


@dataclass(frozen=True)
class SettledVerdict:
    """A published row as the ``--until-settled`` rule of the run that waited for it judged it, at the look the
    rule stopped at: the run's verdict. ``line``: the run's own verdict line (sequential.Sequential.line, the
    row's name left out: its words, at which look of how many, its interval, its guarantee). ``next_look``: an open
    verdict's next look (items), the rule's own when it has not stopped, else the first a run grown by ``--resume
    --until-settled --max-items`` ``max_items`` takes (settle_record.advice's command; :func:`next_bound`); None
    when it settled or every item was scored."""

    look: sq.Look
    looks: int  # the looks the rule planned
    line: str
    next_look: int | None = None
    max_items: int | None = None

    @property
    def verdict(self) -> str:
        return self.look.verdict

    @property
    def words(self) -> str:
        return self.look.words

    @property
    def interval(self) -> tuple[float, float] | None:
        """The interval the verdict read (the looks' intervals intersected), at :attr:`level`."""
        return self.look.running

    @property
    def level(self) -> float:
        return self.look.level

    @property
    def items_to_settle(self) -> int | None:
        """What settles an open verdict, the rule's: the items of the run grown to its next look (the command's
        ``--max-items``), or the rule's own next look; None when settled (no estimate: the fixed-n one's is its own)."""
        return self.max_items or self.next_look

    @property
    def step(self) -> str:
        """What settles an open verdict, in words; "" for none."""
        if self.max_items:
            grow = f"{opt('resume', True)} {opt('until_settled', True)} {opt('max_items', self.max_items)}"
            python = f"{opt('resume', True)}, {opt('max_items', self.max_items)}"
            return (f"not settled by its last look ({self.look.n:,} items): the run grown by "
                    f"{render(grow, recorded_words)} ({render(python, keywords)} in Python) takes its next look at "
                    f"{self.next_look:,} items")
        return f"its rule's next look is at {self.next_look:,} items" if self.next_look else ""

    def to_json(self) -> dict:
        lk = self.look
        return {"verdict": lk.verdict, "words": lk.words, "settled": lk.settled, "look": lk.k, "looks": self.looks,
                "n": lk.n, "total": lk.total, "level": lk.level, "interval": list(lk.running) if lk.running else None,
                "next_look": self.next_look, "max_items": self.max_items, "items_to_settle": self.items_to_settle,
                "line": self.line}

    def fields(self, check: PublishedCheck) -> dict:
        """``check``'s row as its fields are in `report`'s JSON, every one the rule's: ``verdict`` its kind, ``ci90``
        null (its interval, at its look's level, in ``sequential``), ``items_to_settle`` :attr:`items_to_settle`,
        ``reasons`` its line then what settles it; the fixed-n verdict and its figures under ``fixed_n``."""
        return {"verdict": self.verdict, "ci90": None, "items_to_settle": self.items_to_settle,
                "reasons": [self.line, *((self.step,) if self.step else ())], "sequential": self.to_json(),
                "fixed_n": {"verdict": check.verdict, "words": fixed_n_words(check), "about": FIXED_N,
                            "ci90": list(check.ci90) if check.ci90 else None,
                            "items_to_settle": check.items_to_settle, "reasons": list(check.reasons)}}

    def notes(self, check: PublishedCheck) -> tuple[str, ...]:
        """The notes a table gives beside the row's verdict cell (the rule's line): the fixed-n verdict and each of
        its figures, every one said to be the fixed-n one, then what settles the rule's (:attr:`step`)."""
        c = check
        fixed = [f"{FIXED_N}: {c.reasons[0] if c.reasons else fixed_n_words(c)}",
                 *(f"fixed-n (does not account for the looks): {r}" for r in c.reasons[1:])]
        return (*fixed, *((self.step,) if self.step else ()))


def next_bound(record: Record) -> int | None:
    """A --until-settled run stopped at its bound with a verdict open: the items of its next look (twice the
    bound, at most the largest task); None when every verdict settled or every item was scored. The ``--max-items``
    of the command settle_record.advice prints."""
    rules = [e.sequential for e in record.tasks.values() if e.sequential is not None]
    open_ = [r for r in rules if any(lk.k == len(r.planned) and lk.verdict not in sq.SETTLED for lk in r.looks)
             and r.n < r.total]
    if not open_:
        return None
    return min(max(r.total for r in open_), 2 * max(r.n for r in open_))


def _next(record: Record, state: sq.Sequential, lk: sq.Look) -> tuple[int | None, int | None]:
    """(next look, --max-items) of ``lk``'s open verdict (:class:`SettledVerdict`)."""
    if lk.settled or lk.exact:
        return None, None
    if not state.stopped:
        return state.next_look, None
    m = next_bound(record)
    if m is None:
        return None, None
    looks = record.config.looks if record.config is not None else None
    return next((n for n in sq.planned_looks(state.total, looks, m) if n > state.n), None), m


def _judged(record: Record, task: str, names: Iterable[str]) -> SettledVerdict | None:
    """The verdict at the look ``task``'s rule stopped at on the first of its questions named one of ``names``."""
    entry = record.tasks.get(task)
    if entry is None or entry.sequential is None:
        return None
    state = restored(entry.sequential)
    wanted = set(names)
    lk = next((lk for lk in state.latest if lk.question in wanted), None)
    return None if lk is None else SettledVerdict(lk, len(state.planned),
                                                  state.line(lk).removeprefix(f"{lk.question}: "),
                                                  *_next(record, state, lk))


def settled_verdict(record: Record, check: PublishedCheck) -> SettledVerdict | None:
    """The verdict a run's ``--until-settled`` rule (its ``record``'s) reached on ``check``'s row (its question
    named as run/settle.py names it: sequential.question_name), at the look the task's rule stopped at; None
    for a row no rule waited for (a run without the rule, a row not made as the run's task instance)."""
    return _judged(record, check.task, (sq.question_name(check.source, check.reference, check.task, check.metric),))


def rung_verdict(record: Record, reference: str | Iterable[str], task: str, metric: str) -> SettledVerdict | None:
    """The verdict a rung's ``--until-settled`` rule (``run --quants --until-settled``: its ``record``'s) reached
    against ``reference`` on ``task``'s ``metric``, at the look the task's rule stopped at: its question named as
    analysis/questions.py's pair_questions names it (sequential.pair_question_name: the rung's model as the run named it,
    its registry alias, name or the name as written, then ``reference``: a name, or the names the reference run
    may have been given). None for a rung no rule judged against that reference (a run without the rule, a
    ladder whose reference is another run)."""
    refs = (reference,) if isinstance(reference, str) else tuple(reference)
    m = record.model
    mine = dict.fromkeys(n for n in (m.alias, m.name, m.as_written) if n)
    return _judged(record, task, (sq.pair_question_name(own, ref, task, metric) for own in mine for ref in refs if ref))
