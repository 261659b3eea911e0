"""What llama.cpp's quantizer does with each file type, known before it runs (no llama.cpp import):
the types it cannot write without an importance matrix (which `quantize` does not take), the type
that quantizes only a mixture-of-experts model's experts (MXFP4), the quant a SOURCE's tensors
hold, and the bytes a rung will take: each tensor at the type llama.cpp's quantizer gives it (its file
type's mix, then its fallback where the rows do not cut in the type's blocks), as llama.cpp's
llama-quant.cpp does it, as built in llama-cpp-python 0.3.36 (tests/test_quant_sizes.py checks the
types and the bytes against files the quantizer wrote; tests/test_quantize.py the lists).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

from abricot_local.errors import UsageError
from abricot_local.gguf.check import GGML_TYPES, TensorInfo

UNQUANTIZED = ("F32", "F16", "BF16")
# file types whose mixes hold a tensor type llama.cpp refuses to write without an importance matrix
# ("this quantization requires an importance matrix!": IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
# and Q2_K inside Q2_K_S)
NEEDS_IMATRIX = ("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "Q2_K_S")
# llama.cpp's MXFP4_MOE: expert tensors as MXFP4, every other one as Q8_0
EXPERTS_ONLY = {"MXFP4": "Q8_0"}
EXPERT_MARK = "_exps."  # llama.cpp's names of stacked expert tensors: blk.N.ffn_{up,down,gate}_exps.weight

# llama.cpp's llama-quant.cpp, as built in llama-cpp-python 0.3.36 (:func:`tensor_types` follows it):
# llama_ftype_get_default_type, the ggml type a file type gives a matrix before its mix's rules
_DEFAULT = {"F32": "F32", "F16": "F16", "BF16": "BF16", "Q4_0": "Q4_0", "Q4_1": "Q4_1", "Q5_0": "Q5_0",
            "Q5_1": "Q5_1", "Q8_0": "Q8_0", "MXFP4": "MXFP4", "Q2_K": "Q2_K", "Q3_K_S": "Q3_K", "Q3_K_M": "Q3_K",
            "Q3_K_L": "Q3_K", "Q4_K_S": "Q4_K", "Q4_K_M": "Q4_K", "Q5_K_S": "Q5_K", "Q5_K_M": "Q5_K", "Q6_K": "Q6_K",
            "TQ1_0": "TQ1_0", "TQ2_0": "TQ2_0", "IQ4_NL": "IQ4_NL", "IQ4_XS": "IQ4_XS", "IQ3_S": "IQ3_S",
            "IQ3_M": "IQ3_S"}
# tensor_type_fallback: a matrix whose rows do not cut in its type's blocks gets this type instead ("q4_K ->
# q5_0"); a type not here, or a fallback whose blocks do not cut the rows either, gives F16
_FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "TQ1_0": "Q4_0", "TQ2_0": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1",
             "Q6_K": "Q8_0", "IQ3_S": "IQ4_NL", "IQ4_XS": "IQ4_NL"}
# tensor_allows_quantization: the matrices (names ending in "weight") a quantizer leaves at their type
_NOT_QUANTIZED = ("_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
                  "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
                  "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
                  "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
                  "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
                  "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
                  "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.",
                  "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd")
_NOT_QUANTIZED_NAMES = ("position_embd.weight", "token_types.weight")
# tensor_get_category: the first of these a matrix's name holds (attn_qkv and attn_kv_b count as attn_v)
_CATEGORIES = (("attn_qkv.weight", "attn_v"), ("attn_kv_b.weight", "attn_v"), ("attn_v.weight", "attn_v"),
               ("attn_k.weight", "attn_k"), ("attn_q.weight", "attn_q"), ("attn_output.weight", "attn_output"),
               ("ffn_up", "ffn_up"), ("ffn_gate", "ffn_gate"), ("ffn_down", "ffn_down"))
_BLOCKS = {name: (block, size) for name, block, size in GGML_TYPES.values()}  # name -> (elements, bytes) per block
_HEADER_MORE = 4096  # the keys llama.cpp adds to the header (general.quantization_version, general.file_type), padded


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


def tensor_types(tensors: Sequence[TensorInfo], quant: str, meta: dict | None = None) -> dict[str, str]:
    """The ggml type llama.cpp's quantizer gives each tensor (by name) of a file of these ``tensors`` written as
    ``quant``: a matrix it quantizes gets its file type's default type, changed by the mix's rules for its role
    (llama_tensor_get_type_impl), then the fallback where its rows do not cut in that type's blocks
    (tensor_type_fallback); every other tensor keeps its type. ``meta``: the file's header (architecture, block,
    head and expert counts), counted from the tensors where it does not say. The tensors are taken in
    llama.cpp's order (by block, then by name): the mixes count the attention-value and feed-forward matrices.
    ``quant``: a type quantize.parse_rungs accepts (the types it writes: :data:`_DEFAULT`'s)."""
    default = _DEFAULT[quant]
    model = _model(tensors, meta or {})
    seen = {"attn_v": 0, "ffn_down": 0, "n_attn_v": sum(_category(t.name) == "attn_v" for t in tensors)}
    types = {}
    for t in sorted(tensors, key=lambda t: (_layer(t.name), t.name)):
        if not _quantized_by_llama(t):
            types[t.name] = t.type_name
        elif default in UNQUANTIZED:
            types[t.name] = default
        else:
            types[t.name] = _fallback(_mixed(quant, default, t, model, seen), t.shape[0])
    return types


def estimate(tensors: Sequence[TensorInfo], quant: str, header: int, meta: dict | None = None) -> int:
    """Bytes of a rung of ``quant`` made from a file of these ``tensors`` (``header``: its header's bytes,
    ``meta`` what it says): each tensor at the type llama.cpp gives it (:func:`tensor_types`), its rows at that
    type's bytes, padded to 32 bytes as llama.cpp writes them, and the header with the keys llama.cpp adds."""
    types = tensor_types(tensors, quant, meta)
    total = header + _HEADER_MORE
    for t in tensors:
        kind = types[t.name]
        if kind == t.type_name:
            size = t.nbytes
        else:
            block, block_bytes = _BLOCKS[kind]
            size = t.shape[0] // block * block_bytes * math.prod(t.shape[1:])
        total += -(-size // 32) * 32
    return total


@dataclass(frozen=True)
class _Model:
    """What llama.cpp's mixes ask of a model: its architecture, blocks, query heads per key-value head (4, the
    larger types' side, when neither the header nor the shapes say), experts, and whether its token embeddings
    stand for its output matrix (no output.weight)."""

    arch: str
    n_layer: int
    n_gqa: int
    n_expert: int
    tied: bool
    llama_70b: bool


def _model(tensors: Sequence[TensorInfo], meta: dict) -> _Model:
    arch = str(meta.get("general.architecture") or "")
    shapes = {t.name: t.shape for t in tensors}
    layers = [_layer(name) for name in shapes]
    n_layer = _count(meta.get(f"{arch}.block_count")) or max(layers) + 1
    n_head = _count(meta.get(f"{arch}.attention.head_count"))
    n_kv = _count(meta.get(f"{arch}.attention.head_count_kv")) or n_head
    q, k = shapes.get("blk.0.attn_q.weight"), shapes.get("blk.0.attn_k.weight")
    if not n_head and q and k and len(q) > 1 and len(k) > 1:
        n_head, n_kv = q[1], k[1]  # the same head size: rows of the queries over rows of the keys
    n_gqa = n_head // n_kv if n_head and n_kv else 4
    experts = [t.shape[2] for t in tensors if EXPERT_MARK in t.name and len(t.shape) > 2]
    n_expert = _count(meta.get(f"{arch}.expert_count")) or max(experts, default=0)
    return _Model(arch, n_layer, n_gqa, n_expert, "output.weight" not in shapes,
                  arch == "llama" and n_layer == 80 and n_gqa > 1)


def _count(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _layer(name: str) -> int:
    """The block a tensor belongs to ("blk.N."), -1 for none: llama.cpp's order puts those first."""
    found = re.match(r"blk\.([+-]?\d+)", name)
    return int(found.group(1)) if found else -1


def _category(name: str) -> str:
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    return next((category for mark, category in _CATEGORIES if mark in name), "other")


def _quantized_by_llama(t: TensorInfo) -> bool:
    """llama.cpp's tensor_allows_quantization: a matrix (two dimensions or more, trailing 1s aside) whose name
    ends in "weight", but not a norm, a router, a position embedding and the other small ones it keeps."""
    dims = len(t.shape)
    while dims > 1 and t.shape[dims - 1] == 1:
        dims -= 1
    return (dims >= 2 and t.name.endswith("weight") and t.name not in _NOT_QUANTIZED_NAMES
            and not any(mark in t.name for mark in _NOT_QUANTIZED))


def _more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _mixed(quant: str, kind: str, t: TensorInfo, m: _Model, seen: dict) -> str:
    """llama_tensor_get_type_impl for the file types quantize writes: the type the mix of ``quant`` gives a
    matrix whose default type is ``kind``; ``seen`` counts the attention-value and feed-forward-down matrices
    met so far (llama.cpp's i_attention_wv, i_ffn_down)."""
    category = _category(t.name)
    if category == "output" or (m.tied and category == "token_embd"):
        if quant == "MXFP4" or m.arch == "falcon" or t.shape[0] % _BLOCKS[kind][0]:
            return "Q8_0"
        return kind if kind == "Q8_0" else "Q6_K"
    if quant == "MXFP4":
        expert = m.arch != "bailingmoe3" or category in ("ffn_up", "ffn_gate", "ffn_down")
        return "MXFP4" if len(t.shape) > 2 and t.shape[2] > 1 and expert else "Q8_0"
    if category == "token_embd":
        return "Q4_K" if quant in ("TQ1_0", "TQ2_0") else kind
    if category == "attn_v":
        kind = _attn_v(quant, kind, seen["attn_v"], seen["n_attn_v"], m)
        seen["attn_v"] += 1
        return kind
    if category == "attn_k" and m.n_expert == 8:
        return "Q8_0"
    if category == "ffn_down":
        i, n = seen["ffn_down"], m.n_layer
        if m.n_expert > 1:
            i = _layer(t.name)
        seen["ffn_down"] += 1
        return _ffn_down(quant, kind, i, n, m)
    if category == "attn_output" and m.arch != "falcon" and m.n_expert == 8:
        return "Q5_K" if quant in ("Q2_K", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S", "IQ3_M",
                                   "IQ4_XS") else kind
    if category == "attn_output" and m.arch != "falcon":
        return {"Q2_K": "Q3_K", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K", "IQ3_M": "Q4_K"}.get(quant, kind)
    if category == "attn_output":
        return "Q4_K" if quant == "Q3_K_L" else kind
    return kind


def _attn_v(quant: str, kind: str, i: int, n: int, m: _Model) -> str:
    if quant == "Q2_K":
        kind = "Q4_K" if m.n_gqa >= 4 else "Q3_K"
    elif quant == "IQ3_S" and m.n_gqa >= 4 or quant == "IQ3_M":
        kind = "Q4_K"
    elif quant == "Q3_K_M":
        kind = "Q5_K" if i < 2 else "Q4_K"
    elif quant == "Q3_K_L":
        kind = "Q5_K"
    elif quant in ("IQ4_NL", "IQ4_XS") and m.n_gqa >= 4:
        kind = "Q5_K"
    elif quant in ("Q4_K_M", "Q5_K_M") and _more_bits(i, n):
        kind = "Q6_K"
    elif quant == "Q4_K_S" and i < 4:
        kind = "Q5_K"
    if m.llama_70b and kind in ("Q3_K", "Q4_K"):
        kind = "Q5_K"
    return "Q8_0" if m.n_expert == 8 else kind


def _ffn_down(quant: str, kind: str, i: int, n: int, m: _Model) -> str:
    falcon = m.arch == "falcon"
    if quant == "Q2_K":
        return "Q3_K"
    if quant == "Q3_K_M":
        return "Q5_K" if i < n // 16 else "Q4_K" if not falcon or _more_bits(i, n) else "Q3_K"
    if quant == "IQ3_M" and (i < n // 8 or m.n_expert == 8 and _more_bits(i, n)):
        return "Q4_K"
    if quant == "Q3_K_L":
        return "Q4_K" if falcon else "Q5_K"
    if quant == "Q4_K_M" and falcon:
        return "Q6_K" if i < n // 16 else "Q5_K" if _more_bits(i, n) else "Q4_K"
    if quant == "Q4_K_M":
        return "Q6_K" if _more_bits(i, n) else kind
    if quant in ("IQ4_NL", "IQ4_XS") and i < n // 8:
        return "Q5_K"
    if quant == "Q5_K_M" and _more_bits(i, n):
        return "Q6_K"
    if quant == "Q4_K_S" and not falcon and i < n // 8:
        return "Q5_K"
    return kind


def _fallback(kind: str, cols: int) -> str:
    """llama.cpp's tensor_type_fallback: ``kind``, or what it writes when rows of ``cols`` do not cut in its blocks."""
    if cols % _BLOCKS[kind][0] == 0:
        return kind
    other = _FALLBACK.get(kind, kind)
    return other if cols % _BLOCKS[other][0] == 0 else "F16"
