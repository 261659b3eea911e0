"""A Ctrl-C or SIGTERM from the console script's first instruction (cli.main: the commands' imports, the command line
read, a run's own imports before it takes signals itself) ends the process with one line and exit code 130, never
a KeyboardInterrupt traceback or a silent exit by SIGTERM (-15), and writes nothing.

Each case is the console script's process (what pyproject's entry runs, and ``python -m abricot_local``) held inside
one import by a finder that waits there, so the signal lands in that import whatever the machine's speed; one
child (started beside the suite's tests, conftest.Early) drives the cases one after another."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

DRIVER = r"""
import json, signal, subprocess, sys
root = sys.argv[1]
ENTRY = '''
import sys, time, importlib.abc
held = sys.argv.pop(1)
class Hold(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == held:
            sys.stdout.write("held\\n"); sys.stdout.flush(); time.sleep(20)
        return None
sys.meta_path.insert(0, Hold())
sys.argv[0] = "abricot-local"
if sys.argv.pop(1) == "-m":
    import runpy
    runpy.run_module("abricot_local", run_name="__main__", alter_sys=True)
else:
    from abricot_local.cli import main
    sys.exit(main())
'''
RUN = ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", root, "--out", root + "/o"]
CASES = [("abricot_local.cli.app", "SIGINT", "script", ["runs", root]),
         ("abricot_local.cli.app", "SIGTERM", "-m", ["runs", root]),
         ("abricot_local.run.session", "SIGTERM", "script", RUN)]
out = []
for held, sig, how, args in CASES:
    p = subprocess.Popen([sys.executable, "-c", ENTRY, held, how, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = p.stdout.readline()
    p.send_signal(getattr(signal, sig))
    try:
        rest, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        rest, err = p.communicate()
    out.append({"held": held, "signal": sig, "first": first, "rc": p.returncode, "err": err})
print(json.dumps(out))
"""


def early_children(tmp_path_factory) -> dict:
    import os

    from conftest import Early, isolated_env

    root = tmp_path_factory.mktemp("early-signal")
    env = {**os.environ, **isolated_env(root), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    child = Early([sys.executable, "-c", DRIVER, str(root)], env=env, cwd=root, timeout=120)
    child.root = root
    return {"early": child}


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    r = child.result()
    assert r.returncode == 0, r.stderr
    yield json.loads(r.stdout), child.root
    child.close()


def test_a_signal_while_the_commands_are_imported_is_one_line_and_130(cases):
    from abricot_local.cli import EARLY

    got, root = cases
    for case in got[:2]:
        assert case["first"] == "held\n", case  # the signal came inside the import
        assert (case["rc"], case["err"]) == (130, EARLY), case


def test_a_sigterm_before_a_run_takes_signals_is_one_line_and_130(cases):
    got, root = cases
    case = got[2]
    lines = case["err"].strip().splitlines()
    assert case["first"] == "held\n" and case["rc"] == 130, case
    assert len(lines) == 1 and lines[0].startswith("interrupted: ") and "Traceback" not in case["err"], case
    assert not (root / "o").exists()  # nothing written
