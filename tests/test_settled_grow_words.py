"""A run --until-settled that stopped at a look below its --max-items, grown with a larger --max-items, is said to grow
from the items it holds, never from a --max-items it was not given (run.resume.grown_words: its rule stopped at 20 of
--max-items 40; it said `grows from --max-items 20`). Fake backend, the real ABRICOT release."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abricot_local.cli import cli


def test_a_settled_run_grown_says_the_items_it_holds_not_a_bound_it_never_had(tmp_path, claims, abricot_file):
    args = ["run", "fake-as-llama", "--models", str(claims), "--tasks", "abricot_abs", "--data",
            f"abricot={abricot_file}", "--backend", "fake", "--n-ctx", "8192", "--until-settled", "--looks", "20,40",
            "--out", str(tmp_path / "st")]
    assert CliRunner().invoke(cli, [*args, "--max-items", "40"]).exit_code == 0
    config = json.loads((tmp_path / "st" / "results.json").read_text())["config"]
    assert (config["sample"], config["max_items"]) == (20, 40)  # stopped at its first look, its bound 40
    r = CliRunner().invoke(cli, [*args, "--max-items", "80", "--resume"])
    line = next(ln for ln in r.output.splitlines() if "grows" in ln)
    assert "grows from the 20 items it holds to --max-items 80: " in line and "--max-items 20" not in line, line
