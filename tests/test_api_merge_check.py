"""The API's ``merge`` and ``check`` (docs/python.md): the commands' calls (run/merge.py, run/check.py), typed
results, refusals in the API's words; a SIGTERM once a run's results.json is written ends the command as the
run would have (exit 0), not as a failure (143), while an in-process caller gets its own handler back; the
--sample note said before scoring says what will be, not what was."""

from __future__ import annotations

import signal
import sys
import warnings

import pytest
from click.testing import CliRunner

import abricot_local as al
from abricot_local.cli import cli
from conftest import FIXTURE

ARGS = dict(backend="fake", data={"abricot": str(FIXTURE)}, n_ctx=8192, progress=False)


def shards(tmp_path, n=2):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [al.evaluate("fake", "abricot_abs", sample=6, shard=f"{k}/{n}", out=tmp_path / f"s{k}", **ARGS)
                for k in range(1, n + 1)]


def test_merge_and_check_are_the_commands_calls_with_typed_results(tmp_path):
    one, two = shards(tmp_path)
    merged = al.merge(one, tmp_path / "s2", out=tmp_path / "m")  # a Run and a folder, as the command takes folders
    assert isinstance(merged, al.Run) and merged == al.load_run(tmp_path / "m")
    assert merged.record.config.shard is None
    assert merged.record.tasks["abricot_abs"].n == one.record.tasks["abricot_abs"].n + two.record.tasks["abricot_abs"].n
    r = CliRunner().invoke(cli, ["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "c")])
    assert r.exit_code == 0, r.output  # the command's merged run: the same samples, byte for byte
    assert (tmp_path / "c" / "samples-abricot_abs.jsonl").read_bytes() == \
        (tmp_path / "m" / "samples-abricot_abs.jsonl").read_bytes()
    rep = al.check(merged, sample=3, threads=1, progress=False)
    assert isinstance(rep, al.Check) and rep.passed and rep.reproduced and rep.checked == 3
    assert repr(rep).startswith("Check(passed: 3 items checked") and "checked 3 items" in str(rep)
    assert rep.to_json()["passed"] is True and rep.to_json()["checked"] == 3
    with pytest.raises(AttributeError):  # frozen, as every type the API hands back
        rep.checked = 0


def test_merge_and_check_refuse_in_the_api_s_words(tmp_path):
    one, _ = shards(tmp_path)
    refused = [
        (lambda: al.merge(out=tmp_path / "x"), "merge() needs the shards of one run"),
        (lambda: al.merge(one), "merge(): out is missing"),
        (lambda: al.merge(one, out=""), "out is empty"),
        (lambda: al.merge(one, out=tmp_path / "x"), "shard(s) 2/2 missing"),  # run/merge.py's refusal
        (lambda: al.check(one, atol=-1.0), "atol must be a finite number"),
        (lambda: al.check(one, thread=2), "Did you mean: threads?"),
        (lambda: al.check(one, n_ctx=5), "change no number: rpc_timeout, threads"),
        (lambda: al.check(one, sample=0), "sample must be at least 1"),
        (lambda: al.check(one, sample="3"), "check(): sample must be an integer or None"),
    ]
    for call, words in refused:
        with pytest.raises(al.AbricotError) as caught:
            call()
        assert words in str(caught.value) and "--" not in str(caught.value), str(caught.value)
    assert not (tmp_path / "x").exists()


def test_run_in_process_gives_the_caller_s_sigterm_handler_back_and_says_what_will_be_scored(tmp_path):
    def mine(signum, frame):
        pass

    old = signal.signal(signal.SIGTERM, mine)
    try:
        r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--data", f"abricot={FIXTURE}", "--tasks",
                                     "abricot_abs", "--sample", "100", "--n-ctx", "8192", "--out", str(tmp_path / "o")])
        assert r.exit_code == 0, r.output
        assert signal.getsignal(signal.SIGTERM) is mine  # not SIG_IGN: only the console script's process ignores it
    finally:
        signal.signal(signal.SIGTERM, old)
    # said before any item is scored: what the run does, not a past it has not had yet
    assert "warning: abricot_abs: --sample 100 asks for more items than the task has: all 18 are scored" in r.stderr
    assert "were scored" not in r.output


# a `run` sent SIGTERM as soon as its results.json is there, by a driver process started by conftest once the tests
# are collected (conftest.start_early), beside the in-process tests: it prints the run's exit code and stderr
SIGTERM_AFTER_RESULTS = """
import json, signal, subprocess, sys, time
from pathlib import Path
out = Path(sys.argv[1])
proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    while not (out / "results.json").exists() and proc.poll() is None:
        time.sleep(0.002)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=30)
finally:
    proc.kill()
print(json.dumps({"returncode": proc.returncode, "stderr": stderr}))
"""


def early_children(tmp_path_factory) -> dict:
    """SIGTERM_AFTER_RESULTS's driver and its run (a private cache and config, offline, this tree's package)."""
    import os
    from pathlib import Path

    from conftest import Early, isolated_env

    root = tmp_path_factory.mktemp("sigterm-after-results")
    env = {**os.environ, **isolated_env(root), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    run = [sys.executable, "-m", "abricot_local", "run", "fake", "--backend", "fake", "--data", f"abricot={FIXTURE}",
           "--tasks", "abricot_abs", "--sample", "4", "--shard", "1/2", "--n-ctx", "8192", "--out", str(root / "o")]
    return {"sigterm": Early([sys.executable, "-c", SIGTERM_AFTER_RESULTS, str(root / "o"), *run], env=env, cwd=root,
                             timeout=90)}


@pytest.fixture(scope="module")
def sigterm_child(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    yield child
    child.close()


def test_a_sigterm_once_results_json_is_written_ends_the_run_with_0(sigterm_child):
    """Before: SIGTERM as `run` printed "wrote .../results.json" exited 143 (the handler restored to the default
    before the process's exit): a scheduler recorded a failed job for a complete run."""
    import inspect
    import json
    from pathlib import Path

    from abricot_local.run import session

    if "complete" not in inspect.signature(session.Interrupted).parameters:  # a signal inside run_model, once
        pytest.skip("needs run/session.py's Interrupted(complete=...): a SIGTERM between results.json and the run's "
                    "end exits 130 without it")
    driver = sigterm_child.result()
    assert driver.returncode == 0, driver.stderr
    got = json.loads(driver.stdout)
    assert got["returncode"] == 0, got["stderr"]
    out = Path(sigterm_child.args[3])
    assert "Traceback" not in got["stderr"] and al.load_run(out).record.tasks["abricot_abs"].n == 2


def _no_command_of_a_door(text: str) -> None:
    """A message the API hands back: no command template holding ``out=`` (the API's words in a command no door
    takes), no ``--flag`` (the command line's words)."""
    import re

    assert not re.search(r"`[^`]*\bout=", text) and not re.search(r"(^|\s|`|\()--[a-z]", text), text


def test_merge_and_resume_advice_reads_right_in_the_api(tmp_path, monkeypatch):
    """Before: run/merge.py put options rendered in the API's words into command-line templates ("`merge sw1/fake
    sw2/fake out=/tmp/o/fake`", "`run ... shard=2/2 out=NEW`"), and a resume of a missing folder said "check out"."""
    import json
    import shutil

    from abricot_local.run import merge as joining

    one, two = shards(tmp_path)
    s1, s2 = tmp_path / "s1", tmp_path / "s2"

    def refusal(call) -> str:
        with pytest.raises(al.AbricotError) as caught:
            call()
        said = str(caught.value)
        _no_command_of_a_door(said)
        return said

    for k, s in ((1, s1), (2, s2)):  # a sweep's folder: a run per model
        shutil.copytree(s, tmp_path / f"sw{k}" / "fake")
    said = refusal(lambda: al.merge(tmp_path / "sw1", tmp_path / "sw2", out=tmp_path / "o"))
    assert f"merge each model's shards apart ({tmp_path / 'sw1' / 'fake'} and {tmp_path / 'sw2' / 'fake'}, into " \
           f"{tmp_path / 'o' / 'fake'})" in said
    assert "does not exist: give the folder each shard" in refusal(lambda: al.merge(one, tmp_path / "no",
                                                                                    out=tmp_path / "o"))
    (tmp_path / "empty").mkdir()
    assert "score that shard again into a new folder" in refusal(lambda: al.merge(one, tmp_path / "empty",
                                                                                  out=tmp_path / "o"))
    monkeypatch.setattr(joining.kernel_path, "part", lambda prov: (1, 3) if prov is one.record.provenance else (2, 3))
    said = refusal(lambda: al.merge(one, two, out=tmp_path / "o"))  # decode calls made at 1 and at 2 threads
    assert "score shard(s) 2/2 again with " in said and "into a new folder, then merge it in its place" in said
    monkeypatch.undo()
    from dataclasses import replace

    judged = [replace(r, record=replace(r.record, published=replace(r.record.published, checks=("a verdict",))))
              for r in (one, two)]  # (the fake model has no published row: a verdict, margins to agree on)
    monkeypatch.setattr(joining, "margin_of", lambda run: 0.5 if run is judged[0] else None)
    said = refusal(lambda: al.merge(*judged, out=tmp_path / "o"))
    assert "same margin=M (a finished shard's run resumed in its folder with resume=True and margin=M" in said
    monkeypatch.undo()
    samples = s2 / "samples-abricot_abs.jsonl"
    lines = samples.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[0])
    flipped = (row["gold"] + 1) % len(row["logprobs"]) if row["pred"] == row["gold"] else row["gold"]
    row["logprobs"][flipped] = max(row["logprobs"]) + 1.0  # a forged item: its metric no longer the recorded one
    row["pred"] = flipped
    samples.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n", encoding="utf-8")
    said = refusal(lambda: al.merge(one, s2, out=tmp_path / "o"))
    assert "report's verify check says so too" in said and "run shard 2/2 again into a new folder" in said
    samples.write_text("\n".join(lines) + "\n", encoding="utf-8")  # as scored again
    record = json.loads((s2 / "results.json").read_text(encoding="utf-8"))
    del record["tasks"]["abricot_abs"]["available"]  # a shard of an earlier abricot-local
    (s2 / "results.json").write_text(json.dumps(record), encoding="utf-8")
    assert "score every shard again with this version, then merge" in refusal(lambda: al.merge(one, s2,
                                                                                               out=tmp_path / "o"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        said = refusal(lambda: al.evaluate("fake", "abricot_abs", sample=2, out=tmp_path / "typo", resume=True,
                                           **ARGS))
    assert "check the folder given as out, or start the run there without resume=True" in said
    assert not (tmp_path / "o" / "results.json").exists()


def test_a_signal_between_a_written_run_and_its_step_says_the_run_is_complete(tmp_path, monkeypatch):
    """Before: a SIGTERM after run_model returned and before its step was kept said "interrupted: before the run
    began, nothing was written" and exited 130, the run complete on disk: the folder tells it now."""
    from abricot_local.run import session

    made = session.run_model

    def then_a_signal(*a, **k):
        made(*a, **k)
        raise KeyboardInterrupt

    monkeypatch.setattr(session, "run_model", then_a_signal)
    out = tmp_path / "o"
    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--data", f"abricot={FIXTURE}", "--tasks",
                                 "abricot_abs", "--sample", "2", "--n-ctx", "8192", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert f"the run in {out} is complete" in r.output and "nothing was written" not in r.output


def test_merge_names_the_shards_a_folder_holds_and_refuses_an_unsharded_run_in_the_api_s_words(tmp_path,
                                                                                               monkeypatch):
    """Before: a folder holding the shards of one run was called a sweep's folder (merge each model's shards
    apart: refused again, shards missing), and an interrupted run made without a shard was told to resume, then
    merge (refused again: no shard)."""
    import shutil

    from conftest import fail_after

    shards(tmp_path)
    held = tmp_path / "held"
    for k in (1, 2):
        shutil.copytree(tmp_path / f"s{k}", held / f"part-{k}")
    with pytest.raises(al.AbricotError) as caught:
        al.merge(held, out=tmp_path / "o")
    said = str(caught.value)
    _no_command_of_a_door(said)
    assert f"{held} holds the shards of one run (1/2, 2/2), not a shard: merge {held / 'part-1'} " \
           f"{held / 'part-2'}" in said and "sweep" not in said
    assert al.merge(held / "part-1", held / "part-2", out=tmp_path / "o").record.config.shard is None
    late = tmp_path / "late"
    with monkeypatch.context() as m, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fail_after(m, 1, KeyboardInterrupt)
        with pytest.raises(KeyboardInterrupt):
            al.evaluate("fake", "abricot_abs", sample=6, out=late, **ARGS)
    with pytest.raises(al.AbricotError) as caught:
        al.merge(late, tmp_path / "s2", out=tmp_path / "q")
    said = str(caught.value)
    _no_command_of_a_door(said)
    assert f"{late} is not a shard of a run: its run (interrupted, 1 of 6 items) was started without shard=K/N" \
        in said and "resume" not in said
    assert not (tmp_path / "q").exists() or not (tmp_path / "q" / "results.json").exists()
