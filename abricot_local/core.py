"""Types and defaults shared by tasks, backends and the runner. Imports nothing of the project
but errors, so every other module can depend on it.

A :class:`Request` is what a task asks a backend to score: a context and its
continuations, the whitespace belonging to the continuation (``" A"``), as
lm-evaluation-harness has it. A :class:`Scored` is the answer: one
log-likelihood per continuation, with the token ids that were scored. A
:class:`Generated` is a greedy generation (backends with the GENERATE capability).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Context, Decimal
from functools import lru_cache

import numpy as np

from abricot_local.errors import NonFiniteError, UsageError, opt

# -- defaults: the one place they are written -------------------------------------------------
DEFAULT_SEED = 1234
MAX_SEED = 2**64 - 1  # the widest seed: numpy's generators take it, a record holds it (jsonfiles.MAX_DIGITS)
DEFAULT_N_CTX = 2048
DEFAULT_N_BATCH = 512
DEFAULT_ENGINE = "prefix"


PREFIX_DELIMITER = "\n\n"


def cached_prefix(context: str) -> str:
    """The cached prefix of a context: its text up to and including its last blank line
    (``"\\n\\n"``), none when it has no blank line. The one rule deciding where every door (`run`,
    `check`, the API, shards, resume, the lm-eval model) cuts a prompt: a function of the final
    text alone (chat-wrapped, few-shot assembled), never of who built it (docs/numerics.md)."""
    k = context.rfind(PREFIX_DELIMITER)
    return context[: k + len(PREFIX_DELIMITER)] if k >= 0 else ""


@dataclass(frozen=True)
class Request:
    """Score each continuation after ``context``; its cached prefix follows from the text alone."""

    context: str
    continuations: tuple[str, ...]
    label: str = ""  # names the item in error messages
    parse_special: bool = False  # chat-template text: "<start_of_turn>" is one special token

    def __post_init__(self) -> None:
        if not self.continuations:
            raise UsageError(f"request {self.label!r} has no continuations")

    @property
    def prefix(self) -> str:
        """The head of the context kept in the KV cache between requests: :func:`cached_prefix`."""
        return cached_prefix(self.context)


@dataclass(frozen=True)
class Scored:
    """Log-likelihood of each continuation, with the token ids that were scored."""

    logprobs: tuple[float, ...]
    continuation_tokens: tuple[tuple[int, ...], ...]
    n_context_tokens: int
    fast_path: bool
    # per continuation: every token is the argmax of the row that predicts it (lm-eval's
    # is_greedy), read from the same checked rows as the log-likelihood; None: not computed
    greedy: tuple[bool, ...] | None = None


@dataclass(frozen=True)
class Generated:
    """A greedy generation: its text (cut before the first stop string), the generated token
    ids (up to the stop) and why it stopped: "until", "eos", "max_tokens" or "n_ctx"."""

    text: str
    tokens: tuple[int, ...]
    reason: str


def log_softmax(logits) -> np.ndarray:
    """Numerically stable log-softmax in float64 (numpy's exp and log: their last bit depends on
    the CPU's instruction set; :func:`exact_log_softmax` where a recorded number must not)."""
    x = np.asarray(logits, dtype=np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


# -- the same bits on every machine ----------------------------------------------------------
# decimal's exp and ln are correctly rounded and computed in integer arithmetic, math.fsum is
# exact, and +, -, * of floats are IEEE-754's: no libm, no SIMD dispatch, no FMA contraction.
_EXACT = Context(prec=40)


@lru_cache(maxsize=4096)
def exact_exp(x: float) -> float:
    """exp(x) as the same float on every CPU (correctly rounded to 40 digits, then to a float)."""
    return float(Decimal(x).exp(_EXACT))


def exact_log(x: float) -> float:
    """ln(x) of a positive float, the same float on every CPU."""
    return float(Decimal(x).ln(_EXACT))


def exact_log_softmax(values) -> list[float]:
    """The log-softmax of a few finite values with the same bits on every CPU (pure Python: for
    rows of a few hundred values, such as the fake backend's or a task's choices)."""
    xs = [float(v) for v in values]
    m = max(xs)
    lse = m + exact_log(math.fsum(exact_exp(x - m) for x in xs))
    return [x - lse for x in xs]


VERIFY_FILE = "verify the file's SHA-256 (a registry alias: `abricot-local pull ALIAS` again)"


def finite_log_softmax(logits, *, label: str, position: int, normalized: bool = False, advice: str = "") -> np.ndarray:
    """The log-softmax of one row of logits; :class:`NonFiniteError` when the row (or its
    log-sum-exp) holds NaN or an infinity, with ``advice`` (the session's: what to try with its backend's
    options) before :data:`VERIFY_FILE`. Every row any engine scores passes here. A row that is
    ``normalized`` (log-probabilities already, as the fake backend computes them exactly) is
    checked and kept as it is."""
    advice = f"{advice}; {VERIFY_FILE}" if advice else VERIFY_FILE
    x = np.asarray(logits, dtype=np.float64)
    finite = np.isfinite(x)
    if not finite.all():
        nan = int(np.isnan(x).sum())
        raise NonFiniteError(
            f"item {label}: non-finite logits at token position {position} "
            f"({nan} NaN, {x.size - int(finite.sum()) - nan} infinite of {x.size}); the model or the "
            f"build computes garbage: {advice}. Scored items are kept: {opt('resume', True)} continues."
        )
    if normalized:
        return x
    row = log_softmax(x)
    if not np.isfinite(row[0]):
        raise NonFiniteError(f"item {label}: the log-sum-exp at token position {position} is not finite; "
                             f"{advice}")
    return row


def argmax(values) -> int:
    """First index of the maximum (ties go to the earlier choice, deterministically)."""
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best
