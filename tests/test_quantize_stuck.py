"""quantize stopped by a signal while llama.cpp's quantizer does not return (the process ends from the watchdog,
nothing unwinds) says what was kept and that the same command goes on, as a Ctrl-C that unwound says it, and leaves
the folder as that one does: the rungs written (models.toml lists them), no temporary file of the rung being written,
no ``.quantize.lock``; the same command then goes on from there. The stuck call is simulated (the watchdog's own
``_abandon`` called where llama.cpp would hang, ``os._exit`` caught); the rungs are tiny Llama GGUFs llama.cpp
writes in milliseconds (tests/tiny_llama.py)."""

from __future__ import annotations

import os
import signal

from click.testing import CliRunner

from abricot_local import backends
from abricot_local.backends.llama_cpp import interrupts
from abricot_local.cli import cli
from abricot_local.cli.quants import QUANTIZE_STOPPED
from tiny_llama import write_tiny


def test_a_quantize_ended_inside_llama_cpp_says_what_was_kept_and_leaves_no_lock(tmp_path, monkeypatch):
    source, out = write_tiny(tmp_path / "A" / "model-f16.gguf", n_vocab=300), tmp_path / "L"
    real, seen = backends.quantizer, {}

    def hanging(name=None):
        quantize = real(name) if name else real()

        def call(src, dst, quant, **kw):
            if quant != "Q4_0":
                return quantize(src, dst, quant, **kw)
            dst.write_bytes(b"\0" * 4096)  # what llama.cpp has written of the rung so far
            interrupts._abandon(signal.SIGTERM)  # the watchdog: the signal came, the call did not return

        return call

    def exit_now(code):  # os._exit: the folder as the process leaves it
        seen.update(code=code, left=sorted(p.name for p in out.iterdir()))
        raise SystemExit(code)

    monkeypatch.setattr(backends, "quantizer", hanging)
    monkeypatch.setattr(os, "_exit", exit_now)
    args = ["quantize", str(source), "--to", "Q8_0,Q4_0", "--out", str(out), "--quant-threads", "1"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == seen["code"] == 130, r.output
    assert QUANTIZE_STOPPED in r.stderr and "run the same command to go on" in QUANTIZE_STOPPED, r.stderr
    assert seen["left"] == ["model-q8_0.gguf", "models.toml"], seen  # no .quantize.lock, no temporary file
    monkeypatch.setattr(backends, "quantizer", real)
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0 and "temporary file" not in again.output, again.output
    assert sorted(p.name for p in out.iterdir()) == ["model-q4_0.gguf", "model-q8_0.gguf", "models.toml"]
