"""A sweep stopped between two models says the call that resumes it naming the tasks its finished runs resolved
(run.session.after_signal: the first finished run's record), as each model's own interruption does: data that
lands later makes no other run of the models left. Fake backend."""

from __future__ import annotations

from types import SimpleNamespace

from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.run.session import after_signal
from invented_data import write_discotex


def test_a_sweep_stopped_between_models_names_the_tasks_its_runs_resolved(tmp_path):
    data = write_discotex(tmp_path / "d", 4)
    done = tmp_path / "sw" / "fake-a"
    r = CliRunner().invoke(cli, ["run", "fake-a", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(data),
                                 "--out", str(done)])
    assert r.exit_code == 0, r.output
    asked = []

    def hint(folder, tasks=()):
        asked.append((folder, tasks))
        return "CALL"

    said = after_signal(SimpleNamespace(sweep=True, models=("fake-a", "fake-b")), [done], hint, tmp_path / "sw")
    assert said.endswith("resume with: CALL") and asked == [(tmp_path / "sw", ("discotex",))], (said, asked)
    (done / "results.json").write_text("{not json", encoding="utf-8")  # unreadable: no task named, the call still said
    assert after_signal(SimpleNamespace(sweep=True, models=("fake-a", "fake-b")), [done], hint,
                        tmp_path / "sw").endswith("resume with: CALL") and asked[-1] == (tmp_path / "sw", ())
