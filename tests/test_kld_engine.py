"""`kld` counts a row per token of the text, once, whatever engine scored the runs (engines.once): a run scored by
``single`` (its task's prefix decoded again for every item) or ``naive`` (each continuation from scratch) is measured
by ``prefix``, exact, which decodes each token once; its rows, tokens and KL are those of a ``prefix`` run's."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abricot_local.backends.engines import ENGINES, engine_class, once
from abricot_local.cli import cli
from invented_data import write_discotex


def test_every_engine_kld_runs_decodes_each_token_once():
    assert all(engine_class(once(name)).decodes_once for name in ENGINES)
    assert once("single") == once("naive") == "prefix" and once("batched") == "batched"


def test_kld_of_runs_scored_by_single_counts_what_prefix_counts(tmp_path):
    data = write_discotex(tmp_path / "d", 4)
    models = tmp_path / "models.toml"
    models.write_text("".join(f'[tiny-{k}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\nbase = "Tiny"\n\n'
                              for k, q in (("q8", "Q8_0"), ("q4", "Q4_K_M"))), encoding="utf-8")
    found = {}
    for engine in ("prefix", "single", "naive"):
        out = tmp_path / engine
        for model in ("tiny-q8", "tiny-q4"):
            r = CliRunner().invoke(cli, ["run", model, "--models", str(models), "--tasks", "discotex", "--data-dir",
                                         str(data), "--sample", "4", "--engine", engine, "--out", str(out / model)])
            assert r.exit_code == 0, r.output
        r = CliRunner().invoke(cli, ["kld", str(out / "tiny-q8"), str(out / "tiny-q4"), "--json"])
        assert r.exit_code == 0, r.output
        res = json.loads(r.stdout)[0]["tasks"]["discotex"]
        kept = json.loads((out / "tiny-q4" / "kld.json").read_text())["references"]
        assert [e["engine"] for e in kept.values()] == ["prefix"], kept
        found[engine] = (res["n_items"], res["n_tokens"])
    assert found["single"] == found["naive"] == found["prefix"] and found["prefix"][0] == 4, found
