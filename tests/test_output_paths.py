"""What the tool writes where a user names the place: never through or over a link, never over a run's
own files or into its checkpoint, never over a read-only file (record/outputs.py; a run's own folder:
run/owned.py)."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from tests.conftest import FIXTURE

FAKE = ("--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "4")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def run(finished_run, tmp_path):
    return finished_run("run", "fake", *FAKE, into=tmp_path / "run")


def refused(r, *words):
    assert r.exit_code != 0, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception  # no traceback
    for w in words:
        assert w in r.output, r.output


def test_a_run_into_a_link_to_a_folder_is_refused_and_nothing_is_written_there(tmp_path):
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "target")
    r = invoke("run", "fake", *FAKE, "--out", tmp_path / "link")
    refused(r, "is a symbolic link", "--out")
    assert list((tmp_path / "target").iterdir()) == []


def test_a_report_or_a_comparison_never_replaces_a_run_s_own_file(run, tmp_path):
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    refused(invoke("report", run, "-o", run / "results.json"), "is a file of the run in", "outside it")
    refused(invoke("compare", run, run, "-o", run / "samples-abricot_abs.jsonl"), "is a file of the run in")
    refused(invoke("report", run, "--plot", run / ".checkpoint"), "is the checkpoint of the run in")
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    r = invoke("report", run, "-o", run / "report.md")  # a report beside the run is no run's file
    assert r.exit_code == 0, r.output
    assert (run / "report.md").is_file()


def test_a_link_or_a_read_only_file_named_for_output_is_left_as_it_was(run, tmp_path):
    mine = tmp_path / "mine.txt"
    mine.write_text("my notes\n")
    (tmp_path / "link.txt").symlink_to(mine)
    refused(invoke("report", run, "-o", tmp_path / "link.txt"), "is a symbolic link")
    refused(invoke("compare", run, run, "-o", tmp_path / "link.txt"), "is a symbolic link")
    assert (tmp_path / "link.txt").is_symlink() and mine.read_text() == "my notes\n"
    mine.chmod(0o444)
    refused(invoke("report", run, "-o", mine), "is read-only")
    assert mine.read_text() == "my notes\n"
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        refused(invoke("report", run, "-o", ro / "report.md"), "is a read-only folder")
        assert os.listdir(ro) == []
    finally:
        ro.chmod(0o755)


def test_plots_and_the_lm_eval_layout_never_go_through_a_link(run, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "plots").symlink_to(victim)
    refused(invoke("report", run, "--plot", tmp_path / "plots"), "is a symbolic link")
    out = tmp_path / "lm"
    out.mkdir()
    (out / "fake").symlink_to(victim)  # the model's folder of the layout
    refused(invoke("report", "--format", "lm-eval", run, "-o", out), "is a symbolic link")
    assert os.listdir(victim) == []
