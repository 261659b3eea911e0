"""A ``--until-settled`` run's recorded rules read back (``tasks.<key>.sequential``): whether they all stopped
(:func:`stopped`), their verdict lines (:func:`lines`), the bound a run open at its last look goes on to
(:func:`next_bound`) and the advice that says so (:func:`advice`: one text for the CLI and the API). The rule's making,
its looks and ``check``'s replay are settle.py's."""

from __future__ import annotations

from abricot_local.analysis import sequential as sq
from abricot_local.errors import opt
from abricot_local.record import Record, TaskEntry
from abricot_local.record.schema import Settle


def restored(recorded: Settle) -> sq.Sequential:
    """A recorded rule as a ``sequential.Sequential`` (its lines, its replay)."""
    return sq.from_recorded(recorded.to_dict())


def stopped(record: Record) -> bool:
    """Whether every rule of a --until-settled run's record has stopped (a rung paused at the sweep's look has not)."""
    rules = [e.sequential for e in record.tasks.values() if e.sequential is not None]
    return bool(rules) and all(restored(r).stopped for r in rules)


def lines(entries: dict[str, TaskEntry]) -> list[str]:
    """The verdict lines of a run's rules: each verdict at its last look, reached how, where, with what guarantee."""
    out = []
    for key, entry in entries.items():
        if entry.sequential is None:
            continue
        state = restored(entry.sequential)
        out += [state.line(lk) for lk in state.latest]
    return out


def next_bound(record: Record) -> int | None:
    """A --until-settled run stopped at its bound with a verdict open: the items of its next look (twice the
    bound, at most the largest task); None when every verdict settled or every item was scored."""
    rules = [e.sequential for e in record.tasks.values() if e.sequential is not None]
    open_ = [r for r in rules if any(lk.k == len(r.planned) and lk.verdict not in sq.SETTLED for lk in r.looks)
             and r.n < r.total]
    if not open_:
        return None
    return min(max(r.total for r in open_), 2 * max(r.n for r in open_))


def advice(record: Record, command) -> str:
    """A --until-settled run that stopped at its bound with a verdict open: the bound's last look was taken (its
    verdict line says `look k of k`), and a larger bound plans more (``command(m)``: a door's words for the run
    grown to ``m`` items, still --until-settled), first each open verdict whose last look had no interval, with why
    (its note: too few items off a vector's commonest value, with the count; a constant vector), which more items
    help only if the answers vary; "" otherwise."""
    m = next_bound(record)
    if m is None:
        return ""
    said = "".join(f"{lk.question}: no interval at {lk.n} items ({lk.note}): more items help only if the answers "
                   "vary; " for e in record.tasks.values() if e.sequential is not None
                   for lk in restored(e.sequential).open if lk.interval is None and lk.note)
    return (f"not settled by {opt('max_items', record.config.sample)}, its last look: {said}{opt('max_items', m)} "
            f"plans a look at {m} items, and the run goes on to it (the items it holds kept, the error still spent "
            f"across the looks):\n  {command(m)}")
