"""A synthetic registry entry (`backend = "fake"` with `reproduces`) runs the published comparison as any entry does
(its record keeps every verdict: what the verdict tests exercise), but the run says its numbers are no model's: the
block is headed so, each row's verdict marked "(synthetic)", an --until-settled verdict too; a run with no published
comparison says why as far as it is true (a label of a backend that reads no model file; no registry entry naming
published rows)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from abricot_local import console
from abricot_local.analysis.reproduction import words
from abricot_local.cli import cli
from abricot_local.record import read_run
from conftest import FIXTURE


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_a_synthetic_entry_shows_the_comparison_as_made_on_synthetic_numbers(tmp_path):
    models = tmp_path / "models.toml"
    models.write_text('[uni]\nbackend = "fake"\nreproduces = "ABRICOT paper: mistral-7b"\n', encoding="utf-8")
    r = invoke("run", "uni", "--models", models, "--tasks", "abricot_abs", "--data", f"abricot={FIXTURE}",
               "--n-ctx", 8192, "--until-settled", "--looks", "5,10", "--max-items", 10, "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    record = read_run(tmp_path / "o")
    (check,) = record.published.checks  # the verdict machinery ran: the record keeps its verdict
    assert check.verdict is not None and check.reference == "mistral-7b"
    lines = r.stdout.splitlines()
    (head,) = [x for x in lines if x.startswith("published comparison")]
    assert head.startswith("published comparison (ABRICOT paper: mistral-7b") and "not a model's" in head
    assert "backend fake reads no model file" in head
    (row,) = [x for x in lines if x.strip().startswith("mistral-7b abricot_abs.pearson")]  # the table's row
    assert row.endswith(f"  (synthetic) {words(check)}"), row
    # the --until-settled verdict on the published row: marked too, its own lines kept as they are
    block = r.stdout[r.stdout.index("verdict (--until-settled"):]
    assert "(synthetic) numbers of a backend that is synthetic, not a model's" in block, block
    # the same record shown as a model's run (no rows unheld): no mark, the words as they are
    shown = console.verdict(record.published, backend="llama.cpp")
    assert "(synthetic)" not in shown and "not a model's" not in shown and words(check) in shown
    assert json.loads((tmp_path / "o" / "results.json").read_text())["provenance"]["synthetic"] is True


def test_a_plan_holds_a_synthetic_entry_to_no_published_row_and_a_model_file_to_its_own(tmp_path):
    from abricot_local.backends.options import ScoringOptions
    from abricot_local.models.ref import Located, ModelRef
    from abricot_local.models.registry import load_registry
    from abricot_local.run.plan import Plan

    models = tmp_path / "models.toml"
    models.write_text('[uni]\nbackend = "fake"\nreproduces = "ABRICOT paper: mistral-7b"\n', encoding="utf-8")
    spec = load_registry(models)["uni"]

    def plan(source: str, path: Path | None) -> Plan:
        ref = ModelRef("uni", source, "fake", "uni", spec=spec, path=path)
        return Plan(Located("uni", "fake", ref, spec), ref, "fake", ScoringOptions(), None, (), {}, None, False)

    assert plan("synthetic", None).unheld == plan("synthetic", None).reproduces == "ABRICOT paper: mistral-7b"
    assert plan("path", tmp_path / "m.gguf").unheld == ""  # a model file's run is held to its entry's rows


def test_a_run_with_no_published_comparison_says_what_is_true(tmp_path, discotex_dir):
    r = invoke("run", "x", "--backend", "fake", "--data-dir", discotex_dir, "--tasks", "discotex", "--sample", 3,
               "--n-ctx", 8192, "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    (line,) = [x for x in r.output.splitlines() if x.startswith("published comparison")]
    assert "this model's registry entry" not in line
    assert "backend 'fake' reads no model file, so the model it scored is a label, not a model file" in line
    said = console.verdict(None, backend="llama.cpp")  # a path, a store's model: no entry that names a result
    assert "no registry entry names published rows for this run's model" in said and "label" not in said
