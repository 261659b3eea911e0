"""A checkpoint samples file that is a link (to the run's own lines, even) or a folder: the resume refuses it
(run/owned.refuse_link), and so do `runs` (it names it, where it said "--resume continues") and the dry run (which
read the lines through the link and counted them saved): one refusal, the same words. Fake backend, 8 invented
DISCOTEX items, 3 saved before an interrupt."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import fail_after
from invented_data import write_discotex

SAMPLES = "samples-discotex.jsonl"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _link(out):
    saved = out / ".checkpoint" / SAMPLES
    saved.rename(out / "elsewhere.jsonl")
    saved.symlink_to(out / "elsewhere.jsonl")
    return "is a symbolic link"


def _folder(out):
    saved = out / ".checkpoint" / SAMPLES
    saved.unlink()
    saved.mkdir()
    return "is not a regular file"


@pytest.mark.parametrize("make", [_link, _folder])
def test_runs_the_dry_run_and_the_resume_refuse_it_alike(tmp_path, monkeypatch, make):
    base = ("run", "fake", "--backend", "fake", "--tasks", "discotex", "--n-ctx", "4096",
            "--data-dir", write_discotex(tmp_path / "discotex", per_source=4), "--out", tmp_path / "o")
    with monkeypatch.context() as m:
        fail_after(m, 3, KeyboardInterrupt)
        assert invoke(*base).exit_code == 130
    what = make(tmp_path / "o")
    said = f"{tmp_path / 'o' / '.checkpoint' / SAMPLES} {what}"
    runs = invoke("runs", tmp_path / "o")
    assert runs.exit_code == 0 and f"--resume refuses it: {said}" in runs.output, runs.output
    assert "--resume continues" not in runs.output
    for extra in (("--dry-run",), ()):
        r = invoke(*base, "--resume", *extra)
        assert r.exit_code == 2 and f"error: {said}" in r.output, r.output
        assert "saved in --out" not in r.output
    assert not (tmp_path / "o" / "results.json").exists()
