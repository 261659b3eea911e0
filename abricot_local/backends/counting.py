"""A backend that counts instead of decoding: the work a run's engine will do (``run --dry-run``,
the plan lines every run prints first), measured by running that engine's own class over a session
that decodes nothing. Its ``score_many`` is the run's (engines.py), so the items go through the run's
own loop (run/execute.py) in its order and chunks; each decode call is counted (tokens, calls,
output rows, the positions attention reads) and answered with rows of zeros."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from abricot_local.backends.engines import Engine, engine_class
from abricot_local.backends.session import Counters, Row
from abricot_local.core import Request, Scored


class _NoCache:
    """A session for counting: the engine's calls are counted before they reach it; its cache
    always rewinds."""

    normalized = False
    nonfinite_advice = ""

    def __init__(self, n_batch: int, n_ctx: int):
        self.n_batch, self._n_ctx = min(n_batch, n_ctx), n_ctx

    def decode(self, entries):  # pragma: no cover - the counting engine never calls it
        raise NotImplementedError

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        return True

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        pass

    def clear(self) -> None:
        pass

    def n_ctx(self) -> int:
        return self._n_ctx


def counting_engine(options) -> Engine:
    """``options.engine``'s own class, its decode calls counted instead of made (rows of zeros)."""
    base = engine_class(options.engine)

    class Counting(base):
        rows = positions = 0

        def decode_call(self, entries, label, targets=None):
            self.counters.decode_calls += 1
            self.counters.tokens += len(entries)
            self.positions += sum(e[1] for e in entries)
            out = []
            for seq, pos, _tok, want in entries:
                self.rows += want
                out.append(Row(0, dict.fromkeys(targets.get((seq, pos), ()) if targets else (), 0.0)) if want else None)
            return out

        def decode(self, start, tokens, outputs, label, seq=0):
            """Engine.decode's calls counted as decode_call counts them, without making an entry per token: the
            segment's n_batch cuts (base.chunks) are calls, its positions an arithmetic series, its rows those of
            ``outputs`` inside it (a dry plan and every run's plan line count each item's prompt so)."""
            wanted = outputs if isinstance(outputs, Mapping) else dict.fromkeys(outputs, ())
            n, n_batch = len(tokens), self.session.n_batch
            self.counters.decode_calls += -(-n // n_batch)
            self.counters.tokens += n
            self.positions += n * start + n * (n - 1) // 2
            inside = sorted(p for p in wanted if start <= p < start + n)
            self.rows += len(inside)
            return {p: Row(0, dict.fromkeys(wanted[p], 0.0)) for p in inside}

    return Counting(_NoCache(options.n_batch, options.n_ctx), options)


class Counting:
    """What the run's loop asks of a backend (``batch_size``, ``score_many``), counting: each request's
    schedule from ``schedule(request)`` (the model's tokenizer, or a text estimate), ``progress(items
    counted)`` after each batch."""

    def __init__(self, schedule: Callable[[Request], object], options,
                 progress: Callable[[int], None] | None = None):
        self.schedule, self.progress, self.done = schedule, progress, 0
        self.engine = counting_engine(options)

    def batch_size(self) -> int:
        return self.engine.parallel

    def score_many(self, requests: Sequence[Request]) -> list[Scored]:
        out = self.engine.score_many([self.schedule(r) for r in requests], [r.label for r in requests])
        self.done += len(requests)
        if self.progress is not None:
            self.progress(self.done)
        return out

    @property
    def counters(self) -> Counters:
        return self.engine.counters

    @property
    def rows(self) -> int:
        return self.engine.rows

    @property
    def positions(self) -> int:
        return self.engine.positions
