"""A chat template's user turn: what it puts around one message (a run records it as
``provenance.chat_template``; each prompt itself is rendered whole, ``Backend.render_chat``)."""

from __future__ import annotations

from abricot_local.errors import UsageError

MARK = "\x00abricot-message\x00"  # a message no template changes: where the user's text stands


def turn_of(backend) -> tuple[str, str]:
    """(head, tail): what ``backend``'s chat template puts around one user message, with the generation prompt
    (the BOS text left out: tokenize adds it)."""
    rendered = backend.render_chat([{"role": "user", "content": MARK}])
    if rendered.count(MARK) != 1:
        raise UsageError("the model's chat template does not place the user message exactly once")
    head, tail = rendered.split(MARK)
    return head, tail
