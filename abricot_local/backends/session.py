"""What crosses between an engine and a backend's session: the :class:`Session` protocol (a
model's primitives), the decode entries, the :class:`Row` kept of each checked log-softmax
row, the :class:`Counters` an engine keeps, and the options an engine reads. No backend
import: the llama.cpp session and the fake one implement it; engines.py uses it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol, Sequence

import numpy as np

Entry = tuple[int, int, int, bool]  # (sequence, position, token, wants a row)
MAX_PARALLEL = 255  # llama.cpp holds at most 256 sequences; one is the shared prefix's


class EngineOptions(Protocol):
    """The options an engine reads (every backend's options hold them: backends/options.py)."""

    n_ctx: int
    engine: str
    parallel: int | None


class Session(Protocol):
    """A model's primitives, as the engines use them."""

    n_batch: int  # the most tokens one decode call takes: the schedule's cut
    # its rows are log-probabilities already (the fake backend's, exact on every CPU): the
    # engine checks them (finite) and does not normalise them again; a model's logits: False
    normalized: bool
    # what a user can try when a row is not finite (core.finite_log_softmax), its options named with errors.opt
    nonfinite_advice: str

    def decode(self, entries: Sequence[Entry]) -> list[np.ndarray | None]:
        """One decode call; raw logits for each entry that wants a row, else None."""
        ...

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool: ...

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None: ...

    def clear(self) -> None: ...

    def n_ctx(self) -> int: ...

    def thread_dependent(self, entries: Sequence[Entry]) -> bool:
        """Whether this decode call's numbers depend on the thread count (the backend's kernels
        split its work by thread, as llama.cpp's CPU flash attention does for one token over a
        long cache: docs/numerics.md); counted, so that ``check`` can say so."""
        ...

    # used by generation only
    def token_bytes(self, token: int) -> bytes:
        """The text a generated token adds, as UTF-8 bytes (special tokens add none)."""
        ...

    def is_eog(self, token: int) -> bool: ...


# What :func:`missing` checks of a session when its backend opens (backends.open_backend), before any item is
# scored: the members of :class:`Session` every engine uses, and those only generation uses.
SESSION_MEMBERS = ("n_batch", "normalized", "nonfinite_advice", "decode", "seq_rm", "seq_cp", "clear", "n_ctx",
                   "thread_dependent")
GENERATION_MEMBERS = ("token_bytes", "is_eog")
_TYPES = {"n_batch": int, "normalized": bool, "nonfinite_advice": str}


def missing(session: object, *, generates: bool) -> list[str]:
    """What ``session`` lacks of :class:`Session` (``generates``: its backend declares generation, which needs
    :data:`GENERATION_MEMBERS` too), each member once, a value of the wrong type named with what it must be."""
    out = []
    for name in (*SESSION_MEMBERS, *(GENERATION_MEMBERS if generates else ())):
        value = getattr(session, name, _NONE)
        want = _TYPES.get(name)
        if value is _NONE:
            out.append(name)
        elif want is not None and (not isinstance(value, want) or want is int and (isinstance(value, bool) or value < 1)):
            out.append(f"{name} (must be {'a positive integer' if want is int else want.__name__}, got {value!r})")
        elif want is None and not callable(value):
            out.append(f"{name} (must be a method)")
    return out


_NONE = object()


class Row(NamedTuple):
    """What is kept of one checked log-softmax row: its argmax (first on ties, from the raw
    logits) and the log-probabilities of the tokens it was asked for."""

    argmax: int
    logprobs: dict[int, float]


@dataclass
class Counters:
    decode_calls: int = 0
    tokens: int = 0
    requests: int = 0
    prefix_hits: int = 0
    thread_dependent: int = 0  # decode calls whose numbers depend on the thread count
