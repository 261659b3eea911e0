"""`--data-dir DIR`: the tasks' data in DIR/KEY/ (the cache's layout, what `data pull` writes) or in DIR
itself; and a dry run refuses the data given for a task it names, as the run does."""

from __future__ import annotations

import shutil

from click.testing import CliRunner

from abricot_local.cli import cli
from tests.conftest import FIXTURE

FAKE = ("run", "x", "--backend", "fake", "--n-ctx", "8192", "--limit", "2")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_data_kept_a_folder_per_task_is_found_as_the_cache_keeps_it(tmp_path, discotex_dir):
    data = tmp_path / "data"
    shutil.copytree(discotex_dir, data / "discotex")
    (data / "abricot").mkdir()
    shutil.copy(FIXTURE, data / "abricot" / "dataset_it.csv")
    r = invoke(*FAKE, "--tasks", "abricot,discotex", "--data-dir", data, "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output  # was: "no data in --data-dir data/" (only a flat folder was searched)
    flat = tmp_path / "flat"
    shutil.copytree(discotex_dir, flat)
    r = invoke(*FAKE, "--tasks", "discotex", "--data-dir", flat, "--out", tmp_path / "f")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "o" / "samples-discotex.jsonl").read_bytes() == (tmp_path / "f" / "samples-discotex.jsonl").read_bytes()
    r = invoke(*FAKE, "--tasks", "abricot", "--data-dir", flat, "--out", tmp_path / "n")
    assert r.exit_code != 0 and "nor in its abricot/" in r.output, r.output


def test_a_dry_run_refuses_the_data_given_for_a_task_it_names_as_the_run_does(tmp_path):
    for extra in (("--data", f"discotex={tmp_path / 'gone'}"), ("--data-dir", tmp_path)):
        dry, run = (invoke(*FAKE, "--tasks", "discotex", *extra, *more) for more in (("--dry-run",),
                                                                                      ("--out", tmp_path / "o")))
        assert dry.exit_code == run.exit_code == 2, (dry.output, run.output)  # the dry run said "no data here", exit 0
        assert dry.output.splitlines()[-3:] == run.output.splitlines()[-3:]
    r = invoke(*FAKE, "--data", f"discotex={tmp_path / 'gone'}", "--data", f"abricot={FIXTURE}", "--dry-run")
    assert r.exit_code == 0 and "no data here" in r.output  # no task named: the run skips it too, with its reason
