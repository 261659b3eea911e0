"""One rule for a checkpoint's lines (run.kept.scan_saved): a --resume (run.kept.read_saved) and `runs`
(states.saved_lines) read them alike; an id found a third time after two lines of other content is set aside too
(read_saved crashed on it with an AttributeError)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.errors import ResultsError
from abricot_local.run.kept import read_saved
from abricot_local.run.states import saved_lines
from invented_data import write_discotex


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scan")
    out = tmp / "o"
    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir",
                                 str(write_discotex(tmp / "d", 4)), "--limit", "3", "--out", str(out)])
    assert r.exit_code == 0, r.output
    return (out / "samples-discotex.jsonl").read_text().splitlines()


def _other(line: str) -> str:
    row = json.loads(line)
    low = row["logprobs"].index(min(row["logprobs"]))
    row["logprobs"][low] -= 0.25  # other content, the same prediction
    return json.dumps(row)


def test_an_id_a_third_time_is_set_aside_by_both_readers(tmp_path, lines):
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join([lines[0], lines[1], _other(lines[0]), lines[0], "not json", lines[2]]) + "\n")
    samples, off = read_saved(f, repair=False)
    ids, refused = saved_lines(f)
    kept = [json.loads(x)["id"] for x in (lines[1], lines[2])]
    assert [s.id for s in samples] == kept and sorted(ids) == sorted(kept) and refused == ""
    assert off == [1, 3, 4, 5]


def test_a_line_that_is_no_sample_is_refused_by_the_resume_and_named_by_runs(tmp_path, lines):
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join([lines[0], '{"foo": 1}', lines[1]]) + "\n")
    ids, refused = saved_lines(f)
    assert len(ids) == 2 and "line 2" in refused and "id is missing" in refused
    with pytest.raises(ResultsError, match="line 2 .*delete that line"):
        read_saved(f, repair=False)
