"""The abort flag llama.cpp's abort callback reads is each context's own (senior review 67, finding 1): a signal
aimed at the main thread's deferred() block raises only the flag of the decode inside that block, never the flag
of a decode another thread runs meanwhile (that decode, and its run, go on), and every flag is down once its block
ends. The interrupts module alone, two flags in two threads; no llama.cpp."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from abricot_local.backends.llama_cpp import interrupts


def _until(check, limit: float = 2.0) -> bool:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.005)
    return check()


def test_a_signal_in_the_main_block_leaves_another_threads_decode_alone():
    mine, theirs = interrupts.new_abort_flag(), interrupts.new_abort_flag()
    inside, done = threading.Event(), threading.Event()
    seen: dict = {}

    def worker():  # a decode in a worker thread (threadtest.py's background run), inside its own block
        with interrupts.deferred(abort=theirs):
            inside.set()
            done.wait(5)
            seen["theirs"] = theirs[0]

    t = threading.Thread(target=worker)
    t.start()
    assert inside.wait(5)
    try:
        with pytest.raises(KeyboardInterrupt):
            with interrupts.deferred(abort=mine):
                os.kill(os.getpid(), signal.SIGINT)
                _until(lambda: mine[0] == 1)  # the main thread's decode is cut
                seen["mine"] = mine[0]  # (an assert in the block would be replaced by the KeyboardInterrupt)
    finally:
        done.set()
        t.join(5)
    assert seen == {"mine": 1, "theirs": 0}
    assert mine[0] == 0 and theirs[0] == 0  # lowered as the block ended; the other never raised


def test_a_flag_is_raised_only_inside_its_own_block():
    earlier, later, outside = (interrupts.new_abort_flag() for _ in range(3))
    seen = {}
    with pytest.raises(KeyboardInterrupt):
        with interrupts.deferred():  # an outer block (a load): the signal comes before the decode
            with interrupts.deferred(abort=earlier):
                pass
            os.kill(os.getpid(), signal.SIGINT)
            seen["pending"] = _until(lambda: interrupts.pending() == signal.SIGINT)
            seen["before"] = (earlier[0], outside[0])
            with interrupts.deferred(abort=later):
                seen["during"] = later[0]
            seen["after"] = later[0]
    # a block that ended and a flag in no block: not raised; a decode started after the signal in the same
    # block: stopped at once; lowered as its block ends
    assert seen == {"pending": True, "before": (0, 0), "during": 1, "after": 0}
    time.sleep(0.1)  # the watchdog has read the signal's byte long since: no late raise
    assert (earlier[0], later[0], outside[0]) == (0, 0, 0)
    with interrupts.deferred(abort=later):  # the next block starts clean
        clean = later[0]
    assert clean == 0


def test_a_signal_right_after_a_waited_block_is_heard_in_the_next(monkeypatch):
    """The watchdog, waiting for a second signal while a first block's call had not returned, kept reading after
    that block ended: the next block's signal, read then, was dropped (that call never cut, nor said waited for;
    a second Ctrl-C then waited for a third: test_api_stuck_signal.py timed out about one run in three)."""
    said: list[str] = []
    heard = []
    monkeypatch.setattr(interrupts, "GRACE", 0.05)
    monkeypatch.setattr(interrupts, "_say", said.append)
    with interrupts.waiting():  # a library's door: the watchdog waits, never ends the process
        for k in (1, 2):
            flag = interrupts.new_abort_flag()
            with pytest.raises(KeyboardInterrupt):
                with interrupts.deferred(abort=flag):
                    os.kill(os.getpid(), signal.SIGINT)
                    heard.append(_until(lambda: len(said) == k))  # the watchdog heard this block's signal
                    time.sleep(0.1)  # the call goes on after it was said waited for
    assert heard == [True, True] and all("waiting for it" in s for s in said), said
