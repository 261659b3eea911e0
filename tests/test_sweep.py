"""Several models in one `run`: one folder each under the sweep folder, a comparison table,
failures reported at the end while the others go on."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abricot_local.cli import cli


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_two_fake_models_into_one_sweep_folder(tmp_path, discotex_dir):
    root = tmp_path / "sweep"
    r = invoke("run", "fake-a", "fake-b", "--backend", "fake", "--tasks", "discotex", "--data-dir", discotex_dir,
               "--sample", "6", "--n-ctx", "8192", "--out", root)
    assert r.exit_code == 0, r.output
    for name in ("fake-a", "fake-b"):
        res = json.loads((root / name / "results.json").read_text())
        assert res["model"]["name"] == name and res["tasks"]["discotex"]["n"] == 6
    table = r.stdout[r.stdout.index("== comparison of 2 model(s)"):]
    assert "fake-a" in table and "fake-b" in table and "discotex.accuracy" in table
    assert max(map(len, table.splitlines())) <= 120
    # after the table, the pairwise verdicts (the fake scores the same prompts alike whatever its label)
    tail = table[table.index("Pairwise verdicts"):].replace("\n  ", " ").splitlines()
    assert tail[0] == f"Pairwise verdicts (details: abricot-local compare {root / 'fake-a'} {root / 'fake-b'})"
    assert tail[1:] == ["fake-a vs fake-b: identical (on these 6 common items, every log-prob bit-identical)"]
    again = invoke("run", "fake-a", "fake-b", "--backend", "fake", "--tasks", "discotex", "--data-dir", discotex_dir,
                   "--sample", "6", "--n-ctx", "8192", "--out", root, "--resume")
    assert again.exit_code == 0 and again.output.count("holds this run, complete: nothing to score") == 2


def test_a_failing_model_is_reported_and_the_others_go_on(tmp_path, discotex_dir):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf at all")
    models = tmp_path / "models.toml"
    models.write_text('[good]\nbackend = "fake"\n', encoding="utf-8")  # a model that runs, in the middle
    root = tmp_path / "sweep"
    r = invoke("run", bad, "good", tmp_path / "missing.gguf", "--models", models, "--tasks", "discotex",
               "--data-dir", discotex_dir, "--sample", "3", "--n-ctx", "8192", "--out", root)
    assert r.exit_code == 1
    assert (root / "good" / "results.json").exists()
    assert not (root / "broken" / "results.json").exists()
    tail = r.output[r.output.index("2 model(s) failed:"):]
    assert "broken.gguf" in tail and "missing.gguf" in tail and "not found" in tail
    assert "== comparison of 1 model(s)" in r.output and "Pairwise verdicts" not in r.output  # one run: no pair


def test_a_sweep_whose_runs_share_no_item_says_so(tmp_path, discotex_dir):
    """Runs of a sweep that share no item (the seed draws other items) get no verdict, and a line why."""
    from abricot_local.models.registry import load_registry
    from abricot_local.report.sweep import compared

    root = tmp_path / "sweep"
    for seed, name in ((1, "x"), (2, "y")):
        r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", discotex_dir,
                   "--sample", "3", "--seed", seed, "--n-ctx", "8192", "--out", root / name)
        assert r.exit_code == 0, r.output
    text = compared([root / "x", root / "y"], load_registry())
    line = text[text.index("\npairwise verdicts: none") + 1:]
    assert line.startswith("pairwise verdicts: none (runs fake (seed=1)") and "no common items" in line
