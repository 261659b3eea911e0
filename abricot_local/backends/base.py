"""The backend interface and the canonical evaluation schedule every engine follows.

A backend scores a :class:`Request` (a context and its continuations, the
whitespace belonging to the continuation: ``" A"``) into log-likelihoods.

Label mapping: each continuation is tokenized together with the context and
split at the context's token boundary, so a label is scored with the token ids
the model would produce for the whole string (``" A"`` is one token in some
vocabularies and ``" "`` + ``"A"`` in others). BOS is added once, as the model's
own ``add_bos`` metadata says.

Schedule (see ``schedule()``): llama.cpp's log-probabilities move with how a
prompt is cut into decode calls, so the cut is a function of the request alone:

1. the task's shared prefix tokens ``[0, P)``;
2. the trunk ``[P, L)``: the rest of the context plus the tokens all
   continuations share (a lone space, say), never a batch of one;
3. per continuation whose tokens go beyond ``L + 1``: its tail ``[L, n - 1)``,
   evaluated on top of the trunk and then rewound.

Each segment is split into ``n_batch``-token decode calls from its own start.
When every continuation ends one token after the trunk (the fast path) a single
trunk evaluation scores them all.

Engines ``naive``, ``single`` and ``prefix`` evaluate each item alone with these
cuts and are bit-identical. ``batched`` (llama.cpp only, meant for GPUs) decodes
the trunks of up to ``parallel`` items sharing a prefix in one call, each on its
own sequence; that changes the composition of every decode, so its numbers agree
with the others only to a measured tolerance (docs: NUMERICS), except with
``parallel=1``, where it is the same schedule and bit-identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from abricot_local.errors import ContextOverflowError, UsageError

SCHEDULE_VERSION = "prefix|trunk|tail/v1"
ENGINES = ("naive", "single", "prefix", "batched")
DEFAULT_N_CTX = 2048
MAX_PARALLEL = 255  # llama.cpp holds at most 256 sequences; one is the shared prefix's


@dataclass(frozen=True)
class BackendOptions:
    """Everything that configures a backend; every field that can move a number is recorded."""

    n_ctx: int = DEFAULT_N_CTX
    n_batch: int = 512
    threads: int | None = None
    n_gpu_layers: int = -1  # -1: all layers when the build can offload, else 0
    main_gpu: int = 0
    tensor_split: tuple[float, ...] = ()
    repack: bool = True  # llama.cpp's extra CPU buffer types (repacked weights, AMX); an RPC server has none
    rpc: tuple[str, ...] = ()  # HOST:PORT of llama.cpp RPC servers whose devices take layers (backends/rpc.py)
    flash_attn: str = "auto"
    engine: str = "prefix"
    parallel: int | None = None  # batched engine: most items per decode (None: resolved_parallel)
    verbose: bool = False
    vocab_only: bool = False
    seed: int = 1234


def resolved_parallel(o: BackendOptions) -> int:
    """Items the batched engine decodes together at most (1 for the other engines).

    Default: one slot per 256 tokens of context, between 1 and 16 (8 at n_ctx 2048).
    Each group is further cut so that the prefix, all its items' trunks and the
    longest tail fit in the n_ctx cells of the shared (unified) KV cache.
    """
    if o.engine != "batched":
        if o.parallel is not None:
            raise UsageError("--parallel applies only to --engine batched")
        return 1
    if o.parallel is None:
        return max(1, min(16, o.n_ctx // 256))
    if not 1 <= o.parallel <= MAX_PARALLEL:
        raise UsageError(f"--parallel must be between 1 and {MAX_PARALLEL}, got {o.parallel}")
    return o.parallel


@dataclass(frozen=True)
class Request:
    """Score each continuation after ``context``; ``prefix`` is the task's shared head of it."""

    context: str
    continuations: tuple[str, ...]
    prefix: str = ""
    label: str = ""  # names the item in error messages
    parse_special: bool = False  # chat-template text: "<start_of_turn>" is one special token

    def __post_init__(self) -> None:
        if not self.continuations:
            raise UsageError(f"request {self.label!r} has no continuations")
        if not self.context.startswith(self.prefix):
            raise UsageError(f"request {self.label!r}: the prefix is not the start of the context")


@dataclass(frozen=True)
class Scored:
    """Log-likelihood of each continuation, with the token ids that were scored."""

    logprobs: tuple[float, ...]
    continuation_tokens: tuple[tuple[int, ...], ...]
    n_context_tokens: int
    fast_path: bool


@dataclass(frozen=True)
class Schedule:
    """Token sequences and the decode cuts of one request (see module docstring)."""

    seqs: tuple[tuple[int, ...], ...]  # BOS + context + continuation, per continuation
    ctx_lens: tuple[int, ...]  # where each continuation starts in its sequence
    prefix_len: int  # P
    trunk_len: int  # L

    @property
    def fast_path(self) -> bool:
        return all(len(s) <= self.trunk_len + 1 for s in self.seqs)

    @property
    def trunk(self) -> tuple[int, ...]:
        return self.seqs[0][: self.trunk_len]

    def trunk_logit_positions(self) -> tuple[int, ...]:
        """Positions in ``[P, L)`` whose next-token distribution some continuation needs."""
        needed = set()
        for seq, c in zip(self.seqs, self.ctx_lens):
            needed.update(range(c - 1, min(len(seq) - 1, self.trunk_len)))
        return tuple(sorted(p for p in needed if self.prefix_len <= p < self.trunk_len))

    def tail(self, i: int) -> tuple[int, ...]:
        """Tokens of continuation ``i`` evaluated after the trunk (all but its last)."""
        seq = self.seqs[i]
        return seq[self.trunk_len : len(seq) - 1] if len(seq) - 1 > self.trunk_len else ()

    def targets(self, i: int) -> list[tuple[int, int]]:
        """(position whose logits predict, token id predicted) for continuation ``i``."""
        seq = self.seqs[i]
        return [(j, seq[j + 1]) for j in range(self.ctx_lens[i] - 1, len(seq) - 1)]

    def scored(self, logprobs) -> Scored:
        """The result of this request, given each continuation's log-likelihood."""
        return Scored(
            logprobs=tuple(float(x) for x in logprobs),
            continuation_tokens=tuple(s[c:] for s, c in zip(self.seqs, self.ctx_lens)),
            n_context_tokens=min(self.ctx_lens),
            fast_path=self.fast_path,
        )

    @property
    def n_tokens(self) -> int:
        """Tokens a single evaluation of this request decodes (prefix, trunk, tails)."""
        return self.trunk_len + sum(len(self.tail(i)) for i in range(len(self.seqs)))


CHAT_MARK = "\x00abricot-message\x00"


def split_chat(rendered: str, bos_text: str) -> tuple[str, str]:
    """Split a chat template rendered around CHAT_MARK into (head, tail)."""
    if rendered.count(CHAT_MARK) != 1:
        raise UsageError("the model's chat template does not place the user message exactly once")
    head, tail = rendered.split(CHAT_MARK)
    if bos_text and head.startswith(bos_text):
        head = head[len(bos_text):]
    return head, tail


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def schedule(request: Request, tokenize: Callable[[str], list[int]], n_ctx: int) -> Schedule:
    """Map a request to token sequences and its canonical cuts.

    ``tokenize(text)`` must return the model's tokens for ``text`` with BOS
    already added when the model adds one.
    """
    context_tokens = tokenize(request.context)
    seqs, ctx_lens = [], []
    for cont in request.continuations:
        whole = tokenize(request.context + cont)
        # The context's own tokens, unless the continuation merged with its end:
        # then the split is the longest common prefix, so the scored sequence is
        # always exactly the tokenization of the whole string.
        split = common_prefix_len(context_tokens, whole)
        if split == len(whole):
            raise UsageError(
                f"item {request.label}: continuation {cont!r} adds no token to the context"
            )
        seqs.append(tuple(whole))
        ctx_lens.append(max(split, 1))
    longest = max(len(s) for s in seqs)
    if longest > n_ctx:
        raise ContextOverflowError(
            f"item {request.label}: the prompt is {longest} tokens but the context window "
            f"(--n-ctx) is {n_ctx}; raise --n-ctx or use a model with a longer context"
        )
    trunk = seqs[0]
    for s in seqs[1:]:
        trunk = trunk[: common_prefix_len(trunk, s)]
    trunk_len = len(trunk)
    if trunk_len == 0:
        raise UsageError(f"item {request.label}: the continuations share no context token")
    prefix_len = 0
    if request.prefix:
        prefix_len = common_prefix_len(tokenize(request.prefix), trunk)
    # The prefix ends before the first scored position, and leaves at least two
    # trunk tokens (a lone token in its own decode call scores differently).
    prefix_len = max(0, min(prefix_len, min(ctx_lens) - 1, trunk_len - 2))
    return Schedule(tuple(seqs), tuple(ctx_lens), prefix_len, trunk_len)


def chunks(start: int, tokens: Sequence[int], n_batch: int) -> list[tuple[int, tuple[int, ...]]]:
    """Cut a segment starting at position ``start`` into ``n_batch``-token decode calls."""
    return [
        (start + k, tuple(tokens[k : k + n_batch])) for k in range(0, len(tokens), n_batch)
    ]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Numerically stable log-softmax in float64."""
    x = np.asarray(logits, dtype=np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


class Backend(Protocol):
    """What the runner needs from an inference engine."""

    name: str

    def score(self, request: Request) -> Scored: ...

    def score_many(self, requests: Sequence[Request]) -> list[Scored]:
        """Score several requests, results in the same order (default: ``score`` each one)."""
        ...

    def batch_size(self) -> int:
        """How many requests ``score_many`` is best given at once (1: no gain from more)."""
        ...

    def schedule(self, request: Request) -> Schedule: ...

    def piece(self, token: int) -> str: ...

    def chat_wrap(self) -> tuple[str, str]: ...

    def provenance(self) -> dict: ...

    def close(self) -> None: ...
