"""A sweep stopped while its next model is planned (nothing of it saved yet) says the call that resumes the sweep,
naming its folder and the tasks its finished runs resolved (run.run_folder.RunFolder.interrupted), never "nothing to
resume ... run the same command again" (which the finished runs' folders then refuse). Fake backend."""

from __future__ import annotations

import shlex
import sys

from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.run import plan as run_plan
from invented_data import write_discotex


def test_a_sweep_stopped_as_its_next_model_is_planned_says_how_to_resume_the_sweep(tmp_path, monkeypatch):
    data = write_discotex(tmp_path / "d", 4)
    args = ["run", "fake-a", "fake-b", "--backend", "fake", "--data-dir", str(data), "--out", str(tmp_path / "sw")]
    monkeypatch.setattr(sys, "argv", ["abricot-local", *args])  # the command line the resume call repeats
    make_plan = run_plan.make_plan

    def stopped_at_b(request, model=None, **kw):
        if model == "fake-b":
            raise KeyboardInterrupt
        return make_plan(request, model, **kw)

    with monkeypatch.context() as m:
        m.setattr(run_plan, "make_plan", stopped_at_b)
        r = CliRunner().invoke(cli, args)
    assert r.exit_code == 130, r.output
    assert "nothing to resume" not in r.output and f"the sweep in {tmp_path / 'sw'} holds 1 finished run" in r.output
    said = r.output[r.output.index("resume with: ") + len("resume with: "):].splitlines()[0]
    again = shlex.split(said)
    assert again[-1] == "--resume" and again[again.index("--out") + 1] == str(tmp_path / "sw") and "--tasks" in again, said
    done = CliRunner().invoke(cli, again[1:])  # run as printed: fake-a complete, fake-b scored
    assert done.exit_code == 0 and (tmp_path / "sw" / "fake-b" / "results.json").is_file(), done.output
