"""A model's cost facts in one place (run/model_facts.py): what a model not here is known by (`facts_of`: another
quant's header with its entry's own size, else its registry entry's or name's parameter count with its tokenizer
family's vocabulary), the band a speed scaled by estimated facts states (`widened`, through `Calibration.scaled`:
the dry run's `speed_for` and bench/estimated_facts.py the same call), and the memory estimated before its file is
here (`estimated_memory`, machine_cost's)."""

from __future__ import annotations

import json

from abricot_local import memory
from abricot_local.backends.fake import FakeBackend
from abricot_local.backends.llama_cpp.options import LlamaCppOptions
from abricot_local.backends.options import ScoringOptions
from abricot_local.models.spec import ModelSpec
from abricot_local.run import calibration, machine_cost, model_facts
from abricot_local.run.chars_per_token import MEASURED
from abricot_local.run.cost import SCALED_ERROR, Measured
from abricot_local.run.model_facts import ModelFacts, estimated_facts, estimated_memory, facts_of
from gguf_synth import Synth

GEMMA = ModelSpec("gemma", "hf", ("g.gguf",), size_approx="253 MB", params="270M", tokenizer="gemma3", base="G")
HEADER = ModelFacts(params=1e8, attention=18432.0, width=640.0, n_vocab=262144, bytes=253_000_000,
                    basis=model_facts.HEADER_BASIS, total_params=2.68e8)


def test_a_model_not_here_is_known_by_its_registry_entry_else_its_name():
    assert facts_of(GEMMA) == estimated_facts(2.7e8, 253_000_000, MEASURED["gemma3"][0],
                                              "its registry entry (270M, 0.25 GB)")
    unmeasured = ModelSpec("m", "hf", ("m.gguf",), params="7B", tokenizer="mistral-v3-spm")
    assert facts_of(unmeasured) == estimated_facts(7e9, None, None, "its registry entry (7B, size unknown)")
    assert facts_of(None, "someone/Tiny-1.5B-GGUF") == estimated_facts(
        1.5e9, None, None, "the parameters its name gives (someone/Tiny-1.5B-GGUF)")
    assert facts_of(ModelSpec("x", "hf", ("x.gguf",)), "x") is None and facts_of(None, "tiny") is None


def test_another_quant_here_gives_its_header_with_this_entrys_size(tmp_path):
    path = Synth().write(tmp_path / "other.gguf")
    other = ModelSpec("g-q4", "local", ("other.gguf",), params="270M", base="G")
    got = facts_of(GEMMA, "gemma", (other, path))
    head = model_facts.gguf_facts(path)
    assert got.bytes == 253_000_000 != head.bytes and got.params == head.params and got.from_header
    assert got.basis == "the GGUF header of g-q4, another quant of G that is here"


def test_the_dry_runs_scaled_speed_and_the_benchs_are_one_call(monkeypatch):
    settings = json.loads(json.dumps(FakeBackend.speed_settings(ScoringOptions())))
    measured = Measured(token_s=4e-3, prompt_tokens=256, call_s=5e-3, row_s=1e-3, load_s=2.0)
    cal = calibration.Calibration("g", "0" * 64, settings, calibration.host(), measured, HEADER, "now")
    monkeypatch.setattr(calibration, "load", lambda: [cal])
    guess = facts_of(ModelSpec("s", "hf", ("s.gguf",), size_approx="145 MB", params="135M", tokenizer="smollm"))
    scaled = calibration.speed_for("1" * 64, settings, guess)
    assert scaled == cal.scaled(guess) == model_facts.widened(lambda f: cal.speed(f, same=False), guess)
    assert scaled.error > SCALED_ERROR and "the width is not known until its file is here" in scaled.how
    kept = cal.scaled(HEADER)  # facts from a header: the scaled error alone
    assert kept.error == SCALED_ERROR and kept.error_below is None


def test_the_memory_estimated_before_the_file_is_here_is_machine_costs():
    opts = LlamaCppOptions(n_ctx=512)
    fit, basis = estimated_memory(GEMMA, opts.context_window)
    assert (fit.weights, fit.kv) == (253_000_000, memory.kv_estimate(2.7e8, 253_000_000, opts.context_window))
    assert basis == "its KV cache estimated from its 270M parameters (within 2x)"
    assert machine_cost._memory(None, GEMMA, None, opts) == (fit, basis)
    assert estimated_memory(ModelSpec("x", "hf", ("x.gguf",), params="7B"), 512) == (None, "")
