"""A reference and its rungs decoding in lockstep, their rows compared over the whole vocabulary and dropped.

:class:`LadderSession` is a :class:`~abricot_local.backends.session.Session` over a reference's
session and N rungs' (any backend's): every decode call, rewind, copy and clear goes to each, so an
engine over it runs the canonical schedule once, the reference decodes each call once and every
rung decodes exactly the same calls. Each call asks every model for a row at every token it decodes
(at most ``n_batch`` rows a call, never ``n_ctx``). When all
the models have decoded a call, its rows are compared at once (:class:`Reducer`): per row, the
reference's float64 log-sum-exp and probabilities are computed once and every rung's row is compared
with them (KL(reference || rung) and whether the top token is the same); only those two numbers a
row and rung are kept (:class:`KlRows`); no logits file. The engine gets the reference's rows it asked for.

Each item counts whole, as if it were scored alone: the rows of its cached prefix (the task's shared text up to
its last blank line, decoded once and kept in the cache for the items that share it) are held apart as they are
decoded and counted again in every item that reads them (:meth:`LadderSession.credit`), so an item's rows are
its prefix's, its context's and its continuations' whatever the items before it, and a task's statistics do not
depend on the items' order or on how many share a prefix (``--limit``).

Determinism by construction: a row's numbers are computed from that row's reference and rung
vectors alone, each reduced along its own contiguous axis by the same numpy calls in the same order
(:func:`_compare_row`), whatever other rungs, rows or threads share the call; so a rung's statistics
are the same bits scored alone (:class:`PairedSession`) or in any ladder, on any thread count. The
rows of a call are split into contiguous blocks, one per thread (numpy releases the GIL in its loops).

:func:`ladder_groups` takes the rungs in groups whose models fit in memory with the reference's:
each group costs one reference pass.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from abricot_local.backends.session import Entry, Session
from abricot_local.core import finite_log_softmax
from abricot_local.errors import ModelError, opt

_F64 = np.float64


def kl_row(ref, rung, *, label: str = "", position: int = 0) -> tuple[float, bool]:
    """KL(ref || rung) of two rows of raw logits (nats, float64) and whether their argmax is the same.

    The one-row definition that :class:`Reducer` is measured against (tests, bench/kld_vs_perplexity.py).
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
    _check(kl, lse_p, lse_q, p, q, label, position)
    return max(kl, 0.0), int(np.argmax(p)) == int(np.argmax(q))


def _check(kl, lse_p, lse_q, p, q, label: str, position: int) -> None:
    if not (np.isfinite(kl) and np.isfinite(lse_p) and np.isfinite(lse_q)):
        finite_log_softmax(p, label=label, position=position)  # raises, naming the row
        finite_log_softmax(q, label=label, position=position)
        raise ModelError(f"{label}: the KL divergence at token position {position} is not finite")


def _compare_row(x, ys: Sequence, e: np.ndarray, d: np.ndarray, label: str, position: int) -> list[tuple[float, bool]]:
    """One reference row against each rung's: :func:`kl_row`'s formula, the reference's part once.

    ``e`` and ``d`` are float64 scratch rows of the vocabulary's length. Every operand is cast to
    float64 inside the ufunc (exactly, as kl_row's conversion); the sums are numpy's own (pairwise,
    no BLAS: kl_row's np.dot is OpenBLAS's, split by its threads), so a row's numbers depend on its
    vectors alone."""
    with np.errstate(invalid="ignore", over="ignore"):  # a non-finite row is refused below, by name
        return _compare(x, ys, e, d, label, position)


def _compare(x, ys: Sequence, e: np.ndarray, d: np.ndarray, label: str, position: int) -> list[tuple[float, bool]]:
    n = len(x)
    mx = _F64(np.max(x))
    np.subtract(x, mx, out=e, dtype=_F64)
    np.exp(e, out=e)  # P * sp
    sp = e.sum()
    lse_p = mx + np.log(sp)
    top = int(np.argmax(x))
    out = []
    for y in ys:
        if len(y) != n:
            raise ModelError(f"the models' vocabularies differ ({n} and {len(y)} tokens)")
        my = _F64(np.max(y))
        np.subtract(y, my, out=d, dtype=_F64)  # the same operations as the reference's: one row twice gives 0
        np.exp(d, out=d)
        lse_q = my + np.log(d.sum())
        np.subtract(x, y, out=d, dtype=_F64)
        np.multiply(e, d, out=d)
        kl = float(d.sum() / sp - lse_p + lse_q)
        _check(kl, lse_p, lse_q, x, y, label, position)
        out.append((max(kl, 0.0), top == int(np.argmax(y))))
    return out


class Reducer:
    """The rows of one decode call compared at once, in contiguous blocks of rows, one per thread
    (the calling thread takes the first); two float64 scratch rows per block, kept between calls."""

    def __init__(self, threads: int = 1):
        self.threads = max(1, int(threads))
        self._scratch: list[tuple[np.ndarray, np.ndarray]] = []
        self._pool: ThreadPoolExecutor | None = None

    def compare(self, ref_rows: Sequence, rung_rows: Sequence[Sequence], where: Sequence[tuple[str, int]]
                ) -> list[tuple[list[float], list[bool]]]:
        """Per rung: the KL and same-top of each row (``where``: each row's label and position, for errors)."""
        n = len(ref_rows)
        blocks = min(self.threads, n)
        if n == 0:
            return [([], []) for _ in rung_rows]
        bounds = [n * j // blocks for j in range(blocks + 1)]
        vocab = len(ref_rows[0])
        while len(self._scratch) < blocks or self._scratch[0][0].size != vocab:
            if self._scratch and self._scratch[0][0].size != vocab:
                self._scratch.clear()
            self._scratch.append((np.empty(vocab, _F64), np.empty(vocab, _F64)))

        def block(j: int) -> list[list[tuple[float, bool]]]:
            e, d = self._scratch[j]
            return [_compare_row(ref_rows[i], [r[i] for r in rung_rows], e, d, *where[i])
                    for i in range(bounds[j], bounds[j + 1])]

        if blocks > 1 and self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="kld-rows")
        later = [self._pool.submit(block, j) for j in range(1, blocks)] if blocks > 1 else []
        try:
            rows = block(0)
        finally:
            wait(later)  # no thread still reading a model's rows once this returns or raises
        for f in later:
            rows += f.result()
        return [([r[k][0] for r in rows], [r[k][1] for r in rows]) for k in range(len(rung_rows))]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def compare_seconds(n_vocab: int, rungs: int, threads: int, *, rows: int = 0, repeats: int = 3) -> float:
    """Seconds :class:`Reducer` takes here to compare one row of ``n_vocab`` entries with ``rungs`` rungs'
    on ``threads`` threads: random float32 logits, ``rows`` a call (default 4 a thread), the fastest of
    ``repeats`` calls (a busy machine only slows a measurement down); `kld --dry-run`'s rate."""
    rows = rows or 4 * max(1, threads)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, max(1, n_vocab))).astype(np.float32) * 3
    ys = [x + rng.normal(size=x.shape).astype(np.float32) for _ in range(max(1, rungs))]
    reducer = Reducer(threads)
    where = [("measure", p) for p in range(rows)]
    best = float("inf")
    try:
        reducer.compare(list(x[:1]), [list(y[:1]) for y in ys], where[:1])  # the scratch rows made
        for _ in range(repeats):
            t0 = time.perf_counter()
            reducer.compare(list(x), [list(y) for y in ys], where)
            best = min(best, time.perf_counter() - t0)
    finally:
        reducer.close()
    return best / rows


class KlRows:
    """Per compared row: its KL and top-token agreement (two numbers a row, nothing else), and where each item's
    rows end (``ends``, by :meth:`mark`: the units of the KLD's CI over the items, analysis.kld.summarise)."""

    def __init__(self) -> None:
        self.kl: list[float] = []
        self.same_top: list[bool] = []
        self.ends: list[int] = []

    def add(self, kl: float, same: bool) -> None:
        self.kl.append(kl)
        self.same_top.append(same)

    def extend(self, kl: Sequence[float], same: Sequence[bool]) -> None:
        self.kl.extend(kl)
        self.same_top.extend(same)

    def mark(self) -> None:
        """An item done: the rows since the last mark are its (none since: nothing marked, its rows were decoded
        with an earlier item's, as a batched engine's items decoded together; a cached prefix's rows are each
        item's: LadderSession.credit)."""
        if len(self.kl) > (self.ends[-1] if self.ends else 0):
            self.ends.append(len(self.kl))

    def clear(self) -> None:
        self.kl.clear()
        self.same_top.clear()
        self.ends.clear()

    def __len__(self) -> int:
        return len(self.kl)


class LadderSession:
    """A reference session and N rung sessions as one: see the module's text. ``rows[k]`` collects
    rung k's rows; ``threads``: how many threads compare a call's rows (the run's own count);
    ``every_token`` False: only the rows the caller asks for are decoded and compared (a bench
    keeping llama-perplexity's positions), not a row at every decoded token (`kld`'s)."""

    def __init__(self, ref: Session, rungs: Sequence[Session], rows: Sequence[KlRows], *, threads: int = 1,
                 every_token: bool = True):
        self.prefix_len = 0  # the cached prefix of the items being scored: its rows held apart (``held``)
        if not rungs or len(rungs) != len(rows):
            raise ModelError(f"a ladder needs one KlRows per rung ({len(rungs)} rungs, {len(rows)} KlRows)")
        for r in rungs:
            if r.n_batch != ref.n_batch:
                raise ModelError(f"the models cut decode calls differently (n_batch {ref.n_batch} and {r.n_batch})")
        self.ref, self.rungs, self.rows = ref, list(rungs), list(rows)
        self.n_batch = ref.n_batch
        self.normalized = ref.normalized  # the engine reads the reference's rows
        self.nonfinite_advice = ref.nonfinite_advice
        self.reducer = Reducer(threads)
        self.every_token = every_token
        self.held: list[KlRows] = [KlRows() for _ in rungs]  # per rung, the rows of sequence 0's cells [0, P)

    def decode(self, entries: Sequence[Entry]) -> list[np.ndarray | None]:
        calls = [(seq, pos, tok, True) for seq, pos, tok, _w in entries] if self.every_token else list(entries)
        a = self.ref.decode(calls)  # each model's rows stay valid until its own next decode
        bs = [r.decode(calls) for r in self.rungs]
        keep = [i for i, e in enumerate(calls) if e[3]]
        got = self.reducer.compare([a[i] for i in keep], [[b[i] for i in keep] for b in bs],
                                   [(f"kld seq {calls[i][0]}", calls[i][1]) for i in keep])
        seq, pos = (calls[0][0], calls[0][1]) if calls else (0, 0)
        into = self.rows
        if seq == 0 and pos < self.prefix_len:  # a call of the prefix's (Engine.hold_prefix: [0, P) on sequence 0)
            into = self.held
            if pos == 0:  # a prefix decoded anew
                for held in self.held:
                    held.clear()
        for rows, (kl, same) in zip(into, got, strict=True):
            rows.extend(kl, same)
        return [x if want else None for (_s, _p, _t, want), x in zip(entries, a)]

    def credit(self, items: int) -> None:
        """``items`` items sharing the held prefix scored: its rows counted in each, as if each were scored alone
        (the cache held them for all but the first)."""
        if len(self.held[0]) != self.prefix_len:
            raise ModelError(f"kld holds {len(self.held[0])} rows of a {self.prefix_len}-token prefix")
        for rows, held in zip(self.rows, self.held, strict=True):
            for _ in range(items):
                rows.extend(held.kl, held.same_top)

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        done = [s.seq_rm(seq, p0, p1) for s in (self.ref, *self.rungs)]  # every model, even after a refusal
        return all(done)

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        for s in (self.ref, *self.rungs):
            s.seq_cp(src, dst, p0, p1)

    def clear(self) -> None:
        for s in (self.ref, *self.rungs):
            s.clear()

    def n_ctx(self) -> int:
        return min(s.n_ctx() for s in (self.ref, *self.rungs))

    def thread_dependent(self, entries: Sequence[Entry]) -> bool:
        return any(s.thread_dependent(entries) for s in (self.ref, *self.rungs))

    def token_bytes(self, token: int) -> bytes:
        return self.ref.token_bytes(token)

    def is_eog(self, token: int) -> bool:
        return self.ref.is_eog(token)

    def close(self) -> None:
        """The comparing threads stopped (the models' sessions are their backends' to close)."""
        self.reducer.close()


class PairedSession(LadderSession):
    """A ladder of one rung: a reference session and a rung session as one."""

    def __init__(self, ref: Session, rung: Session, rows: KlRows, *, threads: int = 1):
        super().__init__(ref, [rung], [rows], threads=threads)


@dataclass(frozen=True)
class Footprint:
    """What one model loaded for `kld` holds, in bytes: its weights and KV cache (as
    memory.check_memory counts a model) and its output rows (n_batch x n_vocab x 4: a row at every
    decoded token)."""

    weights: int
    kv: int
    rows: int = 0
    label: str = ""

    @property
    def bytes(self) -> int:
        return self.weights + self.kv + self.rows


def ladder_groups(ref: Footprint, rungs: Sequence[Footprint], *, available: int | None, vram: int = 0,
                  remote: int = 0, keys: Sequence[Hashable] | None = None) -> list[tuple[int, ...]]:
    """The rungs (their indices) in groups that each fit in memory beside the reference, as few as
    first-fit by decreasing size finds; each group costs one reference pass. A group fits as
    memory.Fit says (the budget: ``available`` RAM + ``vram`` + ``remote``, 10% over tolerated);
    ``available`` None (RAM unknown): one group, as memory.check_memory does not refuse then. Groups
    in the order of their first rung, each group's rungs in the given order. A rung that does not
    fit even alone beside the reference: :class:`ModelError`. ``keys``: rungs share a group only when
    their keys are equal (rungs decoding other items, other calls, cannot run in lockstep)."""
    from abricot_local import memory

    key = list(keys) if keys is not None else [None] * len(rungs)
    if available is None:
        return sorted((tuple(k for k in range(len(rungs)) if key[k] == v) for v in dict.fromkeys(key)),
                      key=lambda g: g[0])

    def fits(members: Sequence[int]) -> bool:
        models = [ref, *(rungs[k] for k in members)]
        return memory.Fit(sum(m.weights + m.rows for m in models), sum(m.kv for m in models), available,
                          vram, remote).fits

    groups: list[list[int]] = []
    for k in sorted(range(len(rungs)), key=lambda k: (-rungs[k].bytes, k)):
        if not fits([k]):
            f = memory.Fit(ref.bytes + rungs[k].bytes, 0, available, vram, remote)
            raise ModelError(f"not enough memory for kld: the reference and {rungs[k].label or f'rung {k + 1}'} "
                             f"need about {f.need / 1024**3:.1f} GiB together (weights, KV caches and output "
                             f"rows) but {f.budget / 1024**3:.1f} GiB is available ({f.where()}). Free some memory, "
                             f"or use {opt('force')} to try anyway.")
        into = next((g for g in groups if key[g[0]] == key[k] and fits([*g, k])), None)
        if into is None:
            groups.append([k])
        else:
            into.append(k)
    return sorted((tuple(sorted(g)) for g in groups), key=lambda g: g[0])


class TokenizedUnlike(ModelError):
    """A rung cuts a request into other tokens than the reference: they are not quants of one model.
    ``rung``: its index among the ladder's rungs."""

    def __init__(self, message: str, rung: int = 0):
        super().__init__(message)
        self.rung = rung


class LadderBackend:
    """A loaded reference and N loaded rungs (backends, each with a ``session``) scored in lockstep,
    as far as the run's loop (run/execute.py's ``scored``) needs a backend (``batch_size``,
    ``score_many``): each request's schedule, the same for every model (else :class:`TokenizedUnlike`),
    evaluated once by ``options.engine`` over a :class:`LadderSession` (``threads``: its comparing
    threads), rung k's rows compared into ``rows[k]``. One rung: a pair. :meth:`close` stops the
    comparing threads (the models are their owner's to close)."""

    def __init__(self, ref, rungs: Sequence, options, rows: Sequence[KlRows], *, threads: int = 1):
        from abricot_local.backends.engines import engine_class

        self.ref, self.rungs = ref, list(rungs)
        for b in (ref, *self.rungs):
            b.session.clear()  # every cache as fresh as a new rung's: the same decode calls from empty
        self.session = LadderSession(ref.session, [r.session for r in self.rungs], rows, threads=threads)
        self.engine = engine_class(options.engine)(self.session, options)

    def batch_size(self) -> int:
        return max(1, self.engine.parallel)

    def score_many(self, requests: Sequence) -> list:
        """The requests scored, those sharing a cached prefix at a time (the engine's groups never span two), each
        item's rows its prefix's too (LadderSession.credit)."""
        schedules = [self.ref.schedule(r) for r in requests]
        for k, rung in enumerate(self.rungs):
            if [rung.schedule(r) for r in requests] != schedules:
                raise TokenizedUnlike(f"request {requests[0].label}: rung {k + 1} tokenizes the text unlike the "
                                      "reference", rung=k)
        out: list = []
        start = 0
        while start < len(schedules):
            prefix = schedules[start].seqs[0][: schedules[start].prefix_len]
            end = start + 1
            while end < len(schedules) and schedules[end].seqs[0][: schedules[end].prefix_len] == prefix:
                end += 1
            self.session.prefix_len = len(prefix)
            out += self.engine.score_many(schedules[start:end], [r.label for r in requests[start:end]])
            if self.session.every_token:
                self.session.credit(end - start)
            start = end
        return out

    @property
    def counters(self):
        return self.engine.counters

    def close(self) -> None:
        self.session.close()
