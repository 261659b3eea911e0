"""Llama-architecture GGUFs with random weights, shaped like real models: for measuring time
and memory at scale on a machine that has no such model (bench/scale.py).

Each shape uses the real model's own tokenizer (a vocabulary-only GGUF of llama.cpp's
models/ folder: llama_src.vocab_file), is written as F16 one tensor at a time
(write_random_gguf), quantized with llama.cpp's own quantizer (llama_model_quantize) and
kept in ``<abricot cache>/bench-models/``; the F16 file is deleted. Their outputs are
meaningless.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from abricot_local.models import fetch

Q4_K_M = 15  # llama_ftype LLAMA_FTYPE_MOSTLY_Q4_K_M
F16 = 1  # LLAMA_FTYPE_MOSTLY_F16


@dataclass(frozen=True)
class Shape:
    """A Llama-architecture model's hyperparameters (as in its GGUF metadata)."""

    name: str
    like: str  # the real model whose shape this is
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    tied: bool  # output projection shared with the token embeddings
    vocab: str  # the vocabulary-only GGUF whose tokenizer it uses
    rope_base: float

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


BPE, SPM = "ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf"
SHAPES = {
    "1b": Shape("random-1b", "Llama-3.2-1B", 128256, 2048, 16, 32, 8, 8192, True, BPE, 500000.0),
    "3b": Shape("random-3b", "Llama-3.2-3B", 128256, 3072, 28, 24, 8, 8192, True, BPE, 500000.0),
    "7b": Shape("random-7b", "Mistral-7B-v0.1", 32000, 4096, 32, 32, 8, 14336, False, SPM, 10000.0),
}


def tensor_shapes(s: Shape) -> list[tuple[str, tuple[int, ...]]]:
    """llama.cpp's tensors of a Llama model, as numpy shapes (rows = outputs)."""
    q, kv = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    out = [("token_embd.weight", (s.n_vocab, s.n_embd)), ("output_norm.weight", (s.n_embd,))]
    if not s.tied:
        out.append(("output.weight", (s.n_vocab, s.n_embd)))
    for i in range(s.n_layer):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (s.n_embd,)), (b + "attn_q.weight", (q, s.n_embd)),
                (b + "attn_k.weight", (kv, s.n_embd)), (b + "attn_v.weight", (kv, s.n_embd)),
                (b + "attn_output.weight", (s.n_embd, q)), (b + "ffn_norm.weight", (s.n_embd,)),
                (b + "ffn_gate.weight", (s.n_ff, s.n_embd)), (b + "ffn_up.weight", (s.n_ff, s.n_embd)),
                (b + "ffn_down.weight", (s.n_embd, s.n_ff))]
    return out


def n_params(s: Shape) -> int:
    return sum(int(np.prod(shape)) for _, shape in tensor_shapes(s))


def write_random_gguf(s: Shape, vocab: Path, out: Path, seed: int = 0) -> None:
    """An F16 GGUF of shape ``s`` with ``vocab``'s tokenizer and random weights (N(0, 0.02),
    norms 1), written one tensor at a time: memory stays at about the largest tensor."""
    import gguf

    reader = gguf.GGUFReader(vocab)
    n_tokens = len(reader.fields["tokenizer.ggml.tokens"].data)
    if n_tokens != s.n_vocab:
        raise SystemExit(f"{vocab.name} has {n_tokens} tokens, the {s.like} shape {s.n_vocab}")
    w = gguf.GGUFWriter(out, "llama")
    w.add_name(f"{s.name} (random weights, shaped like {s.like})")
    w.add_context_length(4096)
    w.add_embedding_length(s.n_embd)
    w.add_block_count(s.n_layer)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(s.rope_base)
    w.add_rope_dimension_count(s.head_dim)
    w.add_vocab_size(s.n_vocab)
    w.add_file_type(F16)
    for key, field in reader.fields.items():  # the tokenizer, as the vocabulary file has it
        if key.startswith("tokenizer."):
            sub = field.types[1] if len(field.types) > 1 else None
            w.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    if "tokenizer.ggml.add_bos_token" not in reader.fields:
        w.add_add_bos_token(True)  # as Llama 3's own GGUFs say
    shapes = tensor_shapes(s)
    for name, shape in shapes:
        dtype = np.float32 if len(shape) == 1 else np.float16
        w.add_tensor_info(name, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    pool = (rng.standard_normal(1 << 22, dtype=np.float32) * 0.02).astype(np.float16)  # tiled, shifted per tensor
    for name, shape in shapes:
        if len(shape) == 1:
            w.write_tensor_data(np.ones(shape, np.float32))
        else:
            w.write_tensor_data(np.resize(np.roll(pool, int(rng.integers(len(pool)))), shape))
    w.close()


def quantize(src: Path, dst: Path, threads: int) -> None:
    """llama.cpp's own quantizer (llama_model_quantize) to Q4_K_M."""
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = threads
    params.ftype = Q4_K_M
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize failed ({rc}) on {src}")


def random_model(s: Shape, threads: int, log=print) -> Path:
    """The Q4_K_M random-weight model of shape ``s``, built once into the user cache."""
    from llama_src import vocab_file

    folder = fetch.cache_dir() / "bench-models"
    out = folder / f"{s.name}-Q4_K_M.gguf"
    if out.is_file():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    f16, part = out.with_name(f"{s.name}-F16.gguf.part"), out.with_name(out.name + ".part")
    need = n_params(s) * 2 + n_params(s) * 0.6  # F16 + Q4_K_M (about 4.8 bits a weight) at once
    free = shutil.disk_usage(folder).free
    if need > free:
        raise SystemExit(f"building {s.name} needs about {need / 2**30:.1f} GiB on {folder}, {free / 2**30:.1f} GiB free")
    try:
        t0 = time.perf_counter()
        write_random_gguf(s, vocab_file(s.vocab, log=log), f16)
        log(f"{s.name}: F16 written ({f16.stat().st_size / 2**30:.1f} GiB, {time.perf_counter() - t0:.0f} s); quantizing")
        t0 = time.perf_counter()
        quantize(f16, part, threads)
        os.replace(part, out)
        log(f"{s.name}: Q4_K_M {out.stat().st_size / 2**30:.2f} GiB ({time.perf_counter() - t0:.0f} s)")
    finally:
        f16.unlink(missing_ok=True)
        part.unlink(missing_ok=True)
    return out


def gguf_params(model: Path) -> int:
    """Parameters of a GGUF (its tensors' elements), from its header (abricot_local.gguf.check: the token array
    skipped, where the gguf package's reader parses each of its tokens)."""
    from abricot_local.gguf.check import read_header

    return sum(int(np.prod(t.shape, dtype=np.int64)) for t in read_header(model).tensors)
