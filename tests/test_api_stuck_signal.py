"""Ctrl-C while llama.cpp does not return, in the Python API (API review finding 1): the user's interpreter (a
notebook's kernel) is never ended for a first signal. The backend's call is waited for (said once), then the
KeyboardInterrupt is raised as docs/python.md says; only a second Ctrl-C while it is still stuck ends the process,
the folder left INTERRUPTED. (The command line keeps its 3 s end: tests/test_stuck_signals.py.)

The call that does not return is played by the fake backend inside interrupts.deferred() on its second item: a
first evaluate's returns 2 s after the signal (ten times the test's grace: time for a loaded machine's watchdog
to say it waits), a second evaluate's never."""

from __future__ import annotations

import sys

import pytest

from conftest import Early
from invented_data import write_discotex

CHILD = r"""
import os, signal, sys, threading, time, warnings
from abricot_local.backends.llama_cpp import interrupts
from abricot_local.backends.fake import FakeBackend
import abricot_local as al
interrupts.GRACE = 0.2
data, out = sys.argv[1], sys.argv[2]
real, calls = FakeBackend.score_many, {"n": 0, "for": 2.0, "again": False}

def score_many(self, reqs):
    res = []
    for req in reqs:
        calls["n"] += 1
        if calls["n"] == 2:
            with interrupts.deferred():  # llama.cpp inside a call that reads no abort flag
                os.kill(os.getpid(), signal.SIGINT)
                if calls["again"]:  # a second Ctrl-C, once the first was said to be waited for
                    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
                end = time.monotonic() + calls["for"]
                while time.monotonic() < end:
                    time.sleep(0.05)
        res += real(self, [req])
    return res

FakeBackend.score_many = score_many
warnings.simplefilter("ignore")
args = dict(backend="fake", data_dir=data, limit=4, progress=False)
try:
    al.evaluate("fake", "discotex", out=out + "/a", **args)
except KeyboardInterrupt as err:
    print("KI", type(err).__name__, "resume=True" in str(err), flush=True)
print("alive", flush=True)
calls.update(n=0, again=True, **{"for": 60.0})  # the second: a call that never returns, and a second Ctrl-C
al.evaluate("fake", "discotex", out=out + "/b", **args)
print("not ended", flush=True)
"""


def early_children(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("api_stuck")
    data = write_discotex(root / "d", 5)
    child = Early([sys.executable, "-c", CHILD, str(data), str(root)], timeout=60)
    child.root = root  # its folders
    return {"stuck": child}


@pytest.fixture(scope="module")
def stuck(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    yield child, child.root
    child.close()


def test_a_first_ctrl_c_waits_for_llama_cpp_then_raises_and_a_second_ends_the_process(stuck):
    child, root = stuck
    r = child.result()
    assert r.stdout.splitlines() == ["KI Interrupted True", "alive"], (r.stdout, r.stderr)
    assert r.stderr.count("llama.cpp has not returned 0.2 s after the signal: waiting for it") == 2, r.stderr
    assert "did not return within" not in r.stderr
    assert "a second signal while llama.cpp has not returned: stopping without it" in r.stderr
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert (root / "a" / "INTERRUPTED").is_file() and (root / "b" / "INTERRUPTED").is_file()
    assert not (root / "b" / ".lock").exists() and not (root / "b" / "RUNNING").exists()
