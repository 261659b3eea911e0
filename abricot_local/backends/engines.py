"""Engines: named strategies that score requests over a backend's :class:`Session`.

A session holds a model's primitives and nothing else: decode a list of
``(sequence, position, token, wants_row)`` entries in one call and return the
raw logits of the entries that want one; remove or copy a sequence's cells;
clear the cache. The llama.cpp backend's session wraps llama.cpp's context; the
fake backend's emulates one. Every engine follows the canonical schedule of
base.py, and every row any engine reads passes ``core.finite_log_softmax``.

- ``naive``: each continuation from scratch (prefix, trunk, its tail).
- ``single``: each item once: prefix, trunk, then each tail and a rewind.
- ``prefix``: as single, keeping the task's prefix in the cache between items.
- ``batched`` (for GPUs): the trunks of up to ``parallel`` consecutive items
  sharing a prefix in one decode, each on its own sequence sharing the
  prefix's cells (llama.cpp's perplexity tool does this for HellaSwag).
  Mixing items in a decode changes its arithmetic: agreement within a measured
  tolerance, except ``parallel=1``, which is the prefix schedule exactly.

The first three are bit-identical (:attr:`Engine.exact`). :class:`Engine` is their base; what
an engine records and the sequences it needs come from its class and the options alone.

Each row is reduced as soon as it is read (checked, then cut down to the
log-probabilities of the tokens it predicts and its argmax: a :class:`Row`),
so no engine ever holds more than one full row per decoded entry at a time.

Every engine also generates greedily (:meth:`Engine.generate`): the prompt
decoded with the canonical cuts (prefix, then the rest in ``n_batch`` calls),
then one token per decode call, each the argmax of its checked row.
"""

from __future__ import annotations

from typing import Collection, Mapping, Sequence

import numpy as np

from abricot_local.backends.base import Schedule, Scored, chunks
from abricot_local.core import Generated, finite_log_softmax
from abricot_local.backends.session import Counters, EngineOptions, Entry, Row, Session
from abricot_local.errors import ContextOverflowError, ModelError, UsageError


class Engine:
    """What every engine shares: decode calls, the prefix held in the cache, the tails, scoring
    one item at a time, greedy generation. The engines differ in what they reuse or group."""

    name = ""
    exact = True  # numbers identical to every other exact engine's
    reuse_prefix = False  # keep the task's prefix in the cache between items
    takes_parallel = False  # --parallel: items decoded together
    decodes_once = False  # every token of a task's items decoded once (its shared prefix too): kld's rows are the text's

    def __init__(self, session: Session, options: EngineOptions):
        self.session = session
        self.options = options
        self.counters = Counters()
        self._kv_prefix: tuple[int, ...] | None = None  # tokens [0, P) held by sequence 0

    # -- what is recorded (from the options alone) -----------------------------------------
    @classmethod
    def group_size(cls, options: EngineOptions) -> int:
        """Items scored together at most."""
        return 1

    @classmethod
    def sequences(cls, options: EngineOptions) -> int:
        """Sequences the session's cache must hold."""
        return 1

    @classmethod
    def config(cls, options: EngineOptions) -> dict:
        """The engine's settings as recorded in a run's config."""
        return {"engine": cls.name}

    @property
    def parallel(self) -> int:
        return self.group_size(self.options)

    def schedule_facts(self) -> dict:
        return {"engine": self.name}

    def reset(self) -> None:
        """Clear the session's cache (and forget the prefix it held)."""
        self.session.clear()
        self._kv_prefix = None

    # -- primitives on the session ---------------------------------------------------------
    def decode_call(self, entries: Sequence[Entry], label: str | dict[int, str],
                    targets: Mapping[tuple[int, int], Collection[int]] | None = None) -> list[Row | None]:
        """One decode; each wanted row checked (the one finite guard) and reduced at once to a
        :class:`Row` holding the log-probabilities of ``targets[(seq, pos)]``. ``label`` names
        the item in errors (per sequence, as a dict, when items share a call)."""
        raw = self.session.decode(entries)
        self.counters.thread_dependent += self.session.thread_dependent(entries)
        self.counters.decode_calls += 1
        self.counters.tokens += len(entries)
        name = (lambda e: label[e[0]]) if isinstance(label, dict) else (lambda e: label)

        def reduced(r, e: Entry) -> Row:
            row = finite_log_softmax(r, label=name(e), position=e[1], normalized=self.session.normalized,
                                     advice=self.session.nonfinite_advice)
            wanted = targets.get((e[0], e[1]), ()) if targets else ()
            # numpy float64 values: summed as before (Python 3.12's sum() compensates plain floats)
            return Row(int(r.argmax() if isinstance(r, np.ndarray) else np.argmax(r)), {t: row[t] for t in wanted})

        return [None if r is None else reduced(r, e) for r, e in zip(raw, entries)]

    def decode(self, start: int, tokens: Sequence[int], outputs: Mapping[int, Collection[int]] | Collection[int],
               label: str, seq: int = 0) -> dict[int, Row]:
        """Decode one segment in n_batch calls; a :class:`Row` for each position in ``outputs``
        (position -> the token ids whose log-probabilities are wanted there, or positions only)."""
        wanted = outputs if isinstance(outputs, Mapping) else dict.fromkeys(outputs, ())
        targets = {(seq, pos): toks for pos, toks in wanted.items()}
        out: dict[int, Row] = {}
        for pos0, part in chunks(start, tokens, self.session.n_batch):
            entries = [(seq, pos0 + k, tok, (pos0 + k) in wanted) for k, tok in enumerate(part)]
            rows = self.decode_call(entries, label, targets)
            out.update((pos0 + k, row) for k, row in enumerate(rows) if row is not None)
        return out

    def ensure_prefix(self, sch: Schedule, label: str) -> None:
        """Sequence 0 holds exactly the prefix segment [0, P), decoded by the canonical cuts."""
        self.hold_prefix(sch.seqs[0][: sch.prefix_len], label)

    def hold_prefix(self, prefix: tuple[int, ...], label: str) -> None:
        if self.reuse_prefix and self._kv_prefix == prefix and self.session.seq_rm(0, len(prefix)):
            self.counters.prefix_hits += 1
            return
        self.reset()
        self.decode(0, prefix, (), label)
        self._kv_prefix = prefix

    def tail(self, sch: Schedule, i: int, label: str, *, seq: int = 0, rewind: bool = True) -> dict[int, Row]:
        """Rows of continuation i's tail, decoded on ``seq`` after the trunk, then rewound to it."""
        tail = sch.tail(i)
        if not tail:
            return {}
        at = sch.targets_at()
        positions = range(sch.trunk_len, sch.trunk_len + len(tail))
        got = self.decode(sch.trunk_len, tail, {p: at.get(p, ()) for p in positions}, label, seq=seq)
        if rewind and not self.session.seq_rm(seq, sch.trunk_len):
            raise ModelError("the backend could not rewind its KV cache")
        return got

    def trunk(self, sch: Schedule, label: str) -> dict[int, Row]:
        at = sch.targets_at()
        return self.decode(sch.prefix_len, sch.trunk[sch.prefix_len :],
                           {p: at[p] for p in sch.trunk_logit_positions()}, label)

    # -- scoring ---------------------------------------------------------------------------
    def score(self, sch: Schedule, label: str) -> Scored:
        self.counters.requests += 1
        self.ensure_prefix(sch, label)
        shared = self.trunk(sch, label)
        return scored(sch, [shared | self.tail(sch, i, label) for i in range(len(sch.seqs))])

    def score_many(self, schs: Sequence[Schedule], labels: Sequence[str]) -> list[Scored]:
        return [self.score(s, label) for s, label in zip(schs, labels)]

    # -- generation ------------------------------------------------------------------------
    def generate(self, prompt: Sequence[int], prefix_len: int, until: Sequence[str], max_tokens: int,
                 label: str) -> Generated:
        """Greedy tokens after ``prompt`` (BOS included): its prefix [0, P) held in the cache as
        for scoring, the rest decoded in n_batch calls from P, then one token per call. Stops
        at EOS/EOG, when the text holds a stop string (cut before it), after ``max_tokens``,
        or when the context is full."""
        n, n_ctx = len(prompt), self.session.n_ctx()
        if n >= n_ctx:
            raise ContextOverflowError(f"item {label}: the prompt is {n} tokens but the context window holds "
                                       f"{n_ctx}: no room to generate; raise n_ctx")
        self.counters.requests += 1
        prompt = tuple(prompt)
        self.hold_prefix(prompt[:prefix_len], label)
        nxt = self.decode(prefix_len, prompt[prefix_len:], (n - 1,), label)[n - 1].argmax
        tokens: list[int] = []
        text, data, reason = "", b"", "max_tokens"
        stops = [u for u in until if u]
        while len(tokens) < max_tokens:
            if self.session.is_eog(nxt):
                reason = "eos"
                break
            tokens.append(nxt)
            data += self.session.token_bytes(nxt)
            text = data.decode("utf-8", "replace")
            cut = min((k for k in (text.find(u) for u in stops) if k >= 0), default=-1)
            if cut >= 0:
                text, reason = text[:cut], "until"
                break
            if len(tokens) == max_tokens:
                break
            pos = n + len(tokens) - 1
            if pos >= n_ctx:
                reason = "n_ctx"
                break
            nxt = self.decode_call([(0, pos, nxt, True)], label)[0].argmax
        return Generated(text, tuple(tokens), reason)


def scored(sch: Schedule, rows: list[dict[int, Row]]) -> Scored:
    """Each continuation's log-likelihood (its token log-probs summed in order) and whether
    each of its tokens is the argmax of the row predicting it."""
    targets = [sch.targets(i) for i in range(len(sch.seqs))]
    return sch.scored((sum(rows[i][pos].logprobs[tok] for pos, tok in t) for i, t in enumerate(targets)),
                      greedy=[all(rows[i][pos].argmax == tok for pos, tok in t) for i, t in enumerate(targets)])


class Prefix(Engine):
    """Each item once (prefix, trunk, each tail and a rewind), the task's prefix kept in the cache."""

    name = "prefix"
    reuse_prefix = True
    decodes_once = True


class Single(Engine):
    """As prefix, with the prefix decoded again for every item."""

    name = "single"


class Naive(Engine):
    """Each continuation from scratch: prefix, trunk, its tail."""

    name = "naive"

    def score(self, sch: Schedule, label: str) -> Scored:
        self.counters.requests += 1
        rows = []
        for i in range(len(sch.seqs)):
            self.ensure_prefix(sch, label)
            rows.append(self.trunk(sch, label) | self.tail(sch, i, label, rewind=False))
        self._kv_prefix = None  # the cache holds a tail: never reused
        return scored(sch, rows)


class Batched(Prefix):
    """Several items' trunks per decode; see the module docstring and docs/numerics.md#engines."""

    name = "batched"
    exact = False
    takes_parallel = True

    @classmethod
    def group_size(cls, options: EngineOptions) -> int:
        return resolve_parallel(options)

    @classmethod
    def sequences(cls, options: EngineOptions) -> int:
        return resolve_parallel(options) + 1

    @classmethod
    def config(cls, options: EngineOptions) -> dict:
        return {"engine": cls.name, "parallel": options.parallel}

    def schedule_facts(self) -> dict:
        return {"engine": self.name, "parallel": self.parallel, "kv_unified": True}

    def score(self, sch: Schedule, label: str) -> Scored:
        return self.score_many([sch], [label])[0]

    def score_many(self, schs: Sequence[Schedule], labels: Sequence[str]) -> list[Scored]:
        self.counters.requests += len(schs)
        out: list[Scored] = []
        for idx in groups(list(schs), self.parallel, self.session.n_ctx()):
            out += self._group([schs[k] for k in idx], [labels[k] for k in idx])
        return out

    def _group(self, schs: list[Schedule], labels: list[str]) -> list[Scored]:
        """Score schedules sharing one prefix, their trunks decoded together."""
        self.ensure_prefix(schs[0], labels[0])
        slots = range(1, len(schs) + 1)
        for s in slots:
            self.session.seq_rm(s)
            self.session.seq_cp(0, s)
        shared: list[dict[int, Row]] = [{} for _ in schs]
        try:
            by_seq = {k + 1: label for k, label in enumerate(labels)}
            targets = {(k + 1, pos): toks for k, sch in enumerate(schs) for pos, toks in sch.targets_at().items()}
            for call in _trunk_calls(schs, self.session.n_batch):
                for (seq, pos, _tok, _want), row in zip(call, self.decode_call(call, by_seq, targets)):
                    if row is not None:
                        shared[seq - 1][pos] = row
            out = []
            for k, sch in enumerate(schs):
                rows = [shared[k] | self.tail(sch, i, labels[k], seq=k + 1) for i in range(len(sch.seqs))]
                out.append(scored(sch, rows))
        finally:
            for s in slots:
                self.session.seq_rm(s)
        return out


def resolve_parallel(o: EngineOptions) -> int:
    """Items the batched engine decodes together at most: the option (1 to MAX_PARALLEL, checked
    with the options), or one slot per 256 tokens of context between 1 and 16 (8 at n_ctx 2048).
    Each group is further cut so that the prefix, all its items' trunks and the longest tail
    fit in n_ctx cells."""
    return max(1, min(16, o.n_ctx // 256)) if o.parallel is None else o.parallel


def _longest_tail(sch: Schedule) -> int:
    return max(len(sch.tail(i)) for i in range(len(sch.seqs)))


def groups(schs: list[Schedule], parallel: int, n_ctx: int) -> list[list[int]]:
    """Indices of consecutive schedules decoded together (same prefix, fit in n_ctx cells)."""
    out: list[list[int]] = []
    cells = tail = 0
    for k, sch in enumerate(schs):
        prefix = sch.seqs[0][: sch.prefix_len]
        if out:
            head = schs[out[-1][0]]
            grow = (
                len(out[-1]) < parallel
                and head.seqs[0][: head.prefix_len] == prefix
                and head.prefix_len + cells + sch.trunk_len - sch.prefix_len + max(tail, _longest_tail(sch)) <= n_ctx
            )
            if grow:
                out[-1].append(k)
                cells += sch.trunk_len - sch.prefix_len
                tail = max(tail, _longest_tail(sch))
                continue
        out.append([k])
        cells, tail = sch.trunk_len - sch.prefix_len, _longest_tail(sch)
    return out


def _trunk_calls(schs: list[Schedule], n_batch: int) -> list[list[Entry]]:
    """Every item's canonical trunk chunks on sequence k + 1, packed into calls of <= n_batch."""
    calls: list[list[Entry]] = []
    cur: list[Entry] = []
    for k, sch in enumerate(schs):
        wanted = set(sch.trunk_logit_positions())
        for pos0, part in chunks(sch.prefix_len, sch.trunk[sch.prefix_len :], n_batch):
            if cur and len(cur) + len(part) > n_batch:
                calls.append(cur)
                cur = []
            cur += [(k + 1, pos0 + j, tok, pos0 + j in wanted) for j, tok in enumerate(part)]
    if cur:
        calls.append(cur)
    return calls


ENGINES: dict[str, type[Engine]] = {e.name: e for e in (Naive, Single, Prefix, Batched)}


def once(name: str) -> str:
    """The engine that decodes as ``name`` does but each token once (``name`` where it does, else ``prefix``: exact,
    so its numbers are every exact engine's): `kld`, whose rows are one per decoded token, a token decoded again for
    each item (``single``'s prefix, ``naive``'s trunk per continuation) counted again, runs it."""
    return name if engine_class(name).decodes_once else Prefix.name


def engine_class(name: str) -> type[Engine]:
    if name not in ENGINES:
        raise UsageError(f"unknown engine {name!r}; choose from {', '.join(ENGINES)}")
    return ENGINES[name]
