"""A sweep's --resume takes a model's finished run as complete as that model's --resume does (its leftovers tidied);
a results.json that cannot be read is no finished run: the model's run says what is wrong with it, as that model's
error, and the sweep goes on (it was once said "already complete"). Fake backend."""

from __future__ import annotations

from click.testing import CliRunner

from abricot_local.cli import cli
from invented_data import write_discotex


def test_a_damaged_record_in_a_resumed_sweep_is_said_not_taken_as_complete(tmp_path):
    data = write_discotex(tmp_path / "d", 4)
    args = ["run", "fake-a", "fake-b", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(data),
            "--out", str(tmp_path / "sw")]
    assert CliRunner().invoke(cli, args).exit_code == 0
    (tmp_path / "sw" / "fake-a" / "results.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "sw" / "fake-b" / ".checkpoint").mkdir()  # a leftover a kill left beside a finished run
    r = CliRunner().invoke(cli, [*args, "--resume"])
    assert "fake-a holds this run, complete: nothing to score" not in r.output and "error: fake-a: " in r.output, r.output
    assert "fake-b holds this run, complete: nothing to score" in r.output and r.exit_code == 1, r.output
    assert not (tmp_path / "sw" / "fake-b" / ".checkpoint").exists()  # tidied as the finished run is found
