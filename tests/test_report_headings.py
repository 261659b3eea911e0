"""The report's heading says which tasks have published results (issue 10, item 8): DISCOTEX
has none, so it must not sit under "Runs and published results" unqualified."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from invented_data import write_discotex

FIXTURE = Path(__file__).resolve().parent / "data" / "abricot_invented_fixture.csv"


@pytest.mark.parametrize("tasks, heading", [
    ("discotex", "Runs (value [95% CI]); no published results exist for these tasks"),
    ("discotex,abricot_abs", "Runs and published results (value [95% CI]); none are published for discotex"),
    ("abricot_abs", "Runs and published results (value [95% CI])"),
])
def test_heading_names_the_tasks_without_published_results(tmp_path, tasks, heading):
    out = tmp_path / "o"
    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", tasks, "--data-dir",
                                 str(write_discotex(tmp_path / "d", 4)), "--data", f"abricot={FIXTURE}",
                                 "--n-ctx", "8192", "--out", str(out)])
    assert r.exit_code == 0, r.output
    for fmt, head in (("table", ""), ("markdown", "### ")):
        text = CliRunner().invoke(cli, ["report", str(out), "--format", fmt]).stdout
        assert text.splitlines()[0] == head + heading
