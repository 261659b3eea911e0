"""What llama.cpp's quantizer does with each file type, known before it runs (no llama.cpp import):
the types it cannot write without an importance matrix (which `quantize` does not take), the type
that quantizes only a mixture-of-experts model's experts (MXFP4), the quant a SOURCE's tensors
hold, and the bytes a rung will take, tensor by tensor, with the tensors that fall back to a larger
type counted at that type (llama.cpp's llama-quant.cpp, as built in llama-cpp-python 0.3.36;
tests/test_quantize_types.py checks both lists and the estimate against the quantizer itself).
"""

from __future__ import annotations

import math
from typing import Sequence

from abricot_local.errors import UsageError
from abricot_local.gguf.check import TensorInfo

UNQUANTIZED = ("F32", "F16", "BF16")
# file types whose mixes hold a tensor type llama.cpp refuses to write without an importance matrix
# ("this quantization requires an importance matrix!": IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
# and Q2_K inside Q2_K_S)
NEEDS_IMATRIX = ("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "Q2_K_S")
# llama.cpp's MXFP4_MOE: expert tensors as MXFP4, every other one as Q8_0
EXPERTS_ONLY = {"MXFP4": "Q8_0"}
EXPERT_MARK = "_exps."  # llama.cpp's names of stacked expert tensors: blk.N.ffn_{up,down,gate}_exps.weight

# bits per weight of the bulk of a rung's tensors (a mix's average, over-counted: llama.cpp quantize
# --help), and the block its rows are cut in (columns not a multiple of it fall back)
_BPW = {"F32": 32, "F16": 16, "BF16": 16, "Q8_0": 8.5, "Q6_K": 6.5625, "Q5_K_M": 5.7, "Q5_K_S": 5.6, "Q5_0": 5.5,
        "Q5_1": 6, "Q4_K_M": 4.9, "Q4_K_S": 4.6, "Q4_0": 4.5, "Q4_1": 5, "Q3_K_L": 4.3, "Q3_K_M": 3.9,
        "Q3_K_S": 3.5, "Q2_K": 3.4, "IQ4_NL": 4.5, "IQ4_XS": 4.25, "IQ3_S": 3.5, "IQ3_M": 3.7, "TQ1_0": 1.69,
        "TQ2_0": 2.06, "MXFP4": 8.5}
_BLOCK_32 = {"Q8_0", "Q5_0", "Q5_1", "Q4_0", "Q4_1", "IQ4_NL", "MXFP4"}
_Q6_K, _Q8_0, _F16 = 6.5625, 8.5, 16.0
_MORE_BITS = ("attn_v.weight", "attn_qkv.weight", "ffn_down")  # a mix gives these more bits (up to Q6_K)
_MIXES = ("_K", "_K_S", "_K_M", "_K_L", "IQ3_S", "IQ3_M", "IQ4_XS")
_SLACK = 1.02  # the header's own rounding, per-tensor padding


def refuse_unwritable(quants: Sequence[str]) -> None:
    """Refuse, before anything is written, the file types llama.cpp writes only with an importance matrix."""
    bad = [q for q in quants if q in NEEDS_IMATRIX]
    if bad:
        raise UsageError(f"{', '.join(bad)} need{'s' if len(bad) == 1 else ''} an importance matrix (llama-imatrix), "
                         "which quantize does not take: llama.cpp refuses to write "
                         f"{'it' if len(bad) == 1 else 'them'} without one. Ask for IQ3_S, IQ4_XS, Q2_K or Q3_K_S "
                         "instead, or use llama.cpp's llama-quantize --imatrix")


def refuse_experts_only(quants: Sequence[str], tensors: Sequence[TensorInfo], label: str) -> None:
    """A type that quantizes only a mixture-of-experts model's experts, asked of a dense model, is
    refused: its file would hold another type, and be named as it is not."""
    if any(EXPERT_MARK in t.name for t in tensors):
        return
    for q in quants:
        if q in EXPERTS_ONLY:
            other = EXPERTS_ONLY[q]
            raise UsageError(f"{q} (llama.cpp's {q}_MOE) writes only a mixture-of-experts model's expert tensors as "
                             f"{q} and every other tensor as {other}; {label} has no expert tensors, so its file would "
                             f"hold {other} weights under the name {q}: ask for {other} instead")


def weights_quant(tensors: Sequence[TensorInfo]) -> tuple[str, bool]:
    """(the ggml type holding most weights of the file's matrices, whether any matrix is quantized):
    what the file holds, whatever its header or its name says."""
    counts: dict[str, int] = {}
    for t in tensors:
        if len(t.shape) >= 2:
            counts[t.type_name] = counts.get(t.type_name, 0) + math.prod(t.shape)
    if not counts:
        return "", False
    return max(counts, key=counts.get), any(name not in UNQUANTIZED for name in counts)


def estimate(tensors: Sequence[TensorInfo], quant: str, header: int) -> int:
    """Bytes of a rung of ``quant`` made from a file of these ``tensors`` (``header``: its header's
    bytes, copied): each matrix at the type llama.cpp will give it, over-counted. The output matrix
    (or the token embeddings, when they stand for it) is kept at Q6_K, or Q8_0 when its rows do not
    cut in 256-blocks; a mix's attention values and feed-forward down matrices count at Q6_K; a matrix whose rows do not cut in the type's blocks falls back to Q8_0, or F16
    when they do not cut in 32-blocks either; vectors stay F32."""
    bpw = _BPW.get(quant, _F16)
    block = 1 if quant in UNQUANTIZED else 32 if quant in _BLOCK_32 else 256
    names = {t.name for t in tensors}
    output = "output.weight" if "output.weight" in names else "token_embd.weight"
    total = header
    for t in tensors:
        n = math.prod(t.shape)
        if len(t.shape) < 2:
            total += 4 * n + 32
            continue
        cols, bits = t.shape[0], bpw
        if quant not in UNQUANTIZED:
            if t.name == output:
                bits = max(bits, _Q6_K if cols % 256 == 0 else _Q8_0)
            elif quant.endswith(_MIXES) and any(m in t.name for m in _MORE_BITS):
                bits = max(bits, _Q6_K)
            if cols % block:
                bits = max(bits, _Q8_0 if cols % 32 == 0 else _F16)
        total += math.ceil(n * bits / 8) + 32
    return int(total * _SLACK)
