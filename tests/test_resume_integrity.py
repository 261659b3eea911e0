"""What a resume reuses is what the run made (run/saved.py, run/folder.py): saved samples with no manifest are never
reused, a saved line its rebuilt item does not give is scored again, a damaged line is scored again alone, a
resume of a finished run removes a stale .lock, a signal before the first item leaves no folder and says so, and
finishing moves the checkpoint into place, never leaving a samples file without results.json (fake backend,
real DISCOTEX data, 6 items)."""

import errno
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.jsonfiles import write_error
from abricot_local.run import folder as results
from conftest import fail_after

N = 6
SAMPLES = "samples-discotex.jsonl"


@pytest.fixture
def base(discotex_dir):
    return ["run", "fake", "--backend", "fake", "--data-dir", str(discotex_dir), "--limit", str(N)]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def ref(finished_run, base):
    return finished_run(*base)  # read only


def interrupted(tmp_path, monkeypatch, base, saved: int) -> Path:
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        fail_after(m, saved, KeyboardInterrupt)
        assert invoke(*base, "--out", out).exit_code == 130
    return out


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def write_lines(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def scored_now(out: Path) -> int:
    return json.loads((out / "results.json").read_text())["tasks"]["discotex"]["scored_now"]


def test_saved_samples_without_their_manifest_are_never_reused(tmp_path, monkeypatch, base):
    out = interrupted(tmp_path, monkeypatch, base, 4)
    (out / ".checkpoint" / "run.json").unlink()
    before = (out / ".checkpoint" / SAMPLES).read_bytes()
    for extra in ((), ("--resume",), ("--resume", "--dry-run"), ("--dry-run",)):
        r = invoke(*base, "--out", out, *extra)
        text = " ".join(r.output.split())
        assert r.exit_code == 2, (extra, r.output)
        assert f"holds saved samples (.checkpoint/{SAMPLES}) but no .checkpoint/run.json" in text, text
        assert "not reused; delete them (or the folder) to start afresh there, or choose another --out" in text
    assert (out / ".checkpoint" / SAMPLES).read_bytes() == before and not (out / "results.json").exists()
    (out / ".checkpoint" / SAMPLES).unlink()  # as the message says: then a run starts afresh
    assert invoke(*base, "--out", out).exit_code == 0 and scored_now(out) == N


def test_a_saved_line_its_item_does_not_give_is_scored_again(tmp_path, monkeypatch, base, ref):
    out = interrupted(tmp_path, monkeypatch, base, 4)
    path = out / ".checkpoint" / SAMPLES
    rows = lines(path)
    rows[0]["context"] = rows[0]["context"].replace("a", "e", 1)  # the prompt changed
    rows[1]["gold"] = (rows[1]["gold"] + 1) % len(rows[1]["choices"])  # the answer changed, still a valid line
    write_lines(path, rows)
    r = invoke(*base, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    said = f"discotex: the saved line of item {rows[0]['id']!r} and 1 more is not what its item gives"
    assert said in " ".join(r.output.split()), r.output
    assert (out / SAMPLES).read_bytes() == (ref / SAMPLES).read_bytes()
    assert scored_now(out) == N - 2  # the 2 lines that matched were kept as written, not scored again


def test_a_damaged_line_mid_checkpoint_is_scored_again_alone(tmp_path, monkeypatch, base, ref):
    out = interrupted(tmp_path, monkeypatch, base, 4)
    path = out / ".checkpoint" / SAMPLES
    text = path.read_text(encoding="utf-8").splitlines(keepends=True)
    text[1] = "{garbage\n"
    path.write_text("".join(text), encoding="utf-8")
    listed = " ".join(invoke("runs", out).output.split())
    assert f"interrupted, 3 of {N} items" in listed, listed
    r = invoke(*base, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    assert f"{SAMPLES} line 2: damaged: set aside, scored again" in " ".join(r.output.split()), r.output
    assert (out / SAMPLES).read_bytes() == (ref / SAMPLES).read_bytes()
    assert scored_now(out) == N - 3


def test_a_resume_of_a_finished_run_removes_a_stale_lock(tmp_path, finished_run, base):
    out = finished_run(*base, into=tmp_path / "o")
    (out / ".lock").write_text("999999")  # SIGKILL after the tidy-up, before the lock went
    r = invoke(*base, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    assert sorted(os.listdir(out)) == ["results.json", SAMPLES]


@pytest.mark.parametrize("where", ["running", "start", "first item"])
def test_a_signal_before_the_first_item_leaves_no_folder_and_says_so(tmp_path, monkeypatch, base, where):
    out = tmp_path / "new" / "o"
    with monkeypatch.context() as m:
        if where == "first item":
            fail_after(m, 0, KeyboardInterrupt)
        else:
            real = getattr(results.OutputDir, where)

            def stop(self, *a, **kw):
                real(self, *a, **kw)  # RUNNING (and for start: run.json) written, then the signal
                raise KeyboardInterrupt
            m.setattr(results.OutputDir, where, stop)
        r = invoke(*base, "--out", out)
    assert r.exit_code == 130
    assert "nothing scored yet, nothing to resume" in r.output and "resume with" not in r.output, r.output
    assert not (tmp_path / "new").exists()
    assert invoke(*base, "--out", out).exit_code == 0  # "run the same command again"


def test_finishing_moves_the_checkpoint_into_place(tmp_path, monkeypatch, base, ref):
    out, seen = tmp_path / "o", {}
    real = results.OutputDir.finalize

    def finalize(self, *a, **kw):
        seen["inode"] = (self.ckpt / SAMPLES).stat().st_ino
        return real(self, *a, **kw)
    monkeypatch.setattr(results.OutputDir, "finalize", finalize)
    assert invoke(*base, "--out", out).exit_code == 0
    assert (out / SAMPLES).stat().st_ino == seen["inode"]  # moved, not copied: no second copy on disk
    assert (out / SAMPLES).read_bytes() == (ref / SAMPLES).read_bytes()


def test_a_full_disk_at_results_json_leaves_no_samples_file_without_it(tmp_path, monkeypatch, base, ref):
    out = tmp_path / "o"

    def full(path, record):
        raise write_error(path, OSError(errno.ENOSPC, "No space left on device"))
    with monkeypatch.context() as m:
        m.setattr(results, "write_record", full)
        r = invoke(*base, "--out", out)
    assert r.exit_code != 0 and "no space left on device writing" in r.output, r.output
    assert sorted(os.listdir(out)) == [".checkpoint", "FAILED"]  # the samples file went back into the checkpoint
    assert len(lines(out / ".checkpoint" / SAMPLES)) == N
    r = invoke(*base, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    assert (out / SAMPLES).read_bytes() == (ref / SAMPLES).read_bytes() and scored_now(out) == 0
