"""A --until-settled run open at its bound (console.settled, run.settle.advice, the API's too): its verdict line says it took
the bound's last look (`look 2 of 2`), so the advice says what a larger bound adds, not a "next look" of this rule, after
what its last look lacked (too few items off a vector's commonest value for a correlation's interval)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abricot_local.cli import cli


def test_the_advice_at_the_bound_agrees_with_the_last_look(tmp_path, abricot_file):
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n', encoding="utf-8")
    r = CliRunner().invoke(cli, [str(a) for a in (
        "run", "fake-as-llama", "--models", models, "--tasks", "abricot_abs", "--data", f"abricot={abricot_file}",
        "--n-ctx", 8192, "--until-settled", "--looks", "5,10", "--max-items", 10, "--out", tmp_path / "o")])
    assert r.exit_code == 0, r.output
    rule = json.loads((tmp_path / "o" / "results.json").read_text())["tasks"]["abricot_abs"]["sequential"]
    assert rule["planned"] == [5, 10] and len(rule["looks"]) == 2
    assert "look 2 of 2" in r.stdout and "next look" not in r.stdout
    # its last look read no interval (fewer than 10 items off a vector's commonest value, of 10): said with the count
    last = rule["looks"][-1]
    assert last["interval"] is None and "fewer than 10 items away from a vector's most common value" in last["note"]
    assert (f"not settled by --max-items 10, its last look: {last['question']}: no interval at 10 items "
            f"({last['note']}): more items help only if the answers vary; --max-items 20 plans a look at 20 items, "
            "and the run goes on to it") in r.stdout
