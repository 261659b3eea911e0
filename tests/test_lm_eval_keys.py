"""The provenance keys only lm-eval's door records are named once (analysis/lm_eval_input.py LM_EVAL_PROVENANCE):
the door's writer (lm_eval/requests.py open_model) and the lm-eval output's reader add no key beyond them, and
differing.py's LM_EVAL_ONLY is made from them, so a key a writer adds is never said as a difference of settings."""

from __future__ import annotations

from abricot_local.analysis import lm_eval_input
from abricot_local.analysis.differing import LM_EVAL_ONLY, lm_eval_only
from abricot_local.analysis.lm_eval_input import LM_EVAL_PROVENANCE, REQUESTS
from abricot_local.lm_eval import requests as requests_
from abricot_local.run.record import provenance


def test_the_lm_eval_doors_writer_adds_only_keys_differing_knows(isolated_home):
    opened = requests_.open_model({"model": "fake", "backend": "fake", "n_ctx": 64})
    try:
        door = set(opened.provenance)
        run = set(provenance(opened.backend).to_dict())  # what `run` records of the same backend
    finally:
        opened.backend.close()
    added = door - run - {"model", "config"}  # model, config: read back as the run's model and config
    assert REQUESTS in added and added <= set(LM_EVAL_PROVENANCE), added - set(LM_EVAL_PROVENANCE)
    assert all(lm_eval_only(f"provenance.{key}.version") for key in added)


def test_the_lm_eval_outputs_reader_adds_only_keys_differing_knows():
    doc = {"lm_eval_version": "0.4.13", "model_name": "m"}
    config = {"model": "hf", "model_args": "pretrained=m", "limit": 4.0, "batch_size": 1}
    _, _, prov, _ = lm_eval_input._identity(doc, config, ("abricot_mc",), 1234, {})
    read = {k for k, v in prov.extra.items() if v is not None}
    assert read and read <= set(LM_EVAL_PROVENANCE), read - set(LM_EVAL_PROVENANCE)
    assert LM_EVAL_ONLY == tuple(f"provenance.{key}" for key in LM_EVAL_PROVENANCE)
    assert all(lm_eval_only(f"provenance.{key}") for key in read)
