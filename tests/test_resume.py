"""Checkpoints, resume, the output lock, atomic writes and `check` (fake backend, plus one real kill test)."""

import errno
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from abricot_local.run import folder as results
from abricot_local.cli import cli
from abricot_local.errors import ResultsError
from conftest import fail_after


@pytest.fixture
def base(discotex_dir):
    return ["run", "fake", "--backend", "fake", "--data-dir", str(discotex_dir), "--limit", "10"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def samples(out, task="discotex"):
    return (out / f"samples-{task}.jsonl").read_bytes()


@pytest.fixture
def reference(finished_run, tmp_path, base):
    return finished_run(*base, into=tmp_path / "reference")  # a copy: the check tests tamper with it


def interrupt_after(monkeypatch, n):
    fail_after(monkeypatch, n, KeyboardInterrupt)


def test_ctrl_c_then_resume_equals_an_uninterrupted_run(tmp_path, monkeypatch, reference, base):
    out = tmp_path / "o"
    interrupt_after(monkeypatch, 4)
    r = invoke(*base, "--out", out)
    assert r.exit_code == 130
    assert "resume with: abricot-local" in r.output and "--resume" in r.output
    assert not (out / "results.json").exists()
    assert len((out / ".checkpoint" / "samples-discotex.jsonl").read_text().splitlines()) == 4
    monkeypatch.undo()
    again = invoke(*base, "--out", out)
    assert again.exit_code != 0 and "--resume" in again.output  # refuses to start over silently
    r = invoke(*base, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    assert samples(out) == samples(reference)
    res, ref = (json.loads((d / "results.json").read_text()) for d in (out, reference))
    assert res["tasks"]["discotex"]["metrics"] == ref["tasks"]["discotex"]["metrics"]
    assert res["tasks"]["discotex"]["scored_now"] == 6


def test_torn_last_line_is_rescored(tmp_path, monkeypatch, reference, base):
    out = tmp_path / "o"
    interrupt_after(monkeypatch, 3)
    invoke(*base, "--out", out)
    monkeypatch.undo()
    ck = out / ".checkpoint" / "samples-discotex.jsonl"
    with ck.open("a") as fh:
        fh.write('{"id": "task_1_ted_test_4", "logpr')  # a crash mid-write
    r = invoke(*base, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    assert samples(out) == samples(reference)


def test_resume_refuses_a_different_config(tmp_path, monkeypatch, base):
    out = tmp_path / "o"
    interrupt_after(monkeypatch, 2)
    invoke(*base, "--out", out)
    monkeypatch.undo()
    r = invoke(*base, "--out", out, "--resume", "--seed", "7")
    assert r.exit_code != 0 and "config differ" in r.output


def test_resume_needs_out_and_a_checkpoint(tmp_path, base):
    assert "--resume needs" in invoke(*base, "--resume").output
    r = invoke(*base, "--out", tmp_path / "empty", "--resume")
    assert r.exit_code != 0 and "nothing to resume" in r.output


def test_one_writer_per_folder(tmp_path, base):
    out = results.OutputDir(tmp_path / "o")
    out.acquire()
    try:
        r = invoke(*base, "--out", tmp_path / "o")
        assert r.exit_code != 0 and "in use by another run" in r.output
    finally:
        out.release()
    (tmp_path / "o").mkdir()  # the holder wrote nothing: its folder went with its lock
    (tmp_path / "o" / ".lock").write_text("999999999")  # a dead process: stale lock
    assert invoke(*base, "--out", tmp_path / "o").exit_code == 0


def test_disk_full_keeps_checkpoint_and_writes_no_results(tmp_path, monkeypatch, base):
    out = tmp_path / "o"
    real_replace = os.replace

    def full(src, dst):
        if str(dst).endswith("results.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(results.os, "replace", full)
    r = invoke(*base, "--out", out)
    assert r.exit_code != 0 and f"no space left on device writing {out / 'results.json'}" in r.output
    assert "Traceback" not in r.output
    assert not (out / "results.json").exists()
    assert len((out / ".checkpoint" / "samples-discotex.jsonl").read_text().splitlines()) == 10
    assert not list(out.glob(".results.json.*.tmp"))
    monkeypatch.undo()
    assert invoke(*base, "--out", out, "--resume").exit_code == 0


def test_read_jsonl_rejects_corruption_in_the_middle(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    from abricot_local.jsonfiles import read_jsonl

    with pytest.raises(ResultsError, match="line 2"):
        read_jsonl(p)


def test_check_reproduces_and_detects_tampering(reference):
    r = invoke("check", reference)
    assert r.exit_code == 0 and "reproduced" in r.output and "10 identical" in r.output
    r = invoke("check", reference, "--sample", 3)
    assert r.exit_code == 0 and "checked 3 items" in r.output
    path = reference / "samples-discotex.jsonl"
    rows = [json.loads(l) for l in path.read_text().splitlines()]
    rows[2]["logprobs"][0] += 0.5
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    r = invoke("check", reference)
    assert r.exit_code == 1 and "NOT reproduced" in r.output and rows[2]["id"] in r.output


def test_check_refuses_changed_data(reference, tmp_path):
    doc = json.loads((reference / "results.json").read_text())
    doc["tasks"]["discotex"]["data"][0]["sha256"] = "0" * 64
    (reference / "results.json").write_text(json.dumps(doc))
    r = invoke("check", reference)
    assert r.exit_code != 0 and "not the same file" in r.output


@pytest.mark.real
def test_sigkill_then_resume_on_the_real_model(gemma_run, tmp_path):
    args = [sys.executable, "-m", "abricot_local", *gemma_run.args]
    ref = gemma_run.out  # the same command, uninterrupted (shared)
    out = tmp_path / "killed"
    proc = subprocess.Popen([*args, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ck = out / ".checkpoint" / "samples-discotex.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (ck.exists() and len(ck.read_bytes().splitlines()) >= 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "results.json").exists()
    subprocess.run([*args, "--out", str(out), "--resume"], check=True, capture_output=True)
    assert samples(out) == samples(ref)
    r = subprocess.run([sys.executable, "-m", "abricot_local", "check", str(out), "--sample", "2"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((out / "results.json").read_text())
    doc["model"]["sha256"] = "f" * 64
    (out / "results.json").write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, "-m", "abricot_local", "check", str(out)], capture_output=True, text=True)
    assert r.returncode != 0 and "not the same file" in r.stderr


def test_the_checkpoint_is_flushed_per_item_and_fsynced_at_most_every_second(tmp_path, monkeypatch, base):
    """Each scored line is flushed at once (a killed process loses nothing: the kernel has it),
    fsync'd when the first line is written, then at most every SYNC_EVERY seconds, and when the
    folder is released on an interrupt (a power cut loses at most a second of items)."""
    synced = []
    real = os.fsync

    def counting(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(results.os, "fsync", counting)
    monkeypatch.setattr(results, "SYNC_EVERY", 3600.0)
    out = tmp_path / "o"
    interrupt_after(monkeypatch, 6)
    assert invoke(*base, "--out", out).exit_code == 130
    ck = str(out / ".checkpoint" / "samples-discotex.jsonl")
    lines = (out / ".checkpoint" / "samples-discotex.jsonl").read_text().splitlines()
    assert len(lines) == 6 and all(json.loads(line)["id"] for line in lines)
    assert synced.count(ck) == 2  # the first line, then the release: not one per line
    synced.clear()
    monkeypatch.undo()
    monkeypatch.setattr(results.os, "fsync", counting)
    monkeypatch.setattr(results, "SYNC_EVERY", 0.0)  # every line, as before
    interrupt_after(monkeypatch, 6)
    out2 = tmp_path / "o2"
    assert invoke(*base, "--out", out2).exit_code == 130
    assert synced.count(str(out2 / ".checkpoint" / "samples-discotex.jsonl")) == 6 + 1
