"""A real quant ladder: SmolLM2-135M (Q4_1) written by llama.cpp's quantizer as F16 (the reference,
--allow-requantize), Q8_0 and Q2_K; the models.toml fragment run by `run --quants`; the KLD of each
rung against the F16 in the order the bits say, and 0 for the F16 against itself; a signal mid-rung;
the disk estimate of Gemma's rungs; a second SOURCE of the same name into the same folder."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import FIXTURE

pytestmark = pytest.mark.real


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="session")
def rungs(smollm2_path, tmp_path_factory):
    """The rungs, written once per session."""
    from abricot_local.models.quantize import make_ladder

    lines = []
    ladder = make_ladder(str(smollm2_path), "Q8_0,Q2_K", out=str(tmp_path_factory.mktemp("rungs")),
                         allow_requantize=True, threads=2, notify=lines.append)
    return ladder, lines


def test_quantize_writes_rungs_a_fragment_and_keeps_whole_ones(rungs, smollm2_path):
    from abricot_local.models.quantize import make_ladder
    from abricot_local.models.registry import load_registry

    ladder, lines = rungs
    assert [r.quant for r in ladder.rungs] == ["F16", "Q8_0", "Q2_K"] and ladder.requantized
    assert [r.made_from for r in ladder.rungs] == ["Q4_1", "F16", "F16"]
    assert ladder.rungs[0].size > ladder.rungs[1].size > ladder.rungs[2].size
    assert any("F16 rung is written first" in x for x in lines)
    reg = load_registry(ladder.fragment)
    f16 = reg[ladder.alias("F16")]
    assert f16.quant == "F16" and f16.base == ladder.base and f16.sha256 == (ladder.rungs[0].sha256,)
    assert "Q4_1 function at 16 bits" in f16.notes
    again = make_ladder(str(smollm2_path), "Q2_K", out=str(ladder.fragment.parent), allow_requantize=True)
    assert all(r.kept for r in again.rungs) and again.rungs[-1].sha256 == ladder.rungs[2].sha256
    assert {s.quant for s in load_registry(ladder.fragment).values()} >= {"F16", "Q8_0", "Q2_K"}  # none forgotten


def test_kld_orders_the_rungs_and_is_zero_against_itself(rungs, tmp_path):
    ladder, _ = rungs
    out = tmp_path / "ladder"
    # 2 short items (ABRICOT at 0 shots: about 195 tokens each, DISCOTEX's first two are 414 and 459)
    r = invoke("run", ladder.alias("F16"), "--quants", "F16,Q8_0,Q2_K", "--models", ladder.fragment, "--tasks",
               "abricot_abs", "--data", f"abricot={FIXTURE}", "--shots", "0", "--limit", "2", "--threads", "2",
               "--out", out)
    assert r.exit_code == 0, r.output
    ref, q8, q2 = (out / ladder.alias(q) for q in ("F16", "Q8_0", "Q2_K"))
    r = invoke("kld", ref, q8, q2, "--threads", "2", "--json")
    assert r.exit_code == 0, r.output
    got = {x["quant"]: x["tasks"]["abricot_abs"] for x in json.loads(r.stdout)}
    assert 0 < got["Q8_0"]["mean"] < got["Q2_K"]["mean"] and got["Q8_0"]["same_top"] >= got["Q2_K"]["same_top"]
    assert got["Q8_0"]["n_tokens"] == got["Q2_K"]["n_tokens"] > 0
    # the F16 against a copy of its own run: the same model, the same decode calls: exactly 0
    import shutil

    shutil.copytree(ref, tmp_path / "f16-again")
    r = invoke("kld", ref, tmp_path / "f16-again", "--limit", "1", "--threads", "2", "--json")
    same = json.loads(r.stdout)[0]["tasks"]["abricot_abs"]
    assert got["Q8_0"]["n_tokens"] > same["n_tokens"] > 0  # 1 item of the 2
    assert same["mean"] == 0.0 and same["max"] == 0.0 and same["same_top"] == 1.0
    ladder_rows = json.loads(invoke("report", out, "--models", ladder.fragment, "--table", "quant", "--format",
                                    "json").stdout)["quant_ladder"]
    assert {x["quant"]: (x["kld"] or {}).get("mean") for x in ladder_rows}["Q2_K"] == got["Q2_K"]["mean"]


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_a_signal_mid_rung_leaves_no_partial_file_and_exits_130(smollm2_path, tmp_path, signum):
    """SIGTERM is handled as Ctrl-C: the rung being written is removed (llama.cpp's call is waited for
    a few seconds, then the process ends without it), exit 130, and the same command goes on."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "L"
    args = [sys.executable, "-m", "abricot_local", "quantize", str(smollm2_path), "--to", "Q8_0",
            "--allow-requantize", "--out", str(out), "--quant-threads", "1"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    deadline = time.monotonic() + 120
    while not list(out.glob(".*.gguf.*.tmp")) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, p.communicate()  # still writing the F16 rung
    p.send_signal(getattr(signal, signum))
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "quantize interrupted" in err or "did not return" in err, err
    assert not list(out.glob(".*.tmp")) and not list(out.glob("*.gguf")), sorted(os.listdir(out))


def test_gemmas_disk_estimate_counts_its_embeddings_at_their_fallback(gemma_path):
    """Gemma 3 270M's 262,144 x 640 embeddings (its output matrix too) are written at Q8_0 in every small
    quant (640 columns do not cut in Q6_K's 256-blocks): Q4_0's file is 241 MB (docs/compare.md), not
    the 173 MB 4.5 bits a weight would give."""
    from abricot_local.gguf.file import headers
    from abricot_local.models.quant_types import estimate

    info = headers(gemma_path)[0]
    for quant, written in (("Q4_0", 241_408_704), ("Q2_K", 237_077_184), ("Q8_0", 291_543_744), ("F16", 542_833_344)):
        assert written <= estimate(info.tensors, quant, info.data_offset) <= 1.25 * written, quant


def test_a_second_source_of_the_same_name_gets_a_base_of_its_own(rungs, tmp_path):
    """Another model's file named as SmolLM2's (and as quantized) into the same folder: none of its rungs
    is listed under SmolLM2's base, and none of SmolLM2's entries is dropped (runs last: it adds to the
    shared folder)."""
    from abricot_local.gguf.file import identity
    from abricot_local.models.quantize import make_ladder
    from abricot_local.models.registry import load_registry
    from tiny_llama import write_tiny

    ladder, _ = rungs
    before = {k: v.sha256 for k, v in load_registry(ladder.fragment).items()}
    tiny = make_ladder(str(write_tiny(tmp_path / "t-f16.gguf")), "Q4_1", out=str(tmp_path / "t")).rungs[0].path
    other = tiny.rename(tmp_path / ladder.source_path.name)  # SmolLM2-135M-Instruct.Q4_1.gguf, another model
    second = make_ladder(str(other), "Q8_0,Q2_K", out=str(ladder.fragment.parent), allow_requantize=True)
    assert second.base != ladder.base and second.base.startswith(ladder.base) and not any(r.kept for r in second.rungs)
    after = load_registry(ladder.fragment)
    assert before.items() <= {k: v.sha256 for k, v in after.items()}.items()

    for spec in after.values():
        if spec.base in (ladder.base, second.base):
            want = 49152 if spec.base == ladder.base else 300
            assert identity(ladder.fragment.parent / spec.path).n_tokens == want, spec.name
