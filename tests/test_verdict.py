"""The end of `run`: the published rows a registry entry reproduces, beside the run's values."""

from __future__ import annotations

import json
import math

from click.testing import CliRunner

from abricot_local import console
from abricot_local.record import Published
from abricot_local.cli import cli
from conftest import FIXTURE


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_a_model_without_published_rows_gets_one_line(tmp_path, discotex_dir):
    r = invoke("run", "fake", "--backend", "fake", "--data-dir", discotex_dir, "--tasks", "discotex", "--sample", "5",
               "--n-ctx", "8192", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    lines = [x for x in r.output.splitlines() if x.startswith("published comparison")]
    assert len(lines) == 1 and "names no published result" in lines[0]
    assert "chance" in r.output  # the summary shows each metric's chance level


def test_verdict_text_from_a_results_dict():
    res = {"published": {"reproduces": "ABRICOT paper: llama-3.1-8b", "tasks_not_run": ["abricot_inc"], "unknown": [],
                         "checks": [{"reference": "llama-3.1-8b", "source": "paper 3-shot", "task": "abricot_abs",
                                     "metric": "pearson", "published": 0.3, "value": 0.1, "ci95": [0.05, 0.2],
                                     "difference": -0.2, "inside": False, "notes": []}]}}
    text = console.verdict(Published.from_dict(res["published"]))
    assert "0.30" in text and "0.100" in text and "[0.050, 0.200]" in text and "-0.200" in text and "NO" in text
    assert "abricot_inc: published, but not run here" in text
    # a row made otherwise: not comparable, each difference named, and no answer on the CI
    other = {**res["published"]["checks"][0], "inside": None, "comparable": False, "protocol": "paper",
             "differences": ["shots 0, published 3"]}
    text = console.verdict(Published.from_dict({**res["published"], "checks": [other]}), "Q8_0")
    row = next(x for x in text.splitlines() if "abricot_abs.pearson" in x)
    assert row.rstrip().endswith("not comparable") and "NO" not in text
    assert "made otherwise: shots 0, published 3" in text and "this run Q8_0" in text


def test_an_entry_reproducing_the_paper_row(tmp_path):
    """A registry entry naming a published row (the fake backend under it: the verdict is what is tested)."""
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n', encoding="utf-8")
    r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}",
               "--tasks", "abricot", "--n-ctx", "8192", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    checks = {c["task"]: c for c in res["published"]["checks"]}
    assert set(checks) == {"abricot_abs", "abricot_inc"}
    for task, c in checks.items():
        assert c["published"] == 0.30 and c["reference"] == "llama-3.1-8b" and c["notes"] == []
        lo, hi = res["tasks"][task]["metrics"]["pearson_ci95"]
        assert json.dumps(c["ci95"]) == json.dumps([lo, hi])
        # a constant prediction on the 18 invented rows makes Pearson (and its CI) NaN: no verdict then
        assert c["inside"] == (None if math.isnan(lo) else lo <= 0.30 <= hi)
        assert json.dumps(c["value"]) == json.dumps(res["tasks"][task]["metrics"]["pearson"])
        row = next(x for x in r.output.splitlines() if f"{task}.pearson" in x and "llama-3.1-8b" in x)
        assert "0.30" in row and {True: "yes", False: "NO", None: "n/a"}[c["inside"]] in row
    r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}", "--tasks", "abricot_abs",
               "--shots", "0", "--n-ctx", "8192", "--out", tmp_path / "z")
    assert r.exit_code == 0, r.output
    assert "made otherwise: shots 0, published 3" in r.output
    assert "not comparable" in next(x for x in r.output.splitlines() if "abricot_abs.pearson" in x)
    assert "abricot_inc: published, but not run here" in r.output
