"""`runs` of a run's shards, one of them listed unfinished (interrupted, or killed: stopped): it says that shard is
unfinished in `merge`'s own words for its folder (the call that resumes it, then merge), never that it is not here;
the call it prints resumes it, and `runs` then names the merge (fake backend)."""

from __future__ import annotations

import shlex
import sys

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import fail_after
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("killed", [False, True])
def test_runs_says_an_unfinished_shard_as_merge_does(tmp_path, monkeypatch, killed):
    data = write_discotex(tmp_path / "data", 4)
    args = ["run", "fake", "--backend", "fake", "--data-dir", data, "--tasks", "discotex", "--n-ctx", 8192]
    runs = tmp_path / "runs"
    assert invoke(*args, "--shard", "1/2", "--out", runs / "s1").exit_code == 0
    with monkeypatch.context() as m:
        fail_after(m, 1, KeyboardInterrupt)
        shard = [*args, "--shard", "2/2", "--out", runs / "s2"]
        m.setattr(sys, "argv", ["abricot-local", *map(str, shard)])  # the command line its resume call is made of
        assert invoke(*shard).exit_code == 130
    if killed:  # kill -9: the run never said INTERRUPTED, its RUNNING file stays with no process holding it
        (runs / "s2" / "INTERRUPTED").rename(runs / "s2" / "RUNNING")

    refused = invoke("merge", runs / "s1", runs / "s2", "--out", tmp_path / "m")
    assert refused.exit_code == 2
    words = refused.output.strip().removeprefix("error: ")  # what merge says of the unfinished shard's folder
    assert str(runs / "s2") in words and words.endswith("then merge"), refused.output
    listed = invoke("runs", runs)
    assert listed.exit_code == 0, listed.output
    state, said = listed.output.splitlines()[1], listed.output.splitlines()[2:]
    assert state.startswith(f"{runs / 's2'}  shard 2/2 of a run: {'stopped' if killed else 'interrupted'}"), state
    assert said[0] == f"{runs / 's1'}, {runs / 's2'}: shards of one run; shard 2/2 ({runs / 's2'}) is unfinished:"
    assert said[1:] == [f"  {words}"] and "not here" not in listed.output, listed.output

    if not killed:  # the call it names resumes that shard: then `runs` names the merge of the run's shards
        call = shlex.split(words.split("`")[1])
        assert call[0] == "abricot-local" and call[-1] == "--resume" and call[call.index("--shard") + 1] == "2/2"
        assert invoke(*call[1:]).exit_code == 0
        assert "the shards of one run; merge them" in invoke("runs", runs).output
