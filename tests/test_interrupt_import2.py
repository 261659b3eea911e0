"""The Ctrl-C import guard (abricot_local._whole) holds one Ctrl-C, never two: a second Ctrl-C while the first is
held is the user insisting, and is raised at once (the import cut, with the risk docs/python.md says), so no Ctrl-C
is ignored for long; an ignored SIGINT stays ignored. The first Ctrl-C's hold: tests/test_interrupt_import.py."""

from __future__ import annotations

import os
import signal

import abricot_local


def interrupted(load, handler):
    """``abricot_local._whole(load)`` under ``handler`` for SIGINT: (what it returned or "raised", the handler
    there after)."""
    before = signal.signal(signal.SIGINT, handler)
    try:
        got = abricot_local._whole(load)
    except KeyboardInterrupt:
        got = "raised"
    finally:
        now = signal.signal(signal.SIGINT, before)
    return got, now


def test_a_second_ctrl_c_while_the_first_is_held_is_raised_at_once():
    steps = []

    def load():
        os.kill(os.getpid(), signal.SIGINT)
        steps.append("first held")
        os.kill(os.getpid(), signal.SIGINT)
        steps.append("went on after the second")  # not reached: the second cuts the load
        return "loaded"

    got, now = interrupted(load, signal.default_int_handler)
    assert (got, steps) == ("raised", ["first held"])
    assert now is signal.default_int_handler  # the handler given back, once
    assert abricot_local._whole(lambda: "loaded") == "loaded"  # nothing held over to the next call


def test_a_handler_of_the_session_takes_the_second_ctrl_c_when_it_comes():
    calls, steps = [], []

    def load():
        os.kill(os.getpid(), signal.SIGINT)
        steps.append(len(calls))  # the first held: not yet given to the handler
        os.kill(os.getpid(), signal.SIGINT)
        steps.append(len(calls))  # the second: given to it at once (it does not raise: the load goes on)
        return "loaded"

    got, now = interrupted(load, lambda signum, frame: calls.append(signum))
    assert (got, steps, calls) == ("loaded", [0, 1], [signal.SIGINT])


def test_an_ignored_sigint_stays_ignored():
    def load():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        return "loaded"

    assert interrupted(load, signal.SIG_IGN) == ("loaded", signal.SIG_IGN)
