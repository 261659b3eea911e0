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
(Python's wakeup file descriptor, written by its C-level handler) and raises the abort flag of
the decode running inside the block (each context has its own, :func:`new_abort_flag`, given as
``deferred(abort=flag)``), which llama.cpp's abort callback reads between two graph nodes
(:func:`abort_check`: a C function, no Python and no GIL in the compute loop): the decode returns
"aborted" within one node's time, and the signal is raised. A decode in another thread is never
cut: a flag is raised only inside a main thread's block, and one lock holds the watchdog's
check-then-raise and a block's exit-and-reset together (no late raise lands on a later decode).
When the C call has not returned :data:`GRACE` seconds later (a call that reads no abort flag: a
model load inside one tensor, a GPU backend, an RPC server that went silent), the door's choice
applies (:func:`waiting`): the command line's (the default), the handlers given to
:func:`on_stuck` are called (the folder marked INTERRUPTED, the resume command) and the process
ends with ``os._exit`` (130 after them, or 128 + the signal without one); a library's (the Python
API's calls, lm-eval's model's), it says that llama.cpp has not returned and waits for it, the
signal raised once it does, and only a second signal ends the process as the command line's would
(the user insisting). Handlers that are not Python functions (SIG_DFL, SIG_IGN) are left alone: no
Python code runs for them.
Outside the main thread nothing changes (Python handlers only ever run in the main thread).
No llama_cpp import here.
"""

from __future__ import annotations

import ctypes
import functools
import os
import select
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE = 3.0  # seconds a C call has, after a signal, to return before the process ends without it
EXIT_INTERRUPTED = 130
_state: dict = {"depth": 0, "pending": None, "block": 0, "handled": (), "waits": 0}
_lock = threading.RLock()  # the watchdog's check-then-raise against a block's arm/exit-and-reset (a handler re-enters)
_armed: list = []  # the abort flags of the decodes inside the main thread's current block
_stuck: list[Callable[[int], None]] = []
_watch: dict = {}  # "r", "w": the wakeup pipe; "thread"
_left: list[threading.Thread] = []  # threads left inside a C call


def pending() -> int | None:
    """The signal received during the current :func:`deferred` block, if any."""
    return _state["pending"]


def new_abort_flag() -> ctypes.Array:
    """A context's abort flag, the data of llama.cpp's abort callback (:func:`abort_check`; pass
    ``ctypes.cast(flag, ctypes.c_void_p)``): two bytes, [1, 0] (a C string of length 1) from a signal
    in a main thread's ``deferred(abort=flag)`` block to that block's end, else [0, 0]. Keep it alive
    as long as the context."""
    return (ctypes.c_ubyte * 2)()


def _raise_armed() -> None:
    with _lock:
        for flag in _armed:
            flag[0] = 1


@functools.cache
def abort_check() -> int | None:
    """The address of a C function that reads a :func:`new_abort_flag` as llama.cpp's ``ggml_abort_callback``
    (``bool (*)(void *)``: true aborts): the C library's ``strlen``, 1 on the raised flag, 0 otherwise (the
    byte after it is always 0; a bool return is its low byte). C, not a Python callback: ggml calls it
    after every graph node, where a Python one would take the GIL each time. None where there is no C
    library to find (no abort then: the watchdog's :data:`GRACE` applies)."""
    try:
        libc = ctypes.cdll.msvcrt if sys.platform == "win32" else ctypes.CDLL(None)
        return ctypes.cast(libc.strlen, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None


@contextmanager
def waiting() -> Iterator[None]:
    """Within the block (a library's call: the Python API's), a signal whose C call has not returned
    :data:`GRACE` seconds later is waited for (said once), and only a second signal ends the process;
    outside it (the command line) the process ends then (:func:`on_stuck`)."""
    _state["waits"] += 1
    try:
        yield
    finally:
        _state["waits"] -= 1


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
    _raise_armed()


def _say(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _abandon(signum: int, why: str = "") -> None:
    """The C call did not return: say so (``why``), let the handlers save what they can, end the process."""
    try:
        _say(f"\n{why or f'llama.cpp did not return within {GRACE:g} s of the signal'}: stopping without it\n")
        for handler in list(_stuck):
            handler(signum)
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(EXIT_INTERRUPTED if _stuck else 128 + signum)


def _inside(block: int) -> bool:
    return bool(_state["depth"]) and _state["block"] == block


def _another(fd: int, block: int, later: list[int]) -> int | None:
    """Wait while the C call of ``block`` has not returned: the signal that comes meanwhile (None: it returned).
    The signals read once the block has ended are a later block's: left in ``later`` for the watchdog."""
    while _inside(block):
        if select.select([fd], [], [], 0.05)[0]:
            data = list(os.read(fd, 64))
            while data:
                signum = data.pop(0)
                if not _inside(block):
                    later += [signum, *data]
                    return None
                if signum in _state["handled"]:
                    return signum
    return None


def _watchdog(fd: int) -> None:
    queue: list[int] = []  # the signals read and not yet acted on, in order
    while True:
        if not queue:
            try:
                queue += os.read(fd, 64)
            except OSError:
                return
        signum = queue.pop(0)
        with _lock:  # checked and raised while no block can end (a block's exit resets under it)
            block = _state["block"]
            if not _state["depth"] or signum not in _state["handled"]:
                continue
            _raise_armed()  # the block's decode stops at its next graph node (the main thread records the signal)
        end = time.monotonic() + GRACE
        while time.monotonic() < end and _inside(block):
            time.sleep(0.05)
        if not _inside(block):
            continue
        if not _state["waits"]:
            _abandon(signum)
        _say(f"\nllama.cpp has not returned {GRACE:g} s after the signal: waiting for it, the signal raised once "
             "it does (a second Ctrl-C ends the process now)\n")
        again = _another(fd, block, queue)
        if again is not None:
            _abandon(again, "a second signal while llama.cpp has not returned")


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
def _arming(flag: ctypes.Array | None) -> Iterator[None]:
    """``flag`` raised by a signal while the block runs (at once when one came earlier in the outer
    block), and lowered as it ends, under :data:`_lock`."""
    if flag is None:
        yield
        return
    with _lock:
        flag[0] = 1 if _state["pending"] is not None else 0
        _armed.append(flag)
    try:
        yield
    finally:
        with _lock:
            _armed.remove(flag)
            flag[0] = 0


@contextmanager
def deferred(abort: ctypes.Array | None = None) -> Iterator[None]:
    """Record SIGINT/SIGTERM during the block (``abort``, a context's :func:`new_abort_flag`, raised);
    deliver the first one after it (nests); when the block does not end within :data:`GRACE` seconds
    of it, end the process (:func:`on_stuck`) or, within :func:`waiting`, wait for it. Outside the
    main thread nothing changes (``abort`` is never raised)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _state["depth"]:  # an outer block delivers
        _state["depth"] += 1
        try:
            with _arming(abort):
                yield
        finally:
            _state["depth"] -= 1
        return
    saved = {}
    old_fd = None
    with _lock:
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
        with _arming(abort):
            yield
    finally:
        with _lock:
            _state.update(depth=0, block=_state["block"] + 1, handled=())
        if old_fd is not None:
            signal.set_wakeup_fd(old_fd)
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        got = _state["pending"]
        _state["pending"] = None
        if got in saved:
            saved[got](got, None)  # KeyboardInterrupt, here and not inside a callback
