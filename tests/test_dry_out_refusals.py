"""`run --dry-run` refuses every --out the run refuses, in the run's words (owned.guard, taken by the dry run
through saved.held_items): a folder that is not a run and not empty, --out itself a link (with --resume or not),
a folder inside another run's, a file; a sweep's model row too; and a run stopped by a full
disk says what it kept and how to resume (as Ctrl-C does), and the resume then finishes it byte for byte.
Fake backend, invented data: no model."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

import abricot_local as api
from abricot_local.cli import cli
from abricot_local.errors import NoSpaceError
from invented_data import write_discotex
from test_full_disk import FullFor


@pytest.fixture
def data(tmp_path):
    return write_discotex(tmp_path / "d", 4)  # 8 items


def run_fake(data, out, *extra, models=("fake",)):
    args = ["run", *models, "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--out", out, *extra]
    return CliRunner().invoke(cli, [str(a) for a in args])


def error_line(r) -> str:
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error: ")]
    assert r.exit_code == 2 and len(errors) == 1, r.output
    return errors[0]


def not_a_run(tmp: Path, data=None) -> Path:
    out = tmp / "figures"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    return out


def a_link(tmp: Path, data) -> Path:
    (tmp / "real").mkdir()
    (tmp / "ln").symlink_to(tmp / "real")
    return tmp / "ln"


def a_link_to_a_finished_run(tmp: Path, data) -> Path:
    """Before: `--resume` read it through the link, said it complete and tidied it (exit 0)."""
    assert run_fake(data, tmp / "done").exit_code == 0
    (tmp / "ln").symlink_to(tmp / "done")
    return tmp / "ln"


def inside_a_run(tmp: Path, data) -> Path:
    (tmp / "outer").mkdir()
    (tmp / "outer" / "results.json").write_text("{}")  # a run's folder (record.outputs.is_run_folder)
    return tmp / "outer" / "inner"


def a_file(tmp: Path, data) -> Path:
    (tmp / "f").write_text("x")
    return tmp / "f"


@pytest.mark.parametrize("resume", [(), ("--resume",)], ids=["new", "resume"])
@pytest.mark.parametrize("make, says", [(not_a_run, "is not a run folder and is not empty: it holds notes.txt"),
                                        (a_link, "is a symbolic link"),
                                        (a_link_to_a_finished_run, "is a symbolic link"),
                                        (inside_a_run, "lies inside the run folder"),
                                        (a_file, "is not a folder")])
def test_the_dry_run_refuses_what_the_run_refuses_in_its_words(tmp_path, data, make, says, resume):
    out = make(tmp_path, data)
    before = sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    dry = error_line(run_fake(data, out, "--dry-run", *resume))
    assert says in dry and str(out) in dry, dry
    assert sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before  # nothing made or locked
    assert dry == error_line(run_fake(data, out, *resume))  # the run's own refusal, word for word
    assert sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before  # nor by the run


def test_a_sweep_says_the_run_refusal_in_the_model_row(tmp_path, data):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (tmp_path / "real").mkdir()
    (sweep / "fake-a").symlink_to(tmp_path / "real")
    dry = run_fake(data, sweep, "--dry-run", "--json", models=("fake-a", "fake-b"))
    assert dry.exit_code == 0, dry.output  # (a dry sweep's model that cannot go: its row says why)
    rows = {m["model"]: m for m in json.loads(dry.output)["models"]}
    assert "is a symbolic link" in rows["fake-a"]["problem"] and not rows["fake-b"].get("problem"), rows
    ran = run_fake(data, sweep, models=("fake-a", "fake-b"))
    assert f"error: fake-a: {rows['fake-a']['problem']}" in ran.output, ran.output


def test_a_full_disk_says_what_is_kept_and_how_to_resume(tmp_path, data, monkeypatch):
    ref = tmp_path / "ref"
    assert run_fake(data, ref).exit_code == 0
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        FullFor(m, {"samples-discotex.jsonl"}, {"samples-discotex.jsonl": 2})
        r = run_fake(data, out)
    assert error_line(r).startswith("error: no space left on device writing "), r.output
    lines = r.output.splitlines()
    then = lines[lines.index(error_line(r)) + 1]
    assert then.startswith(f"2 of 8 items (discotex 2/8) saved in {out}; once there is space again, resume with: "), \
        r.output
    assert then.endswith(f"--out {out} --resume"), then
    assert "resume with" not in (out / "FAILED").read_text()  # the state file keeps the one error line
    assert run_fake(data, out, "--resume").exit_code == 0
    assert (out / "samples-discotex.jsonl").read_bytes() == (ref / "samples-discotex.jsonl").read_bytes()


def test_a_full_disk_in_the_api_names_the_call_that_resumes(tmp_path, data, monkeypatch):
    out = tmp_path / "o"
    with monkeypatch.context() as m, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        FullFor(m, {"samples-discotex.jsonl"}, {"samples-discotex.jsonl": 3})
        with pytest.raises(NoSpaceError) as err:
            api.evaluate("fake", "discotex", backend="fake", data_dir=str(data), out=str(out), progress=False)
    first, then = str(err.value).split("\n")
    assert first.startswith("no space left on device writing ")
    assert then == (f"3 of 8 items (discotex 3/8) saved in {out}; once there is space again, resume with: "
                    f"abricot_local.evaluate(..., out={str(out)!r}, resume=True)")


def test_a_resumed_sweep_takes_no_finished_run_through_a_link(tmp_path, data):
    """Before: the run took as complete a link to a finished run (tidying it through the link)."""
    assert run_fake(data, tmp_path / "done").exit_code == 0
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "fake-a").symlink_to(tmp_path / "done")
    dry = run_fake(data, sweep, "--dry-run", "--json", "--resume", models=("fake-a", "fake-b"))
    row = json.loads(dry.output)["models"][0]
    assert "is a symbolic link" in row["problem"], dry.output
    ran = run_fake(data, sweep, "--resume", models=("fake-a", "fake-b"))
    assert f"error: fake-a: {row['problem']}" in ran.output and "holds this run, complete: nothing to score" not in ran.output, ran.output
