"""A `--sample` grow of a run whose `--until-settled` rule took looks says on its resume line that an
`--until-settled` grow would have kept them instead; its recorded note says only the looks and the bound, so a note
carried into later grows never advises the `--until-settled` grow that is refused for them
(settle_record.refuse_said_looks). Fake backend, in-process."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abricot_local.cli import cli

ADVICE = "would go on with the looks kept instead"


def run(out, models, data, *more):
    return CliRunner().invoke(cli, ["run", "fake-as-llama", "--models", str(models), "--tasks", "abricot_abs", "--data",
                                    f"abricot={data}", "--backend", "fake", "--n-ctx", "4096", "--margin", "0.3",
                                    *map(str, more), "--out", str(out)])


def notes(out) -> list[str]:
    entry = json.loads((out / "results.json").read_text(encoding="utf-8"))["tasks"]["abricot_abs"]
    return [w for w in entry.get("warnings", []) if "took looks" in w]


def test_the_advice_is_on_the_first_grows_line_only_and_never_recorded(tmp_path, claims, abricot_file):
    out = tmp_path / "o"
    assert run(out, claims, abricot_file, "--until-settled", "--looks", "5,10", "--max-items", 15).exit_code == 0
    first = run(out, claims, abricot_file, "--sample", 20, "--resume")
    assert first.exit_code == 0, first.output
    assert f"--until-settled --max-items 20 {ADVICE}" in first.stderr
    note = notes(out)
    assert len(note) == 1 and ADVICE not in note[0] and "at 5, 10, 15 items" in note[0]
    later = run(out, claims, abricot_file, "--sample", 25, "--resume")
    assert later.exit_code == 0 and note[0] in later.stderr and ADVICE not in later.stderr, later.output
    assert notes(out) == note
    refused = run(out, claims, abricot_file, "--until-settled", "--max-items", 30, "--resume")
    assert refused.exit_code != 0 and "spend their error twice" in refused.output
