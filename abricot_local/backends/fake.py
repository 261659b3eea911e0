"""A deterministic fake backend: no model file, the same engines and scoring code paths.

Tokens are UTF-8 bytes (id 256 is BOS, also its end of text). The next-token logits at a position are
a pseudo-random function of the tokens up to it, so the numbers depend on the
text exactly as a real model's would, and a run is reproducible. Its session
emulates a KV cache of sequences, so every engine strategy runs on it unchanged.

Its numbers are the same bits on every machine: the logits are integers drawn from PCG64 (integer
arithmetic) over 64, and the session returns their log-softmax computed exactly
(``core.exact_log_softmax``: no libm, no SIMD), so a pinned samples file holds on any CPU.
"""

from __future__ import annotations

import hashlib
import math
from array import array
from typing import Sequence

import numpy as np

from abricot_local.backends.base import (
    GENERATE,
    ROLLING,
    SCHEDULE_VERSION,
    SCORE,
    Declared,
    Generated,
    Request,
    Schedule,
    Scored,
    generation_prefix_len,
    provenance_of,
    schedule,
    schedule_facts,
)
from abricot_local.core import cached_prefix, exact_exp, exact_log
from abricot_local.record.schema import Provenance
from abricot_local.backends.engines import Engine, engine_class
from abricot_local.backends.options import ScoringOptions
from abricot_local.backends.session import Counters

BOS = 256
N_VOCAB = 257
SPREAD = 224  # logits are integers in [-SPREAD, SPREAD) over SCALE: a standard deviation of about 2
SCALE = 64


_EXP = np.array([exact_exp(-d / SCALE) for d in range(2 * SPREAD)])  # exp((k - max) / SCALE), every difference


def log_softmax_of_ints(ints: np.ndarray) -> np.ndarray:
    """``core.exact_log_softmax`` of ``ints / SCALE``, the same bits, from a table: with integer logits over a
    power of two, x - max is exactly (k - kmax) / SCALE, one of 2 SPREAD values whose exact exp is computed once
    (math.fsum is exactly rounded in any order; a float subtraction rounds alike in numpy and Python)."""
    return ints.astype(np.float64) / SCALE - _log_sum_exp(ints)


def _log_sum_exp(ints: np.ndarray) -> float:
    top = int(ints.max())
    return top / SCALE + exact_log(math.fsum(_EXP[top - ints].tolist()))


_LSE: dict[bytes, float] = {}  # a row's log-sum-exp by its digest (the row is a function of it): the exact log,
_LSE_MAX = 1 << 17             # most of a row's cost, once per row a process sees (a kld pass sees it again)
_INTS: dict[bytes, bytes] = {}  # a row's integer logits by its digest, as int16 bytes (values in [-SPREAD, SPREAD)):
_INTS_MAX = 1 << 15             # the generator's draw skipped where a row is seen again (about 20 MB at most)
_TOKENS = "i"  # a history's array type: the bytes of np.int32 (a C int, native order), what the digest hashes
assert array(_TOKENS).itemsize == np.dtype(np.int32).itemsize


def _ints_of(digest: bytes) -> np.ndarray:
    """A row's integer logits: PCG64 seeded with its digest, memoized by it (:data:`_INTS`)."""
    got = _INTS.get(digest)
    if got is not None:
        return np.frombuffer(got, dtype=np.int16)
    ints = np.random.default_rng(int.from_bytes(digest, "little")).integers(-SPREAD, SPREAD, N_VOCAB)
    if len(_INTS) >= _INTS_MAX:
        _INTS.clear()
    _INTS[digest] = ints.astype(np.int16).tobytes()
    return ints


class _History:
    """A sequence's tokens at 0, 1, ... as far as its cells are known to run without a gap (a prefix of them, maybe
    shorter: cut where they may change, read on from the cells when a row needs more), and a blake2b that has read
    the seed's bytes and the first ``hashed`` of them: a row's digest costs its new tokens, not its whole history."""

    __slots__ = ("hash", "hashed", "seed", "tokens")

    def __init__(self) -> None:
        self.tokens = array(_TOKENS)
        self.hash, self.hashed, self.seed = None, 0, b""

    def cut(self, p: int) -> None:
        """The cells from ``p`` on may change."""
        p = max(p, 0)
        if len(self.tokens) > p:
            del self.tokens[p:]
        if self.hashed > p:
            self.hash = None

    def digest(self, seed: bytes, cells: dict[int, int], pos: int) -> bytes:
        """blake2b (8 bytes) of ``seed`` and the np.int32 bytes of the tokens at 0..pos (a KeyError where one is
        missing, the first missing one's, as ``cells[p]`` for p in 0..pos)."""
        tokens, n = self.tokens, max(pos + 1, 0)
        if len(tokens) < n:
            tokens.extend(map(cells.__getitem__, range(len(tokens), n)))
        if self.hash is None or self.hashed > n or self.seed != seed:
            self.hash, self.hashed, self.seed = hashlib.blake2b(seed, digest_size=8), 0, seed
        self.hash.update(tokens[self.hashed : n].tobytes())
        self.hashed = n
        return self.hash.digest()


_NO_SEQ = object()


class FakeSession:
    """Sequences of cells {position: token}; a row depends on the tokens at 0..pos (their digest)."""

    normalized = True  # its rows are exact log-probabilities
    nonfinite_advice = ""

    def __init__(self, options: ScoringOptions):
        self.options = options
        self.n_batch = options.n_batch
        self.cells: dict[int, dict[int, int]] = {}
        self.histories: dict[int, _History] = {}  # per sequence, what its rows' digests read
        self.poison: frozenset[int] = frozenset()  # token ids whose rows come out NaN (tests)

    def n_ctx(self) -> int:
        return self.options.n_ctx

    def decode(self, entries: Sequence[tuple[int, int, int, bool]]) -> list[np.ndarray | None]:
        last = _NO_SEQ
        for seq, pos, tok, _ in entries:
            if seq != last:  # a call's entries come in runs of one sequence
                last, cells, history = seq, self.cells.setdefault(seq, {}), self.histories.get(seq)
                known = len(history.tokens) if history is not None else 0
            cells[pos] = tok
            if pos < known and history.tokens[pos] != tok:
                history.cut(pos)
                known = len(history.tokens)
        return [self._row(seq, pos) if want else None for seq, pos, _, want in entries]

    def _row(self, seq: int, pos: int) -> np.ndarray:
        cells = self.cells[seq]
        history = self.histories.get(seq)
        if history is None:
            history = self.histories[seq] = _History()
        digest = history.digest(bytes(str(self.options.seed), "ascii"), cells, pos)
        if cells[pos] in self.poison:
            return np.full(N_VOCAB, np.nan)
        ints = _ints_of(digest)
        lse = _LSE.get(digest)
        if lse is None:
            if len(_LSE) >= _LSE_MAX:
                _LSE.clear()
            lse = _LSE[digest] = _log_sum_exp(ints)
        return ints.astype(np.float64) / SCALE - lse

    def _cut(self, seq: int, p0: int) -> None:
        if seq in self.histories:
            self.histories[seq].cut(p0)

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        cells = self.cells.get(seq, {})
        hi = float("inf") if p1 < 0 else p1
        for p in [p for p in cells if p >= max(p0, 0) and p < hi]:
            del cells[p]
        self._cut(seq, p0)
        return True

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        hi = float("inf") if p1 < 0 else p1
        self.cells.setdefault(dst, {}).update(
            {p: t for p, t in self.cells.get(src, {}).items() if p >= max(p0, 0) and p < hi})
        self._cut(dst, p0)

    def clear(self) -> None:
        self.cells.clear()
        self.histories.clear()

    def thread_dependent(self, entries) -> bool:
        return False  # numpy, one thread

    def token_bytes(self, token: int) -> bytes:
        return b"" if token == BOS else bytes([token])

    def is_eog(self, token: int) -> bool:
        return token == BOS


class FakeBackend(Declared):
    """Registered like the llama.cpp backend; ``model`` is only a label."""

    name = "fake"
    Options = ScoringOptions
    capabilities = frozenset({SCORE, ROLLING, GENERATE})

    def __init__(self, model: str = "fake", options: ScoringOptions = ScoringOptions()):
        self.model = str(model)
        self.options = options
        self.session = FakeSession(options)
        self.engine: Engine = engine_class(options.engine)(self.session, options)

    @property
    def counters(self) -> Counters:
        return self.engine.counters

    @property
    def calls(self) -> int:
        return self.engine.counters.requests

    @classmethod
    def speed_settings(cls, options: ScoringOptions) -> dict:
        """What changes its speed besides the model (a calibration's key)."""
        return {"backend": cls.name, "n_batch": options.n_batch}

    def tokenize(self, text: str, *, special: bool = False, bos: bool = True) -> list[int]:
        return [BOS, *text.encode("utf-8")] if bos else list(text.encode("utf-8"))

    prefix_token = BOS

    def n_ctx(self) -> int:
        return self.options.n_ctx

    def piece(self, token: int) -> str:
        return "<bos>" if token == BOS else bytes([token]).decode("latin-1")

    def make_schedule(self, request: Request) -> Schedule:
        return schedule(request, self.tokenize, self.options.n_ctx)

    def score(self, request: Request) -> Scored:
        return self.score_many([request])[0]

    def score_many(self, requests: Sequence[Request]) -> list[Scored]:
        return self.engine.score_many([self.schedule(r) for r in requests], [r.label for r in requests])

    def batch_size(self) -> int:
        return self.engine.parallel

    def score_tokens(self, context: Sequence[int], continuations: Sequence[Sequence[int]], *,
                     label: str = "") -> Scored:
        return self.engine.score(Schedule.from_tokens(context, continuations, self.options.n_ctx, label=label), label)

    def generate(self, prompt: str, until: Sequence[str], max_tokens: int, *, label: str = "",
                 parse_special: bool = False) -> Generated:
        tokens = self.tokenize(prompt)
        prefix = cached_prefix(prompt)
        p = generation_prefix_len(tokens, self.tokenize(prefix)) if prefix else 0
        return self.engine.generate(tokens, p, until, max_tokens, label)

    def render_chat(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        """A ChatML-like template, so chat mode runs through the same code without a model."""
        text = "".join(f"<|{m['role']}|>\n{m['content']}<|end|>\n" for m in messages)
        return text + ("<|assistant|>\n" if add_generation_prompt else "")

    def start_facts(self) -> tuple[str, ...]:
        return schedule_facts(self.options.engine, self.options.n_ctx)

    def provenance(self) -> Provenance:
        return provenance_of({
            "backend": self.name,
            "synthetic": True,
            "model_desc": self.model,
            "n_vocab": N_VOCAB,
            "add_bos": True,
            "schedule": {"version": SCHEDULE_VERSION, "n_ctx": self.options.n_ctx,
                         "n_batch": self.options.n_batch, **self.engine.schedule_facts()},
            "kernels": {"runtime": "fake", "build": "synthetic", "devices": [{"name": "fake", "type": "cpu"}]},
        })

    def close(self) -> None:
        pass
