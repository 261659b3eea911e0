"""Two models decoding in lockstep, their rows compared over the whole vocabulary and dropped.

:class:`PairedSession` is a :class:`~abricot_local.backends.session.Session` over two sessions
(a reference and a rung, any backend's): every decode call, rewind, copy and clear goes to both,
so an engine over it runs the canonical schedule once and both models evaluate exactly the same
decode calls. Each call asks both models for a row at every token it decodes (as llama-perplexity
does over its text: at most ``n_batch`` rows a call, never ``n_ctx``); each pair of rows is
compared at once (:func:`kl_row`: the full-vocabulary log-softmax of each, in float64,
KL(reference || rung) and whether the top token is the same) and only those two numbers are kept
(:class:`KlRows`); no logits file. The engine gets the reference's rows it asked for.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from abricot_local.backends.session import Entry, Session
from abricot_local.core import finite_log_softmax
from abricot_local.errors import ModelError


def kl_row(ref, rung, *, label: str = "", position: int = 0) -> tuple[float, bool]:
    """KL(ref || rung) of two rows of raw logits (nats, float64) and whether their argmax is the same.

    KL = sum_i P_i ((p_i - lse_p) - (q_i - lse_q)) = sum_i P_i (p_i - q_i) - lse_p + lse_q, with
    P = softmax(p): two exponentials a row pair instead of four; the same row twice gives exactly 0.
    A row holding NaN or an infinity is refused as every engine refuses it (core.finite_log_softmax)."""
    p = np.asarray(ref, dtype=np.float64)
    q = np.asarray(rung, dtype=np.float64)
    mp, mq = p.max(), q.max()
    ep = np.exp(p - mp)
    sp = ep.sum()
    lse_p, lse_q = mp + np.log(sp), mq + np.log(np.exp(q - mq).sum())
    kl = float(np.dot(ep, p - q) / sp - lse_p + lse_q)
    if not (np.isfinite(kl) and np.isfinite(lse_p) and np.isfinite(lse_q)):
        finite_log_softmax(p, label=label, position=position)  # raises, naming the row
        finite_log_softmax(q, label=label, position=position)
        raise ModelError(f"{label}: the KL divergence at token position {position} is not finite")
    return max(kl, 0.0), int(np.argmax(p)) == int(np.argmax(q))


class KlRows:
    """Per compared row: its KL and top-token agreement (two numbers a row, nothing else)."""

    def __init__(self) -> None:
        self.kl: list[float] = []
        self.same_top: list[bool] = []

    def add(self, kl: float, same: bool) -> None:
        self.kl.append(kl)
        self.same_top.append(same)

    def __len__(self) -> int:
        return len(self.kl)


class PairedSession:
    """A reference session and a rung session as one: see the module's text."""

    def __init__(self, ref: Session, rung: Session, rows: KlRows):
        if ref.n_batch != rung.n_batch:
            raise ModelError(f"the two models cut decode calls differently (n_batch {ref.n_batch} and {rung.n_batch})")
        self.ref, self.rung, self.rows = ref, rung, rows
        self.n_batch = ref.n_batch
        self.normalized = ref.normalized  # the engine reads the reference's rows

    def decode(self, entries: Sequence[Entry]) -> list[np.ndarray | None]:
        every = [(seq, pos, tok, True) for seq, pos, tok, _want in entries]  # a row at every decoded token
        a = self.ref.decode(every)
        b = self.rung.decode(every)
        for (seq, pos, _tok, _want), x, y in zip(entries, a, b, strict=True):
            if len(x) != len(y):
                raise ModelError(f"the two models' vocabularies differ ({len(x)} and {len(y)} tokens)")
            self.rows.add(*kl_row(x, y, label=f"kld seq {seq}", position=pos))
        return [x if want else None for (_s, _p, _t, want), x in zip(entries, a)]

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        done = self.ref.seq_rm(seq, p0, p1)
        return self.rung.seq_rm(seq, p0, p1) and done

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        self.ref.seq_cp(src, dst, p0, p1)
        self.rung.seq_cp(src, dst, p0, p1)

    def clear(self) -> None:
        self.ref.clear()
        self.rung.clear()

    def n_ctx(self) -> int:
        return min(self.ref.n_ctx(), self.rung.n_ctx())

    def thread_dependent(self, entries: Sequence[Entry]) -> bool:
        return self.ref.thread_dependent(entries) or self.rung.thread_dependent(entries)

    def token_bytes(self, token: int) -> bytes:
        return self.ref.token_bytes(token)

    def is_eog(self, token: int) -> bool:
        return self.ref.is_eog(token)


class TokenizedUnlike(ModelError):
    """The two models cut a request into different tokens: they are not quants of one model."""


class PairedBackend:
    """Two loaded backends (``ref``, ``rung``: each with a ``session``) scored in lockstep, as far as
    the run's loop needs a backend (``batch_size``, ``score_many``): each request's schedule, the same
    for both (else :class:`TokenizedUnlike`), evaluated once by ``options.engine`` over a
    :class:`PairedSession`, the pairs of rows compared into ``rows``."""

    def __init__(self, ref, rung, options, rows: KlRows):
        from abricot_local.backends.engines import engine_class

        self.ref, self.rung = ref, rung
        ref.session.clear()  # the reference's cache as fresh as the rung's: the same decode calls from empty
        self.engine = engine_class(options.engine)(PairedSession(ref.session, rung.session, rows), options)

    def batch_size(self) -> int:
        return max(1, self.engine.parallel)

    def score_many(self, requests: Sequence) -> list:
        schedules = [self.ref.schedule(r) for r in requests]
        if [self.rung.schedule(r) for r in requests] != schedules:
            raise TokenizedUnlike(f"request {requests[0].label}: the two models tokenize the text unlike")
        return self.engine.score_many(schedules, [r.label for r in requests])

    @property
    def counters(self):
        return self.engine.counters
