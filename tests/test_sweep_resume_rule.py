"""A sweep's --resume holds each model's finished run to the resume's one rule, as that model's own --resume does
(run.session.sweep: every model through run_model). Before, the sweep took a finished run as "already complete"
whatever the request asked (another --seed, other tasks) and showed the old runs as the request's. Fake backend."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abricot_local.cli import cli
from invented_data import write_discotex


def test_a_sweep_resumed_with_other_options_refuses_each_finished_run_as_its_own_resume_does(tmp_path):
    data = write_discotex(tmp_path / "d", 4)
    sweep = ["run", "fake-a", "fake-b", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(data),
             "--sample", "3", "--out", str(tmp_path / "sw")]
    assert CliRunner().invoke(cli, sweep).exit_code == 0
    held = {m: (tmp_path / "sw" / m / "results.json").read_bytes() for m in ("fake-a", "fake-b")}
    one = ["run", "fake-a", *sweep[3:-1], str(tmp_path / "sw" / "fake-a")]  # fake-a's own run
    own = CliRunner().invoke(cli, [*one, "--seed", "9", "--resume"])
    assert own.exit_code == 2, own.output
    why = own.output.removeprefix("error: ").strip()
    r = CliRunner().invoke(cli, [*sweep, "--seed", "9", "--resume"])
    assert r.exit_code == 1 and "holds this run, complete" not in r.output, r.output
    assert why.replace(str(tmp_path / "sw" / "fake-a"), "") in r.output.replace(str(tmp_path / "sw" / "fake-a"), "")
    assert r.output.count("cannot resume") >= 2 and "--seed: recorded 1234, given 9" in r.output, r.output
    assert {m: (tmp_path / "sw" / m / "results.json").read_bytes() for m in held} == held  # left as they were
    same = CliRunner().invoke(cli, [*sweep, "--resume"])  # the same request: each run complete, nothing written
    assert same.exit_code == 0 and same.output.count("holds this run, complete: nothing to score") == 2, same.output
    assert {m: (tmp_path / "sw" / m / "results.json").read_bytes() for m in held} == held
    assert json.loads(held["fake-a"])["config"]["seed"] == 1234
