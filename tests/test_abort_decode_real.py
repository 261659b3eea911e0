"""A signal during a long llama_decode (API review finding 1): llama.cpp's abort callback, which the CPU backend
reads between two graph nodes, stops the call at once, and the KeyboardInterrupt is raised within a node's time,
not once the whole decode is done (or, past 3 s, by the watchdog ending the process). Real Gemma 3 270M, one
thread, one 2,000-token decode (many seconds on any CPU), in a child process."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.real

CHILD = r"""
import os, signal, sys, threading, time
from pathlib import Path
from abricot_local.backends.llama_cpp.options import LlamaCppOptions
from abricot_local.backends.llama_cpp.session import LlamaSession
s = LlamaSession(Path(sys.argv[1]), LlamaCppOptions(threads=1, n_ctx=2048, n_batch=2048))
entries = [(0, k, 100 + k, k == 1999) for k in range(2000)]
sent = {}
def signal_it():
    sent["at"] = time.monotonic()
    os.kill(os.getpid(), signal.SIGINT)
threading.Timer(0.5, signal_it).start()
try:
    s.decode(entries)
    print("returned", time.monotonic() - sent.get("at", time.monotonic()), flush=True)
except KeyboardInterrupt:
    print("KI", round(time.monotonic() - sent["at"], 3), flush=True)
s.close()
print("closed", flush=True)
"""


def test_a_signal_stops_a_long_decode_at_once(gemma_path):
    r = subprocess.run([sys.executable, "-c", CHILD, str(gemma_path)], capture_output=True, text=True, timeout=120)
    lines = r.stdout.split()
    assert r.returncode == 0 and lines[0] == "KI" and lines[-1] == "closed", (r.returncode, r.stdout, r.stderr[-2000:])
    assert float(lines[1]) < 1.0, r.stdout  # the whole decode takes many seconds with one thread
    assert "did not return" not in r.stderr
