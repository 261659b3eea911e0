"""`merge`'s advice on a folder that holds runs reads every folder given, not only the one refused (run/merge_advice.py):
each model's whole runs and shards across all of them, and a merge advised only where the folders given make one
run's shards whole (was: a sweep of whole runs given first hid the shards given after it; a sweep of shards given
first was told to merge each model's shard with the other folder's whole run, which merge refused)."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from invented_data import write_discotex

LACKS = "shard(s) 2/2 of that run are in no folder given: give them too"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_discotex(tmp_path_factory.mktemp("merge-advice2") / "data", 4)


@pytest.fixture(scope="module")
def sweeps(finished_run, data):
    """(a sweep of whole runs, its shards 1/2, its shards 2/2): read only."""
    args = ["run", "fakeA", "fakeB", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(data), "--sample",
            "4"]
    return finished_run(*args), *(finished_run(*args, "--shard", f"{k}/2") for k in (1, 2))


def merge(*folders, out, code=2):
    r = CliRunner().invoke(cli, ["merge", *map(str, folders), "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == code, r.output
    return " ".join(r.output.split())


def test_whole_runs_given_first_do_not_hide_the_shards_given_after(sweeps, tmp_path):
    whole, sw1, _ = sweeps
    said = merge(whole, sw1, out=tmp_path / "m")
    assert (f"{whole} is a sweep's folder (a run per model: fakeA, fakeB), not a shard: fakeA, fakeB: whole runs (made "
            f"without shards), nothing to merge ({whole / 'fakeA'}, {whole / 'fakeB'}); fakeA: {sw1 / 'fakeA'}: {LACKS}; "
            f"fakeB: {sw1 / 'fakeB'}: {LACKS}") in said, said
    assert "each model's run in it is a whole run" not in said and "merge each model's shards apart" not in said


def test_a_shard_is_never_advised_with_a_whole_run(sweeps, tmp_path):
    whole, sw1, _ = sweeps
    said = merge(sw1, whole, out=tmp_path / "m")
    assert f"fakeA: {sw1 / 'fakeA'}: {LACKS}" in said and "into" not in said, said
    assert f"{sw1 / 'fakeA'} and {whole / 'fakeA'}" not in said


def test_a_run_folder_given_beside_a_sweep_completes_its_model_and_the_advice_works(sweeps, tmp_path):
    _, sw1, sw2 = sweeps
    m = tmp_path / "m"
    said = merge(sw1, sw2 / "fakeA", out=m)
    assert (f"merge each model's shards apart ({sw1 / 'fakeA'} and {sw2 / 'fakeA'}, into {m / 'fakeA'}); fakeB: "
            f"{sw1 / 'fakeB'}: {LACKS}") in said, said
    said = merge(sw1 / "fakeA", sw2 / "fakeA", out=m / "fakeA", code=0)  # the advice, followed
    assert said.endswith(f"merged 2 shard(s) into {m / 'fakeA' / 'results.json'}")


def test_a_shard_given_twice_is_said_not_merged(sweeps, tmp_path):
    _, sw1, sw2 = sweeps
    again = shutil.copytree(sw1, tmp_path / "again")
    said = merge(sw1, again, sw2, out=tmp_path / "m")
    assert (f"fakeA: {sw1 / 'fakeA'} and {again / 'fakeA'} and {sw2 / 'fakeA'}: shard 1/2 ({sw1 / 'fakeA'}, "
            f"{again / 'fakeA'}) is given twice: give one folder of each") in said, said
    assert "merge each model's shards apart" not in said


def test_a_folder_of_one_runs_shards_lacking_one_no_folder_given_holds_names_no_merge(sweeps, tmp_path):
    """No merge of the folders given (they do not make the run whole); the call that scores the shard they lack, as
    a sweep's merge gives it (run/merge_advice.py: _scoring), beside the shard held, then merge."""
    whole, sw1, _ = sweeps
    held = tmp_path / "held"
    shutil.copytree(sw1 / "fakeA", held / "part-1")
    said = merge(held, whole, out=tmp_path / "m")
    assert (f"{held} holds a shard of a run (1/2), not a shard: {held / 'part-1'}: shard(s) 2/2 of that run are in no "
            "folder given: give them too; score it with the options its run recorded") in said, said
    advice, _, call = said.split("not a shard:")[1].partition("then merge: ")
    assert "merge" not in advice  # no merge advised of the folders given
    call = call.replace(" \\ ", " ")  # the command's line continuations
    assert call.startswith("abricot-local run fakeA --backend fake ") and "--sample 4 " in call, call
    assert call.endswith(f"--shard 2/2 --out {held / 'shard-2-of-2'}"), call
