"""Ctrl-C and SIGTERM while llama.cpp works: kept, raised once the C call returns, and acted on
within a few seconds when it does not return.

Python runs a signal's handler in the main thread at its next bytecode. During a C call
that is inside a ctypes callback (llama.cpp's log, a model load's progress, ggml's abort
hook), and an exception raised there (KeyboardInterrupt) is printed as "Exception ignored
on calling ctypes callback function" and dropped: the signal is lost and the run goes on.
A C call that never returns (a socket read from an RPC server that went silent) runs no
Python code in the main thread at all, so no handler runs.

:func:`deferred` wraps such C calls: for their duration the Python handlers of SIGINT and
SIGTERM only record the signal; on the way out they are restored and the recorded signal
is handed to its own handler (KeyboardInterrupt, or whatever the program installed), once
llama.cpp has returned. A callback may ask :func:`pending` to cut the C work short (the
model load's progress callback does). And a watchdog thread hears the signal at once
(Python's wakeup file descriptor, written by its C-level handler): when the C call has not
returned :data:`GRACE` seconds later, it calls the handlers given to :func:`on_stuck`
(the CLI's: the folder marked INTERRUPTED, the resume command) and ends the process with
``os._exit`` (130 after them, or 128 + the signal without one). Handlers that are not
Python functions (SIG_DFL, SIG_IGN) are left alone: no Python code runs for them. Outside
the main thread nothing changes (Python handlers only ever run in the main thread). No
llama_cpp import here.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE = 3.0  # seconds a C call has, after a signal, to return before the process ends without it
EXIT_INTERRUPTED = 130
_state: dict = {"depth": 0, "pending": None, "block": 0, "handled": ()}
_stuck: list[Callable[[int], None]] = []
_watch: dict = {}  # "r", "w": the wakeup pipe; "thread"
_left: list[threading.Thread] = []  # threads left inside a C call


def pending() -> int | None:
    """The signal received during the current :func:`deferred` block, if any."""
    return _state["pending"]


def on_stuck(handler: Callable[[int], None]) -> Callable[[], None]:
    """Call ``handler(signum)`` from the watchdog thread when a signal came during a
    :func:`deferred` block that did not end within :data:`GRACE` seconds (the main thread is
    still inside llama.cpp); the process ends after it. Returns what unregisters it."""
    _stuck.append(handler)
    return lambda: handler in _stuck and _stuck.remove(handler)


def abandoned(thread: threading.Thread) -> None:
    """A thread left inside a C call that never returned (rpc.bounded): the process must then
    end without running the C library's exit-time destructors, which may wait on it
    (:func:`exit_process`)."""
    _left.append(thread)


def left_inside() -> bool:
    """Whether a thread was left inside a C call that never returned (:func:`abandoned`)."""
    return any(t.is_alive() for t in _left)


def exit_process(code: int) -> None:
    """End the process with ``code``: sys.exit, or os._exit once a thread was left inside a C
    call (stdout and stderr flushed first)."""
    if left_inside():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


def _record(signum: int, _frame) -> None:
    if _state["pending"] is None:
        _state["pending"] = signum


def _abandon(signum: int) -> None:
    """The C call did not return: say so, let the handlers save what they can, end the process."""
    try:
        sys.stderr.write(f"\nllama.cpp did not return within {GRACE:g} s of the signal: stopping without it\n")
        sys.stderr.flush()
        for handler in list(_stuck):
            handler(signum)
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(EXIT_INTERRUPTED if _stuck else 128 + signum)


def _watchdog(fd: int) -> None:
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        for signum in data:
            block = _state["block"]
            if not _state["depth"] or signum not in _state["handled"]:
                continue
            end = time.monotonic() + GRACE  # (the main thread records it, once it runs Python again)
            while time.monotonic() < end and _state["depth"] and _state["block"] == block:
                time.sleep(0.05)
            if _state["depth"] and _state["block"] == block:
                _abandon(signum)


def _wakeup_fd() -> int:
    """The write end of the watchdog's pipe (the thread started once per process)."""
    if not _watch:
        r, w = os.pipe()
        os.set_blocking(w, False)
        thread = threading.Thread(target=_watchdog, args=(r,), name="abricot-interrupts", daemon=True)
        _watch.update(r=r, w=w, thread=thread)
        thread.start()
    return _watch["w"]


@contextmanager
def deferred() -> Iterator[None]:
    """Record SIGINT/SIGTERM during the block; deliver the first one after it (nests); when
    the block does not end within :data:`GRACE` seconds of it, end the process (:func:`on_stuck`)."""
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
    old_fd = None
    _state.update(depth=1, pending=None, block=_state["block"] + 1)
    try:
        for sig in SIGNALS:
            handler = signal.getsignal(sig)
            if callable(handler):
                saved[sig] = handler
                signal.signal(sig, _record)
        _state["handled"] = tuple(saved)
        if saved:
            try:
                old_fd = signal.set_wakeup_fd(_wakeup_fd(), warn_on_full_buffer=False)
            except (ValueError, OSError):  # no watchdog then; the signal still waits for the call
                old_fd = None
        yield
    finally:
        _state.update(depth=0, block=_state["block"] + 1, handled=())
        if old_fd is not None:
            signal.set_wakeup_fd(old_fd)
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        got = _state["pending"]
        _state["pending"] = None
        if got in saved:
            saved[got](got, None)  # KeyboardInterrupt, here and not inside a callback
