"""Ctrl-C during the API's first import (`abricot_local.evaluate` and the rest load numpy, scipy and the project's
modules on first use) is held until the import is whole, then raised: the next call in the same session (a notebook)
works. Cut in the middle, the import left numpy's finished submodules in sys.modules under a numpy Python took out,
and every later call failed (RecursionError in numpy's __getattr__, or "cannot load module more than once per
process"): abricot_local._whole."""

from __future__ import annotations

import os
import signal
import sys

import pytest

import abricot_local

# a real SIGINT while numpy imports numpy._core.overrides (its C extension just loaded): the default handler raises
# KeyboardInterrupt at the next bytecode, inside the import; then the API asked for again in the same process
SCRIPT = """
import importlib.abc, os, signal, sys

signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a session (a background job ignores it)

class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "numpy._core.overrides":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)

sys.meta_path.insert(0, Interrupt())
import abricot_local
assert "numpy" not in sys.modules
try:
    abricot_local.evaluate
    print("first: whole")
except KeyboardInterrupt:
    print("first: KeyboardInterrupt")
assert not any(isinstance(f, Interrupt) for f in sys.meta_path), "numpy was imported before the API"
from scipy.special import gammaln
print("second:", callable(abricot_local.evaluate) and abricot_local.Run.__name__, float(gammaln(3.0)) > 0)
"""


def early_children(tmp_path_factory) -> dict:
    """SCRIPT's fresh process (this tree's package), started by conftest once the tests are collected, beside the
    other tests (conftest.start_early)."""
    from pathlib import Path

    from conftest import Early

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return {"first_import": Early([sys.executable, "-c", SCRIPT], env=env, timeout=60)}


@pytest.fixture(scope="module")
def first_import(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    yield child
    child.close()


def test_ctrl_c_in_the_apis_first_import_leaves_the_session_usable(first_import):
    done = first_import.result()
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["first: KeyboardInterrupt", "second: Run True"], done.stdout


def test_a_ctrl_c_held_is_raised_once_the_load_returns():
    steps = []

    def load():
        os.kill(os.getpid(), signal.SIGINT)
        steps.append("after the signal")  # the load goes on to its end
        return "loaded"

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a session
    try:
        abricot_local._whole(load)
    except KeyboardInterrupt:
        steps.append("raised")
    finally:
        now = signal.signal(signal.SIGINT, before)
    assert steps == ["after the signal", "raised"]
    assert now is signal.default_int_handler  # the handler given back
    assert abricot_local._whole(lambda: "loaded") == "loaded"
