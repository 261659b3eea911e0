"""Ctrl-C and SIGTERM while llama.cpp works: kept, and raised once the C call returns.

Python runs a signal's handler in the main thread at its next bytecode. During a C call
that is inside a ctypes callback (llama.cpp's log, a model load's progress, ggml's abort
hook), and an exception raised there (KeyboardInterrupt) is printed as "Exception ignored
on calling ctypes callback function" and dropped: the signal is lost and the run goes on.

:func:`deferred` wraps such C calls: for their duration the Python handlers of SIGINT and
SIGTERM only record the signal; on the way out they are restored and the recorded signal
is handed to its own handler (KeyboardInterrupt, or whatever the program installed), once
llama.cpp has returned. A callback may ask :func:`pending` to cut the C work short (the
model load's progress callback does). Handlers that are not Python functions (SIG_DFL,
SIG_IGN) are left alone: no Python code runs for them. Outside the main thread nothing
changes (Python handlers only ever run in the main thread). No llama_cpp import here.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_state: dict = {"depth": 0, "pending": None}


def pending() -> int | None:
    """The signal received during the current :func:`deferred` block, if any."""
    return _state["pending"]


def _record(signum: int, _frame) -> None:
    if _state["pending"] is None:
        _state["pending"] = signum


@contextmanager
def deferred() -> Iterator[None]:
    """Record SIGINT/SIGTERM during the block; deliver the first one after it (nests)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _state["depth"]:  # an outer block delivers
        _state["depth"] += 1
        try:
            yield
        finally:
            _state["depth"] -= 1
        return
    saved = {}
    _state.update(depth=1, pending=None)
    try:
        for sig in SIGNALS:
            handler = signal.getsignal(sig)
            if callable(handler):
                saved[sig] = handler
                signal.signal(sig, _record)
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        got = _state["pending"]
        _state.update(depth=0, pending=None)
        if got in saved:
            saved[got](got, None)  # KeyboardInterrupt, here and not inside a callback
