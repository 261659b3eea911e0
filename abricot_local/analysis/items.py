"""What makes two scorings the same item, whatever their task key, item id or door: the text scored.

:func:`scored_key` is shared by `compare`'s pairing of task instances recorded under different keys
(alignment.py) and by the matching of an lm-eval output's items to a task's own (lm_eval_input.py).
"""

from __future__ import annotations

import hashlib


def scored_key(context: str | None, continuations=()) -> str:
    """SHA-256 of a scored context and its continuations (in order): two scorings with the same key
    scored the same text."""
    h = hashlib.sha256(str(context).encode("utf-8"))
    for c in continuations or ():
        h.update(b"\0" + str(c).encode("utf-8"))
    return h.hexdigest()
