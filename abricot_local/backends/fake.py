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


class FakeSession:
    """Sequences of cells {position: token}; a row depends on the tokens at 0..pos."""

    normalized = True  # its rows are exact log-probabilities
    nonfinite_advice = ""

    def __init__(self, options: ScoringOptions):
        self.options = options
        self.n_batch = options.n_batch
        self.cells: dict[int, dict[int, int]] = {}
        self.poison: frozenset[int] = frozenset()  # token ids whose rows come out NaN (tests)

    def n_ctx(self) -> int:
        return self.options.n_ctx

    def decode(self, entries: Sequence[tuple[int, int, int, bool]]) -> list[np.ndarray | None]:
        for seq, pos, tok, _ in entries:
            self.cells.setdefault(seq, {})[pos] = tok
        return [self._row(seq, pos) if want else None for seq, pos, _, want in entries]

    def _row(self, seq: int, pos: int) -> np.ndarray:
        cells = self.cells[seq]  # the tokens at 0..pos, read in C (a KeyError where one is missing, as ever)
        history = np.fromiter(map(cells.__getitem__, range(pos + 1)), dtype=np.int32, count=pos + 1)
        digest = hashlib.blake2b(bytes(str(self.options.seed), "ascii") + history.tobytes(), digest_size=8).digest()
        if cells[pos] in self.poison:
            return np.full(N_VOCAB, np.nan)
        ints = np.random.default_rng(int.from_bytes(digest, "little")).integers(-SPREAD, SPREAD, N_VOCAB)
        lse = _LSE.get(digest)
        if lse is None:
            if len(_LSE) >= _LSE_MAX:
                _LSE.clear()
            lse = _LSE[digest] = _log_sum_exp(ints)
        return ints.astype(np.float64) / SCALE - lse

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        cells = self.cells.get(seq, {})
        hi = float("inf") if p1 < 0 else p1
        for p in [p for p in cells if p >= max(p0, 0) and p < hi]:
            del cells[p]
        return True

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        hi = float("inf") if p1 < 0 else p1
        self.cells.setdefault(dst, {}).update(
            {p: t for p, t in self.cells.get(src, {}).items() if p >= max(p0, 0) and p < hi})

    def clear(self) -> None:
        self.cells.clear()

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
