"""`merge` given a sweep's folder (`run` of several models: a run per model, each in its model's folder) says what
fits what it holds: each model's shards to merge apart when its runs are shards, else that each model's run is whole
(made without shards): nothing to merge (was: "merge each model's shards apart" of runs that have none)."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from invented_data import write_discotex

SHARDS = "merge each model's shards apart"
WHOLE = "each model's run in it is a whole run (made without shards), nothing to merge"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_discotex(tmp_path_factory.mktemp("sweep-advice") / "data", 4)


def sweep(data, *extra):
    return ["run", "fakeA", "fakeB", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(data),
            "--sample", "4", *extra]


def merge(*folders, out):
    r = CliRunner().invoke(cli, ["merge", *map(str, folders), "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 2, r.output
    assert not (out / "results.json").exists()
    return " ".join(r.output.split())


def test_a_sweep_of_whole_runs_has_nothing_to_merge(finished_run, data, tmp_path):
    whole = finished_run(*sweep(data))  # read only
    said = merge(whole, out=tmp_path / "m")
    assert f"{whole} is a sweep's folder (a run per model: fakeA, fakeB), not a shard: {WHOLE}" in said, said
    assert SHARDS not in said and "into" not in said


def test_a_sweep_of_shards_names_each_models_shards(finished_run, data, tmp_path):
    sw1, sw2 = (finished_run(*sweep(data, "--shard", f"{k}/2")) for k in (1, 2))  # read only
    m = tmp_path / "m"
    said = merge(sw1, sw2, out=m)
    assert (f"{sw1} is a sweep's folder (a run per model: fakeA, fakeB), not a shard: {SHARDS} ({sw1 / 'fakeA'} and "
            f"{sw2 / 'fakeA'}, into {m / 'fakeA'}; {sw1 / 'fakeB'} and {sw2 / 'fakeB'}, into {m / 'fakeB'})") in said
    assert "nothing to merge" not in said
    mixed = tmp_path / "mixed"  # fakeA sharded, fakeB's run whole: only fakeA's shards are named
    shutil.copytree(sw1, mixed)
    shutil.rmtree(mixed / "fakeB")
    shutil.copytree(finished_run(*sweep(data)) / "fakeB", mixed / "fakeB")
    said = merge(mixed, sw2, out=m)
    assert (f"{SHARDS} ({mixed / 'fakeA'} and {sw2 / 'fakeA'}, into {m / 'fakeA'}); fakeB: a whole run (made without "
            "shards), nothing to merge") in said, said
