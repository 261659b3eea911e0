"""What makes two scorings the same item, whatever their task key, item id or door: the text scored.

:func:`scored_key` is shared by `compare`'s pairing of task instances recorded under different keys
(alignment.py) and by the matching of an lm-eval output's items to a task's own (lm_eval_input.py).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache


def scored_key(context: str | None, continuations=()) -> str:
    """SHA-256 of a scored context and its continuations (in order): two scorings with the same key
    scored the same text."""
    scored = tuple(continuations or ())
    if (context is None or type(context) is str) and _TEXT.issuperset(map(type, scored)):
        return _known(context, scored)  # the same texts asked again (each candidate task's items): hashed once
    return _digest(context, scored)


_TEXT = frozenset({str})


@lru_cache(maxsize=4096)  # the texts of a few tasks' items (a few KB each); keys of exact str or None only
def _known(context: str | None, scored: tuple[str, ...]) -> str:
    return _digest(context, scored)


def _digest(context, scored: tuple) -> str:
    h = hashlib.sha256(str(context).encode("utf-8"))
    for c in scored:
        h.update(b"\0" + str(c).encode("utf-8"))
    return h.hexdigest()
