"""A signal while llama.cpp does not return (issue 29, item 1): interrupts.deferred() records
SIGINT/SIGTERM until the C call returns; when it never does, the watchdog ends the process a
few seconds later, leaving the checkpoint, the INTERRUPTED state and the resume command.

The C call that never returns is played by the fake backend blocking inside deferred() on its
third item (what an RPC server that went silent mid-run does to llama_decode)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

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


# STUCK's run, driven by a process started by conftest once the tests are collected (conftest.start_early), beside
# the in-process tests: SIGTERM 0.3 s after its second item is saved; it prints what the test reads
STUCK_DRIVER = r"""
import json, signal, subprocess, sys, time
from pathlib import Path
ck = Path(sys.argv[1]) / ".checkpoint" / "samples-discotex.jsonl"
proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not (ck.is_file() and len(ck.read_text().splitlines()) >= 2):
    if proc.poll() is not None:
        print(json.dumps({"ended_before_the_signal": proc.returncode, "err": proc.communicate()[1]}))
        sys.exit()
    time.sleep(0.05)
time.sleep(0.3)  # inside the call that never returns
sent = time.monotonic()
proc.send_signal(signal.SIGTERM)
try:
    _, err = proc.communicate(timeout=30)
except subprocess.TimeoutExpired:
    proc.kill()
    print(json.dumps({"never_acted_on": True}))
    sys.exit()
print(json.dumps({"returncode": proc.returncode, "took": time.monotonic() - sent, "err": err}))
"""
STUCK_ARGS = ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--limit", "6"]


def stuck_child(tmp_path_factory):
    """STUCK_DRIVER's process and its run (5 invented DISCOTEX rows per source; a private cache and config, offline,
    this tree's package), and the folder it works in."""
    from pathlib import Path

    from conftest import isolated_env

    root = tmp_path_factory.mktemp("stuck")
    data = write_discotex(root / "d", 5)
    env = {**os.environ, **isolated_env(root), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    run = [sys.executable, "-c", STUCK, "0.3", *STUCK_ARGS, "--data-dir", str(data), "--out", str(root / "o")]
    return Early([sys.executable, "-c", STUCK_DRIVER, str(root / "o"), *run], env=env, cwd=root, timeout=120)


@pytest.fixture(scope="module")
def stuck(tmp_path_factory):
    from conftest import early_child

    yield from early_child(__name__, early_children, tmp_path_factory, "stuck")


def test_a_signal_ends_a_run_stuck_inside_llama_cpp(stuck, monkeypatch):
    from conftest import isolated_env

    driver = stuck.result()
    assert driver.returncode == 0, driver.stderr
    got = json.loads(driver.stdout)
    assert "ended_before_the_signal" not in got, got
    assert not got.get("never_acted_on"), "the signal was recorded and never acted on"
    err, took = got["err"], got["took"]
    assert got["returncode"] == 130 and took < 10, (got["returncode"], took, err)
    assert "llama.cpp did not return within 0.3 s of the signal" in err and "Traceback" not in err
    assert "interrupted: 2 of 6 items (discotex 2/6) saved in" in err and "resume with: abricot-local run" in err
    root = Path(stuck.popen["cwd"])
    out = root / "o"
    assert (out / "INTERRUPTED").is_file() and not (out / "RUNNING").exists() and not (out / ".lock").exists()
    assert "items: 2 of 6 items" in (out / "INTERRUPTED").read_text()

    for key, value in isolated_env(root).items():  # the child's cache and config, its folder
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(root)
    args = [*STUCK_ARGS, "--data-dir", str(root / "d"), "--out", str(out)]
    r = CliRunner().invoke(cli, [*args, "--resume"])  # the run continues from the checkpoint
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["tasks"]["discotex"]["n"] == 6 and doc["tasks"]["discotex"]["scored_now"] == 4
    whole = root / "whole"
    assert CliRunner().invoke(cli, [*args[:-1], str(whole)]).exit_code == 0
    assert (out / "samples-discotex.jsonl").read_bytes() == (whole / "samples-discotex.jsonl").read_bytes()


WATCHDOG = ("import os, signal, time\n"
            "from abricot_local.backends.llama_cpp import interrupts\n"
            "interrupts.GRACE = 0.2\n"
            "with interrupts.deferred():\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    while True: time.sleep(0.2)\n")


# a call that returns within the grace, in a fresh process (its sleeps beside the other tests): what it prints
IN_TIME = ("import json, os, signal, time\n"
           "from abricot_local.backends.llama_cpp import interrupts\n"
           "interrupts.GRACE = 0.4\n"
           "raised = False\n"
           "try:\n"
           "    with interrupts.deferred():\n"
           "        os.kill(os.getpid(), signal.SIGINT)\n"
           "        time.sleep(0.1)  # under the grace: the watchdog leaves it to the handler\n"
           "except KeyboardInterrupt:\n"
           "    raised = True\n"
           "time.sleep(0.6)  # and does not end this process afterwards\n"
           "print(json.dumps({'raised': raised, 'default_handler': signal.getsignal(signal.SIGINT) is "
           "signal.default_int_handler}))\n")


def early_children(tmp_path_factory) -> dict:
    """WATCHDOG's fresh process, IN_TIME's and STUCK_DRIVER's, started by conftest once the tests are collected,
    beside the other tests (conftest.start_early)."""
    return {"watchdog": Early([sys.executable, "-c", WATCHDOG], timeout=30),
            "in_time": Early([sys.executable, "-c", IN_TIME], timeout=30), "stuck": stuck_child(tmp_path_factory)}


@pytest.fixture(scope="module")
def watchdog_child(tmp_path_factory):
    from conftest import early_child

    yield from early_child(__name__, early_children, tmp_path_factory, "watchdog")


def test_without_a_handler_the_watchdog_exits_with_the_signals_code(watchdog_child):
    """Ctrl-C (SIGINT, Python's own KeyboardInterrupt handler) with no on_stuck handler: 128 + 2."""
    r = watchdog_child.result()
    assert r.returncode == 128 + signal.SIGINT and watchdog_child.seconds < 10, (r, watchdog_child.seconds)
    assert "did not return within 0.2 s" in r.stderr


@pytest.fixture(scope="module")
def in_time_child(tmp_path_factory):
    from conftest import early_child

    yield from early_child(__name__, early_children, tmp_path_factory, "in_time")


def test_a_call_that_returns_in_time_delivers_the_signal_as_before(in_time_child):
    """IN_TIME: the KeyboardInterrupt raised once the block ends, the process not ended by the watchdog after
    its grace, Python's own handler back."""
    r = in_time_child.result()
    assert r.returncode == 0, r.stderr  # not ended: the line printed after the grace
    assert json.loads(r.stdout) == {"raised": True, "default_handler": True}, r.stdout
