"""A run folder's state (issue 10, items 6 and 7): RUNNING / INTERRUPTED / FAILED files that
`ls` shows, the `runs` listing, `report` skipping incomplete runs (or failing with --strict)
and reading results/ by default, the Ctrl-C and SIGTERM messages, and file modes."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from abricot_local.run import execute, folder as results, states
from abricot_local.cli import cli
from abricot_local.errors import ModelError
from conftest import fail_after
from invented_data import write_discotex


@pytest.fixture
def data(tmp_path):
    return write_discotex(tmp_path / "d", 5)  # 10 items


def invoke(*args, **kw):
    return CliRunner().invoke(cli, [str(a) for a in args], **kw)


def run_fake(data, out, *extra):
    return invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--out", out, *extra)


def markers(out):
    return sorted(m for m in results.MARKERS if (out / m).exists())


def test_running_marker_while_scoring(tmp_path, data, monkeypatch):
    out = tmp_path / "o"
    seen = []
    real = execute.staged

    def staged(runs, backend, *args, **kw):
        seen.append((markers(out), (out / "RUNNING").read_text(), states.run_state(out)))
        return real(runs, backend, *args, **kw)

    monkeypatch.setattr(execute, "staged", staged)
    assert run_fake(data, out).exit_code == 0
    found, text, state = seen[0]
    assert found == ["RUNNING"]
    assert f"pid: {os.getpid()}" in text and "started: 20" in text and "totals: discotex=10" in text
    assert state.state == "running" and state.total == 10 and "pid" in state.detail  # our own lock is held
    assert markers(out) == [] and (out / "results.json").exists()  # complete: no state file


def test_ctrl_c_leaves_interrupted_and_a_resume_start_counts_what_is_on_disk(tmp_path, data, monkeypatch):
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        fail_after(m, 4, KeyboardInterrupt)
        r = run_fake(data, out)
    assert r.exit_code == 130
    assert "interrupted: 4 of 10 items (discotex 4/10) saved in" in r.stderr
    assert markers(out) == ["INTERRUPTED"]
    assert "items: 4 of 10 items (discotex 4/10)" in (out / "INTERRUPTED").read_text()

    def interrupted_while_loading(plan, **_):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(execute, "open_backend", interrupted_while_loading)
        r = run_fake(data, out, "--resume")
    assert r.exit_code == 130
    assert "nothing scored yet" not in r.stderr and "4 of 10 items" in r.stderr and "--resume" in r.stderr
    assert markers(out) == ["INTERRUPTED"]
    assert run_fake(data, out, "--resume").exit_code == 0
    assert markers(out) == [] and states.run_state(out).state == "complete"


def interrupt(*_args, **_kw):
    raise KeyboardInterrupt


def test_an_interrupt_before_anything_is_written_offers_no_resume(tmp_path, data, monkeypatch):
    """Ctrl-C while planning (hashing the model) or loading: exit 130, and no resume command for
    a folder that was never written."""
    from abricot_local.run import plan as planning

    for module, name in ((planning, "make_plan"), (execute, "open_backend")):
        with monkeypatch.context() as m:
            m.setattr(module, name, interrupt)
            r = run_fake(data, tmp_path / "o")
        assert r.exit_code == 130, r.output
        assert "interrupted: nothing scored yet, nothing to resume" in r.stderr and "resume with" not in r.stderr
        assert "Aborted" not in r.output and not (tmp_path / "o").exists()


def test_a_run_that_failed_before_its_first_item_leaves_a_folder_a_new_run_takes(tmp_path, data):
    """A prompt over --n-ctx fails the run before it scores an item: the same command with --n-ctx raised (or
    with --resume) runs there; a failed run with items saved is named as failed, not interrupted."""
    out = tmp_path / "o"
    r = run_fake(data, out, "--n-ctx", 64)
    assert r.exit_code != 0 and "raise --n-ctx" in r.output and markers(out) == ["FAILED"]
    r = run_fake(data, out, "--n-ctx", 8192)  # was: "holds an interrupted run; add --resume" (refused again)
    assert r.exit_code == 0, r.output
    assert markers(out) == [] and (out / "results.json").is_file() and not (out / ".checkpoint").exists()
    assert run_fake(data, tmp_path / "again", "--n-ctx", 64).exit_code != 0
    assert run_fake(data, tmp_path / "again", "--n-ctx", 8192, "--resume").exit_code == 0


def test_a_failed_run_with_items_saved_is_named_as_failed(tmp_path, data, monkeypatch):
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        fail_after(m, 3, ModelError("boom"))
        run_fake(data, out)
    r = run_fake(data, out, "--n-ctx", 9000)
    assert r.exit_code != 0 and f"{out} holds a failed run (3 items saved); add --resume to continue it with the " \
        "options it recorded" in r.output, r.output
    assert markers(out) == ["FAILED"]


def test_an_interrupted_resume_leaves_the_folder_interrupted_with_the_resume_command(tmp_path, data, monkeypatch):
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        fail_after(m, 3, ModelError("boom"))
        run_fake(data, out)
    assert markers(out) == ["FAILED"]
    with monkeypatch.context() as m:  # the resume is stopped while its model loads
        m.setattr(execute, "open_backend", interrupt)
        r = run_fake(data, out, "--resume")
    assert r.exit_code == 130
    assert f"interrupted: 3 of 10 items (discotex 3/10) saved in {out}" in r.stderr and "resume with:" in r.stderr
    assert markers(out) == ["INTERRUPTED"] and "items: 3 of 10 items" in (out / "INTERRUPTED").read_text()
    assert states.run_state(out).state == "interrupted"


def test_deferred_signals_reach_their_handler_after_a_ctypes_callback():
    """A KeyboardInterrupt raised inside a ctypes callback (llama.cpp's log) is printed as
    "Exception ignored" and dropped; under interrupts.deferred() the signal is only recorded
    there and raised by its own handler once the C call returned."""
    import ctypes

    from abricot_local.backends.llama_cpp import interrupts

    compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
    sent, dropped = [], []

    def cmp(a, b):
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs at the callback's next bytecode
        return a[0] - b[0]

    callback = compare(cmp)
    values = (ctypes.c_int * 8)(*range(8, 0, -1))

    def sort_in_c():
        sent.clear()
        ctypes.CDLL(None).qsort(values, len(values), ctypes.sizeof(ctypes.c_int), callback)

    old_hook = sys.unraisablehook
    sys.unraisablehook = dropped.append
    try:
        sort_in_c()  # the hazard: no exception here, the signal is lost
        assert dropped and issubclass(dropped[0].exc_type, KeyboardInterrupt)
        dropped.clear()
        after = []
        with pytest.raises(KeyboardInterrupt):
            with interrupts.deferred():
                sort_in_c()
                after.append(interrupts.pending())
        assert after == [signal.SIGINT] and not dropped and list(values) == list(range(1, 9))
    finally:
        sys.unraisablehook = old_hook
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    class Term(Exception):
        pass

    def on_term(signum, frame):
        raise Term

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        with pytest.raises(Term):  # SIGTERM goes to the program's own handler (the CLI's raises KeyboardInterrupt)
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.01)
                assert interrupts.pending() == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is on_term
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with interrupts.deferred():  # a default action runs no Python: nothing to defer
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, old)


# where a real load is when llama.cpp logs these lines (--verbose), and the signal sent then
LOAD_MOMENTS = (
    ("llama_model_loader:", signal.SIGTERM),  # the memory check's vocabulary-only read of the model
    ("load_tensors:", signal.SIGINT),  # the weights
    ("llama_context:", signal.SIGTERM),  # the context
    ("graph_reserve:", signal.SIGINT),  # its compute graphs
)


@pytest.mark.real
def test_a_signal_at_any_moment_of_a_real_load_stops_the_run(tmp_path, data, gemma_path):
    """Before: 6 of 8 signals during llama.cpp's load were dropped inside its log callback and
    the run finished with exit 0. Now each ends the run: exit 130, one message, nothing ignored;
    no resume command before an item is saved (no folder left: nothing to resume, as before a folder exists), an
    INTERRUPTED folder and the command once one is."""
    before_start = 0
    for k, (marker, sig) in enumerate((*LOAD_MOMENTS, ("discotex: 0/", signal.SIGTERM))):
        out = tmp_path / f"o{k}"
        cmd = [sys.executable, "-m", "abricot_local", "run", str(gemma_path), "--tasks", "discotex", "--data-dir",
               str(data), "--limit", "2", "--threads", "2", "--out", str(out), "--verbose"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if line.startswith(marker):
                proc.send_signal(sig)
                break
        try:
            _, rest = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        err = "".join(seen) + rest
        assert any(ln.startswith(marker) for ln in seen), f"{marker!r} never logged:\n{err[-2000:]}"
        assert proc.returncode == 130, f"{marker}: exit {proc.returncode}\n{err[-2000:]}"
        assert "Exception ignored" not in err and "Traceback" not in err, err[-2000:]
        assert "\ninterrupted: " in err and not (out / "results.json").exists()
        saved = any((out / ".checkpoint").glob("samples-*.jsonl")) if out.exists() else False
        if saved:  # an item was saved: a folder to resume
            assert "resume with: abricot-local" in err and markers(out) == ["INTERRUPTED"]
        else:  # the load, or scoring before its first item was saved: nothing left behind
            assert "nothing to resume" in err and "resume with" not in err and not out.exists()
            before_start += not any(ln.startswith("run: ") for ln in err.splitlines())
    assert before_start >= 2  # most signals landed inside the load itself, before the start line


def test_a_failure_leaves_failed_with_the_error(tmp_path, data, monkeypatch):
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        fail_after(m, 3, ModelError("llama_decode failed (code -3): out of memory"))
        r = run_fake(data, out)
    assert r.exit_code != 0 and "error: llama_decode failed" in r.output
    assert markers(out) == ["FAILED"]
    text = (out / "FAILED").read_text()
    assert "error: llama_decode failed (code -3): out of memory" in text and "items: 3 of 10 items" in text
    state = states.run_state(out)
    assert (state.state, state.done, state.total) == ("failed", 3, 10) and "out of memory" in state.detail
    assert run_fake(data, out, "--resume").exit_code == 0 and markers(out) == []


def test_runs_lists_every_state(tmp_path, data, monkeypatch):
    root = tmp_path / "results"
    assert run_fake(data, root / "m1" / "t1").exit_code == 0
    with monkeypatch.context() as m:
        fail_after(m, 4, KeyboardInterrupt)
        run_fake(data, root / "m1" / "t2")
    with monkeypatch.context() as m:
        fail_after(m, 2, ModelError("boom"))
        run_fake(data, root / "m2" / "t1")
    # a run killed with -9: RUNNING left behind, its lock held by nobody
    killed = root / "m2" / "t2"
    with monkeypatch.context() as m:
        fail_after(m, 6, KeyboardInterrupt)
        run_fake(data, killed)
    (killed / "INTERRUPTED").rename(killed / "RUNNING")
    (killed / ".lock").write_text("999999")  # the file of a dead process: no flock on it
    r = invoke("runs")  # default: results/ (paths as found from here)
    assert r.exit_code == 0, r.output
    lines = dict(line.split(None, 1) for line in r.stdout.splitlines())
    assert list(lines) == ["results/m1/t1", "results/m1/t2", "results/m2/t1", "results/m2/t2"]
    assert lines["results/m1/t1"].startswith("complete, 10 of 10 items")
    assert lines["results/m1/t2"].startswith("interrupted, 4 of 10 items; --resume continues")
    assert lines["results/m2/t1"].startswith("failed, 2 of 10 items; boom")
    assert lines["results/m2/t2"].startswith(f"stopped, 6 of 10 items; process {os.getpid()} no longer holds it")
    assert invoke("runs", root / "m1").stdout.count("\n") == 2
    (tmp_path / "elsewhere").mkdir()
    os.chdir(tmp_path / "elsewhere")
    r = invoke("runs")  # no results/ here: nothing to list, where it looked, not an error (issue 22, item 12)
    assert r.exit_code == 0 and r.stdout == ""
    assert r.stderr.strip() == f"no run folder in {tmp_path / 'elsewhere' / 'results'} (no such folder yet)"
    r = invoke("runs", "nope")  # a folder given must exist
    assert r.exit_code == 2 and "run folder not found: nope" in r.output


def test_report_skips_incomplete_runs_and_reads_results_by_default(tmp_path, data, monkeypatch):
    root = tmp_path / "results"
    assert run_fake(data, root / "m" / "done").exit_code == 0
    with monkeypatch.context() as m:
        fail_after(m, 4, KeyboardInterrupt)
        run_fake(data, root / "m" / "cut")
    for args in ((), (root,), (root / "m" / "done", root / "m" / "cut")):  # `report results/*/*` too
        r = invoke("report", *args)
        assert r.exit_code == 0, r.output
        cut, done = ("results/m/cut", "results/m/done") if not args else (root / "m" / "cut", root / "m" / "done")
        assert r.stderr.strip() == f"note: skipped {cut} (interrupted, 4 of 10 items; --resume continues; discotex 4/10)"
        assert str(done) in r.stdout and str(cut) not in r.stdout
    r = invoke("report", "--strict")
    assert r.exit_code != 0 and "is not a finished run: interrupted, 4 of 10 items" in r.output
    r = invoke("report", root / "m" / "cut")
    assert r.exit_code != 0 and "no finished run in" in r.output
    r = invoke("report", tmp_path / "nope")
    assert r.exit_code != 0 and "run folder not found" in r.output


# a run of 600 items sent SIGTERM once 5 are saved, by a driver process started by conftest once the tests are
# collected (conftest.start_early), beside the in-process tests: it prints the run's exit code and stderr
SIGTERM_AT_5 = """
import json, signal, subprocess, sys, time
from pathlib import Path
ck = Path(sys.argv[1]) / ".checkpoint" / "samples-discotex.jsonl"
proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
deadline = time.time() + 120
while time.time() < deadline and not (ck.exists() and len(ck.read_bytes().splitlines()) >= 5):
    time.sleep(0.02)
proc.send_signal(signal.SIGTERM)
_, err = proc.communicate(timeout=120)
print(json.dumps({"returncode": proc.returncode, "err": err}))
"""


def early_children(tmp_path_factory) -> dict:
    """SIGTERM_AT_5's driver and its run (300 invented rows per source: a few seconds on the fake backend; a private
    cache and config, offline, this tree's package)."""
    from pathlib import Path

    from conftest import Early, isolated_env

    root = tmp_path_factory.mktemp("sigterm-at-5")
    data = write_discotex(root / "big", 300)
    env = {**os.environ, **isolated_env(root), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    run = [sys.executable, "-m", "abricot_local", "run", "fake", "--backend", "fake", "--tasks", "discotex",
           "--data-dir", str(data), "--out", str(root / "o")]
    return {"sigterm": Early([sys.executable, "-c", SIGTERM_AT_5, str(root / "o"), *run], env=env, cwd=root,
                             timeout=300)}


@pytest.fixture(scope="module")
def sigterm_child(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    yield child
    child.close()


def test_sigterm_gets_the_saved_and_resume_message(sigterm_child):
    import json
    from pathlib import Path

    driver = sigterm_child.result()
    assert driver.returncode == 0, driver.stderr
    got = json.loads(driver.stdout)
    err, out = got["err"], Path(sigterm_child.args[3])
    assert got["returncode"] == 130, err
    assert "of 600 items (discotex" in err and "saved in" in err and "resume with: abricot-local" in err
    assert markers(out) == ["INTERRUPTED"] and not (out / "results.json").exists()
    assert states.run_state(out).state == "interrupted"


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_outputs_get_the_umask_mode(tmp_path, data, umask):
    old = os.umask(umask)
    try:
        out = tmp_path / "o"
        assert run_fake(data, out).exit_code == 0
    finally:
        os.umask(old)
    files = [out / "results.json", out / "samples-discotex.jsonl"]
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o666 & ~umask, f
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left


def test_checkpoint_and_state_files_get_the_umask_mode(tmp_path, data, monkeypatch):
    old = os.umask(0o022)
    try:
        fail_after(monkeypatch, 2, KeyboardInterrupt)
        run_fake(data, tmp_path / "o")
    finally:
        os.umask(old)
    out = tmp_path / "o"
    for f in (out / "INTERRUPTED", out / ".checkpoint" / "run.json", out / ".checkpoint" / "samples-discotex.jsonl"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f
