"""A deterministic fake backend: no model file, same schedule and scoring code paths.

Tokens are UTF-8 bytes (id 256 is BOS). The next-token distribution at a
position is a pseudo-random function of the tokens up to it, so the numbers
depend on the text exactly as a real model's would, and a run is reproducible.
"""

from __future__ import annotations

import hashlib

import numpy as np

from abricot_local.backends.base import (
    CHAT_MARK,
    ENGINES,
    SCHEDULE_VERSION,
    BackendOptions,
    Request,
    Schedule,
    Scored,
    log_softmax,
    resolved_parallel,
    schedule,
    split_chat,
)
from abricot_local.errors import UsageError

BOS = 256
N_VOCAB = 257


class FakeBackend:
    """Registered like the llama.cpp backend; ``model`` is only a label."""

    name = "fake"

    def __init__(self, model: str = "fake", options: BackendOptions = BackendOptions()):
        if options.engine not in ENGINES:
            raise UsageError(f"unknown engine {options.engine!r}; choose from {', '.join(ENGINES)}")
        self.model = str(model)
        self.options = options
        self.parallel = resolved_parallel(options)  # validates --parallel
        self.calls = 0

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return [BOS, *text.encode("utf-8")]

    def piece(self, token: int) -> str:
        return "<bos>" if token == BOS else bytes([token]).decode("latin-1")

    def chat_wrap(self) -> tuple[str, str]:
        """A ChatML-like template, so chat mode runs through the same code without a model."""
        return split_chat(f"<bos><|user|>\n{CHAT_MARK}<|end|>\n<|assistant|>\n", "<bos>")

    def schedule(self, request: Request) -> Schedule:
        return schedule(request, self.tokenize, self.options.n_ctx)

    def _row(self, history: tuple[int, ...]) -> np.ndarray:
        digest = hashlib.blake2b(
            bytes(str(self.options.seed), "ascii") + np.asarray(history, dtype=np.int32).tobytes(),
            digest_size=8,
        ).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "little"))
        return log_softmax(rng.normal(0.0, 2.0, N_VOCAB))

    def score(self, request: Request) -> Scored:
        sch = self.schedule(request)
        self.calls += 1
        return sch.scored(
            sum(self._row(seq[: pos + 1])[tok] for pos, tok in sch.targets(i)) for i, seq in enumerate(sch.seqs)
        )

    def score_many(self, requests: list[Request]) -> list[Scored]:
        """The fake has no batching: every engine, batched included, scores one by one."""
        return [self.score(r) for r in requests]

    def batch_size(self) -> int:
        return self.parallel

    def provenance(self) -> dict:
        o = self.options
        sched = {"version": SCHEDULE_VERSION, "engine": o.engine, "n_ctx": o.n_ctx}
        if o.engine == "batched":
            sched |= {"parallel": self.parallel, "kv_unified": True}
        return {
            "backend": self.name,
            "model_desc": self.model,
            "n_vocab": N_VOCAB,
            "add_bos": True,
            "schedule": sched,
        }

    def close(self) -> None:
        pass
