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

1. the cached prefix's tokens ``[0, P)``: the context up to and including its last blank
   line (``core.cached_prefix``; none without one), whatever door the request came through;
2. the trunk ``[P, L)``: the rest of the context plus the tokens all
   continuations share (a lone space, say), never a batch of one;
3. per continuation whose tokens go beyond ``L + 1``: its tail ``[L, n - 1)``,
   evaluated on top of the trunk and then rewound.

Each segment is split into ``n_batch``-token decode calls from its own start. When every continuation
ends one token after the trunk (the fast path) a single trunk evaluation scores them all.

The engines (strategies in engines.py, over a backend's session) evaluate the request with these
cuts: ``naive``, ``single`` and ``prefix`` are bit-identical; ``batched`` decodes several items'
trunks in one call and agrees only to a measured tolerance (docs/numerics.md#engines), except with
``parallel=1``.

A backend declares its ``Options`` (a frozen dataclass extending ``options.ScoringOptions``), its
``capabilities`` (and its registration, whether it reads a model file); shared code asks for those, never for a
backend's name. ``Declared.schedule`` keeps each request's schedule: one tokenization per backend.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from abricot_local import memory
from abricot_local.core import Generated, Request, Scored
from abricot_local.errors import AbricotError, ContextOverflowError, UsageError, opt
from abricot_local.backends.session import Counters
from abricot_local.record.schema import Provenance

SCHEDULE_VERSION = "prefix|trunk|tail/v2"  # v2: the prefix is the text up to its last blank line

# What a backend can do; shared code asks ``CAPABILITY in backend.capabilities``.
SCORE = "score"  # log-likelihoods of continuations (Request -> Scored)
GENERATE = "generate"  # greedy generation until stop strings: ``generate()``
ROLLING = "rolling"  # token-level scoring for rolling windows: ``tokenize(bos=)``, ``prefix_token``, ``score_tokens()``


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

    def targets_at(self) -> dict[int, tuple[int, ...]]:
        """Position -> the token ids some continuation predicts from its row (sorted, unique)."""
        out: dict[int, set[int]] = {}
        for i in range(len(self.seqs)):
            for pos, tok in self.targets(i):
                out.setdefault(pos, set()).add(tok)
        return {pos: tuple(sorted(toks)) for pos, toks in out.items()}

    def scored(self, logprobs, greedy=None) -> Scored:
        """The result of this request, given each continuation's log-likelihood (and whether
        each continuation is the greedy one)."""
        return Scored(
            logprobs=tuple(float(x) for x in logprobs),
            continuation_tokens=tuple(s[c:] for s, c in zip(self.seqs, self.ctx_lens)),
            n_context_tokens=min(self.ctx_lens),
            fast_path=self.fast_path,
            greedy=None if greedy is None else tuple(bool(g) for g in greedy),
        )

    @classmethod
    def from_tokens(cls, context: Sequence[int], continuations: Sequence[Sequence[int]], n_ctx: int, *,
                    prefix: Sequence[int] = (), label: str = "", asked_n_ctx: int | None = None) -> "Schedule":
        """The schedule of a request given as token ids (BOS, if any, already in ``context``):
        the same cuts :func:`schedule` makes once it has tokenized a text request."""
        if not context:
            raise UsageError(f"item {label}: the context has no token (give at least BOS)")
        if any(not c for c in continuations) or not continuations:
            raise UsageError(f"item {label}: a continuation has no token")
        ctx = tuple(context)
        seqs = tuple(ctx + tuple(c) for c in continuations)
        return _cuts(seqs, (len(ctx),) * len(seqs), tuple(prefix), n_ctx, asked_n_ctx, label)

    @property
    def n_tokens(self) -> int:
        """Tokens a single evaluation of this request decodes (prefix, trunk, tails)."""
        return self.trunk_len + sum(len(self.tail(i)) for i in range(len(self.seqs)))


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if not (type(a) is type(b) and isinstance(a, (list, tuple))):
        a, b = tuple(a), tuple(b)
    i = 0  # equal blocks compared at once (prompts of thousands of tokens), then halves of a block (at most once)
    for step in (128, 64, 32, 16, 8, 4, 2, 1):
        while i + step <= n and a[i:i + step] == b[i:i + step]:
            i += step
    return i


def schedule(request: Request, tokenize: Callable[[str], list[int]], n_ctx: int,
             asked_n_ctx: int | None = None) -> Schedule:
    """Map a request to token sequences and its canonical cuts.

    ``tokenize(text)`` must return the model's tokens for ``text`` with BOS
    already added when the model adds one. ``n_ctx`` is the context the backend
    allocated, ``asked_n_ctx`` what --n-ctx asked for (when they differ).
    """
    _refuse_long(request, tokenize, n_ctx, asked_n_ctx)
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
    prefix = tuple(tokenize(request.prefix)) if request.prefix else ()
    return _cuts(tuple(seqs), tuple(ctx_lens), prefix, n_ctx, asked_n_ctx, request.label)


PROBE_CHARS = 8  # characters per token a first look at a long context assumes (a text holds 2 to 5)
PROBE_SLACK = 64  # tokens a cut text may have more than its part of the whole: a cut word, a merge


def _window(n_ctx: int, asked_n_ctx: int | None) -> str:
    return opt("n_ctx", n_ctx) if asked_n_ctx in (None, n_ctx) else \
        f"{opt('n_ctx', asked_n_ctx)} asked, llama.cpp allocated {n_ctx}"


def _refuse_long(request: Request, tokenize: Callable[[str], list[int]], n_ctx: int,
                 asked_n_ctx: int | None) -> None:
    """A context far past the window refused before the whole of it is tokenized (a paragraph of
    megabytes took minutes and gigabytes): its beginning is tokenized first, a window's worth of
    characters and then four times more each look, and a beginning already longer than the
    window (by more than :data:`PROBE_SLACK`) is the error."""
    text, size = request.context, (n_ctx + 1) * PROBE_CHARS
    while size < len(text):
        n = len(tokenize(text[:size]))
        if n > n_ctx + PROBE_SLACK:
            raise ContextOverflowError(
                f"item {request.label}: the prompt is {len(text):,} characters, at least {n - PROBE_SLACK:,} tokens "
                f"(its first {size:,} characters alone are {n:,}), but the context window holds {n_ctx} "
                f"({_window(n_ctx, asked_n_ctx)}); shorten the item, raise {opt('n_ctx')} or use a model with a longer "
                "context")
        size *= 4


def _cuts(seqs: tuple[tuple[int, ...], ...], ctx_lens: tuple[int, ...], prefix: tuple[int, ...], n_ctx: int,
          asked_n_ctx: int | None, label: str) -> Schedule:
    """The canonical cuts of token sequences: the trunk they share, the prefix inside it."""
    longest = max(len(s) for s in seqs)
    if longest > n_ctx:
        raise ContextOverflowError(
            f"item {label}: the prompt is {longest} tokens but the context window holds "
            f"{n_ctx} ({_window(n_ctx, asked_n_ctx)}); raise {opt('n_ctx')} or use a model with a longer context"
        )
    trunk = seqs[0]
    for s in seqs[1:]:
        trunk = trunk[: common_prefix_len(trunk, s)]
    trunk_len = len(trunk)
    if trunk_len == 0:
        raise UsageError(f"item {label}: the continuations share no context token")
    prefix_len = common_prefix_len(prefix, trunk) if prefix else 0
    # The prefix ends before the first scored position, and leaves at least two
    # trunk tokens (a lone token in its own decode call scores differently).
    prefix_len = max(0, min(prefix_len, min(ctx_lens) - 1, trunk_len - 2))
    return Schedule(seqs, ctx_lens, prefix_len, trunk_len)


def generation_prefix_len(prompt: Sequence[int], prefix: Sequence[int]) -> int:
    """How much of a generation prompt is its cached prefix: the tokens it shares with the
    prefix's tokens, leaving at least two prompt tokens to the trunk (as :func:`schedule`)."""
    return max(0, min(common_prefix_len(prefix, prompt), len(prompt) - 2)) if prefix else 0


def chunks(start: int, tokens: Sequence[int], n_batch: int) -> list[tuple[int, tuple[int, ...]]]:
    """Cut a segment starting at position ``start`` into ``n_batch``-token decode calls."""
    return [
        (start + k, tuple(tokens[k : k + n_batch])) for k in range(0, len(tokens), n_batch)
    ]


@dataclass(frozen=True)
class Preflight:
    """A backend's memory facts before it loads a model: its KV cache, free VRAM, remote devices' free memory."""

    kv_bytes: int
    vram: int = 0
    remote: int = 0

    def fit(self, weights: int) -> memory.Fit | None:
        """``weights`` bytes + the KV cache against RAM (+ VRAM, + remote devices)."""
        return memory.fit(weights, self.kv_bytes, vram=self.vram, remote=self.remote)

    def check(self, weights: int) -> None:
        """Refuse a model that clearly does not fit (:func:`memory.check_memory`)."""
        memory.check_memory(weights, self.kv_bytes, vram=self.vram, remote=self.remote)


def provenance_of(facts: dict[str, Any]) -> Provenance:
    """A backend's provenance as the record types it: its own keys (llama.cpp's build, threads...)
    kept in ``extra``, in the order given."""
    return Provenance.from_dict(json.loads(json.dumps(facts)), "provenance")


def schedule_facts(engine: str, n_ctx: int, allocated: int | None = None) -> tuple[str, ...]:
    """The start line's engine and context (``allocated``: what the runtime made of ``n_ctx``)."""
    ctx = f"{allocated} (asked {n_ctx})" if allocated not in (None, n_ctx) else n_ctx
    return f"engine {engine}", f"n_ctx {ctx}"


class BackendClass(Protocol):
    """What a backend class declares, read before any instance exists (flags, option checks,
    the plan, the memory check): shared code calls these, never looks them up by name."""

    name: str
    Options: type  # a frozen dataclass extending options.ScoringOptions
    capabilities: frozenset[str]
    # (whether MODEL is a file is its registration's: backends.Registered.reads_model_file; whether its numbers say
    # nothing about a model, its provenance's ``synthetic``)

    def __call__(self, model: str, options: Any) -> "Backend": ...

    def config(self, options: Any) -> dict:
        """What a run records of its options (compared on --resume)."""

    def preflight(self, path: Path, options: Any) -> Preflight | None:
        """Memory facts before loading, or None when it has none."""

    def speed_settings(self, options: Any) -> dict | None:
        """What changes its speed besides the model (a calibration's key); None: no calibration."""

    def watch_remote(self, options: Any, lost: Callable[[AbricotError], None]) -> None:
        """Call ``lost`` (which ends the process) when a remote device it uses goes away."""

    def kernel_threads(self, options: Any) -> int | None:
        """The threads it decodes on with ``options``, resolved (its own default applied); None: not known."""


class Declared:
    """The defaults of :class:`BackendClass`'s members, for a backend class to extend."""

    @classmethod
    def config(cls, options) -> dict:
        return options.config()

    @classmethod
    def preflight(cls, path: Path, options) -> Preflight | None:
        return None

    @classmethod
    def speed_settings(cls, options) -> dict | None:
        return None

    @classmethod
    def watch_remote(cls, options, lost: Callable[[AbricotError], None]) -> None:
        return None

    @classmethod
    def kernel_threads(cls, options) -> int | None:
        """Its ``threads`` option where its options have one and it is set, else None (a backend whose own
        default is a count says it: llama.cpp's, every core)."""
        return getattr(options, "threads", None) or None

    @property
    def counters(self) -> Counters:
        """None counted: a backend without an engine (the shipped ones give their engine's)."""
        return Counters()

    def schedule(self, request: Request) -> Schedule:
        """The request's schedule, made once per backend (its ``make_schedule(request)``: its tokenizer) and
        kept: the run's plan lines, its fit check and its scoring ask for it, one tokenization."""
        memo = self.__dict__.setdefault("_schedules", {})
        if request not in memo:
            memo[request] = self.make_schedule(request)
        return memo[request]


class Backend(Protocol):
    """What the runner needs from an inference backend (see ARCHITECTURE.md)."""

    name: str
    capabilities: frozenset[str]
    options: object  # the backend's Options (a ScoringOptions of backends/options.py)

    def score(self, request: Request) -> Scored: ...

    def score_many(self, requests: Sequence[Request]) -> list[Scored]:
        """Score several requests, results in the same order."""
        ...

    def batch_size(self) -> int:
        """How many requests ``score_many`` is best given at once (1: no gain from more)."""
        ...

    def schedule(self, request: Request) -> Schedule:
        """Token sequences and cuts of a request (tokenizes; decodes nothing)."""
        ...

    def piece(self, token: int) -> str: ...

    def render_chat(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        """Messages through the model's chat template, less the BOS text (tokenize adds it; special=True)."""

    # -- with ROLLING: token-level scoring (lm-eval's rolling windows) ---------------------
    def tokenize(self, text: str, *, special: bool = False, bos: bool = True) -> list[int]:
        """The model's tokens for ``text``, BOS first when the model adds one (and ``bos``)."""
        ...

    @property
    def prefix_token(self) -> int:
        """What a text's first token is predicted from: BOS when the model adds one, else its EOS (lm-eval's)."""
        ...

    def n_ctx(self) -> int:
        """The context the backend allocated, in tokens."""
        ...

    def score_tokens(self, context: Sequence[int], continuations: Sequence[Sequence[int]], *,
                     label: str = "") -> Scored:
        """Score token-id continuations after token-id ``context`` (``Schedule.from_tokens``)."""
        ...

    # -- with GENERATE ---------------------------------------------------------------------
    def generate(self, prompt: str, until: Sequence[str], max_tokens: int, *, label: str = "",
                 parse_special: bool = False) -> Generated:
        """Greedy generation after ``prompt`` until a stop string, EOS, ``max_tokens`` or n_ctx."""
        ...

    def provenance(self) -> Provenance:
        """What made its numbers (the record's ``provenance``: its own keys in ``extra``)."""
        ...

    def start_facts(self) -> tuple[str, ...]:
        """What it resolved, as short facts for the run's start line (``engine prefix``, ``n_ctx 2048``)."""
        ...

    @property
    def counters(self) -> Counters:
        """What it did so far: decode calls, tokens, requests, prefix hits, thread-dependent calls (``check``'s)."""
        ...

    def close(self) -> None: ...
