"""A signal while llama.cpp does not return (issue 29, item 1): interrupts.deferred() records
SIGINT/SIGTERM until the C call returns; when it never does, the watchdog ends the process a
few seconds later, leaving the checkpoint, the INTERRUPTED state and the resume command.

The C call that never returns is played by the fake backend blocking inside deferred() on its
third item (what an RPC server that went silent mid-run does to llama_decode)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import Early
from invented_data import write_discotex

STUCK = r"""
import sys, time
from abricot_local.backends.llama_cpp import interrupts
from abricot_local.backends.fake import FakeBackend
interrupts.GRACE = float(sys.argv.pop(1))
real, calls = FakeBackend.score_many, {"n": 0}

def score_many(self, reqs):
    out = []
    for req in reqs:
        if calls["n"] == 2:
            with interrupts.deferred():  # llama.cpp waiting on a server that went silent
                while True:
                    time.sleep(0.5)
        calls["n"] += 1
        out += real(self, [req])
    return out

FakeBackend.score_many = score_many
from abricot_local.cli import cli
cli(sys.argv[1:], prog_name="abricot-local")
"""


@pytest.fixture
def data(tmp_path):
    return write_discotex(tmp_path / "d", 5)


def test_a_signal_ends_a_run_stuck_inside_llama_cpp(tmp_path, data, sig=signal.SIGTERM):
    out = tmp_path / "o"
    args = ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(data), "--limit", "6",
            "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-c", STUCK, "0.3", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    ck = out / ".checkpoint" / "samples-discotex.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (ck.is_file() and len(ck.read_text().splitlines()) >= 2):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.3)  # inside the call that never returns
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the signal was recorded and never acted on") from None
    took = time.monotonic() - sent
    assert proc.returncode == 130 and took < 10, (proc.returncode, took, err)
    assert "llama.cpp did not return within 0.3 s of the signal" in err and "Traceback" not in err
    assert "interrupted: 2 of 6 items (discotex 2/6) saved in" in err and "resume with: abricot-local run" in err
    assert (out / "INTERRUPTED").is_file() and not (out / "RUNNING").exists() and not (out / ".lock").exists()
    assert "items: 2 of 6 items" in (out / "INTERRUPTED").read_text()

    r = CliRunner().invoke(cli, [*args, "--resume"])  # the run continues from the checkpoint
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["tasks"]["discotex"]["n"] == 6 and doc["tasks"]["discotex"]["scored_now"] == 4
    whole = tmp_path / "whole"
    assert CliRunner().invoke(cli, [*args[:-1], str(whole)]).exit_code == 0
    assert (out / "samples-discotex.jsonl").read_bytes() == (whole / "samples-discotex.jsonl").read_bytes()


WATCHDOG = ("import os, signal, time\n"
            "from abricot_local.backends.llama_cpp import interrupts\n"
            "interrupts.GRACE = 0.2\n"
            "with interrupts.deferred():\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    while True: time.sleep(0.2)\n")


def early_children(tmp_path_factory) -> dict:
    """WATCHDOG's fresh process, started by conftest once the tests are collected, beside the other tests
    (conftest.start_early)."""
    return {"watchdog": Early([sys.executable, "-c", WATCHDOG], timeout=30)}


@pytest.fixture(scope="module")
def watchdog_child(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    yield child
    child.close()


def test_without_a_handler_the_watchdog_exits_with_the_signals_code(watchdog_child):
    """Ctrl-C (SIGINT, Python's own KeyboardInterrupt handler) with no on_stuck handler: 128 + 2."""
    r = watchdog_child.result()
    assert r.returncode == 128 + signal.SIGINT and watchdog_child.seconds < 10, (r, watchdog_child.seconds)
    assert "did not return within 0.2 s" in r.stderr


def test_a_call_that_returns_in_time_delivers_the_signal_as_before(monkeypatch):
    from abricot_local.backends.llama_cpp import interrupts

    monkeypatch.setattr(interrupts, "GRACE", 0.4)
    with pytest.raises(KeyboardInterrupt):
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)  # under the grace: the watchdog leaves it to the handler
    time.sleep(0.6)  # and does not end this process afterwards
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
