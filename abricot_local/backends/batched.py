"""The batched engine: several items' trunks in one llama_decode, each on its own sequence.

As llama.cpp's perplexity tool does for HellaSwag. Sequence 0 holds the task's
prefix ``[0, P)``, decoded with the canonical cuts (and kept between groups, as
the prefix engine does); item ``k`` of a group gets sequence ``k + 1``, which
shares the prefix's KV cells (``llama_memory_seq_cp``, unified KV cache). Every
item's trunk ``[P, L)`` is cut into its canonical ``n_batch`` chunks and the
chunks of all items are packed, in order and never split, into decode calls of
at most ``n_batch`` tokens; then each multi-token continuation's tail is decoded
on its item's sequence and rewound. The item sequences are cleared after a group.

Groups: consecutive requests with the same prefix tokens, at most ``parallel``
of them (the context has ``parallel + 1`` sequences), and only as many as fit in
the ``n_ctx`` cells of the shared KV cache: ``P + sum(L_k - P) + longest tail``.

The numbers are not bit-identical to the per-item engines (each decode mixes
items; see docs/NUMERICS), and they depend on which items share a group. With
``parallel = 1`` the schedule is the prefix engine's, and so are the numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from abricot_local.backends.base import Request, Schedule, Scored, chunks

if TYPE_CHECKING:
    from abricot_local.backends.llama_cpp import LlamaCppBackend


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


def _trunk_calls(schs: list[Schedule], n_batch: int) -> list[list[tuple[int, int, int, bool]]]:
    """Every item's canonical trunk chunks on sequence k + 1, packed into calls of <= n_batch."""
    calls: list[list[tuple[int, int, int, bool]]] = []
    cur: list[tuple[int, int, int, bool]] = []
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


def score_group(b: LlamaCppBackend, schs: list[Schedule]) -> list[Scored]:
    """Score schedules sharing one prefix, their trunks decoded together."""
    b._ensure_prefix(schs[0])  # sequence 0 holds exactly [0, P)
    slots = range(1, len(schs) + 1)
    for s in slots:
        b._seq_rm(s)
        b._seq_cp(0, s)
    shared: list[dict[int, np.ndarray]] = [{} for _ in schs]
    try:
        for call in _trunk_calls(schs, b.options.n_batch):
            for (seq, pos, _tok, _want), row in zip(call, b._decode_call(call)):
                if row is not None:
                    shared[seq - 1][pos] = row
        out = []
        for k, sch in enumerate(schs):
            rows = [shared[k] | b._tail(sch, i, seq=k + 1) for i in range(len(sch.seqs))]
            out.append(b._scored(sch, rows))
    finally:
        for s in slots:
            b._seq_rm(s)
    return out


def score_many(b: LlamaCppBackend, requests: list[Request]) -> list[Scored]:
    """Score requests in order, consecutive ones sharing a prefix in groups of at most b.parallel."""
    schs = [b.schedule(r) for r in requests]
    b.counters.requests += len(schs)
    out: list[Scored] = []
    for idx in groups(schs, b.parallel, b.n_ctx()):
        out += score_group(b, [schs[k] for k in idx])
    return out
