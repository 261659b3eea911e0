"""Tiny Llama-architecture GGUFs (random F16 weights, a made-up vocabulary) that llama.cpp's own
quantizer writes at any type in milliseconds: for quantize's tests, where the point is the
quantizer and the folder, not a model's answers. Written with the `gguf` package."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_tiny(path: Path, *, n_embd: int = 256, n_ff: int = 512, n_layer: int = 1, n_vocab: int = 300,
               prefix: str = "t", arch: str = "llama", file_type: int = 1, seed: int = 0, experts: bool = False) -> Path:
    """A Llama model of ``n_layer`` blocks, tied embeddings (no output.weight), ``n_vocab`` tokens
    named ``prefix0``, ``prefix1``...; ``file_type`` is only what the header says (1: F16), the
    matrices are F16 whatever it says; ``experts``: one block's feed-forward as 2 stacked experts."""
    import gguf

    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny {prefix}")
    w.add_context_length(128)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(n_embd // 4)
    w.add_vocab_size(n_vocab)
    w.add_file_type(file_type)
    w.add_tokenizer_model("llama")
    w.add_token_list([f"{prefix}{i}" for i in range(n_vocab)])
    w.add_token_scores([0.0] * n_vocab)
    w.add_token_types([1] * n_vocab)
    rng = np.random.default_rng(seed)

    def tensor(name: str, shape: tuple[int, ...]) -> None:
        if len(shape) == 1:
            w.add_tensor(name, np.ones(shape, np.float32))
        else:
            w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float16))

    tensor("token_embd.weight", (n_vocab, n_embd))
    tensor("output_norm.weight", (n_embd,))
    for i in range(n_layer):
        b = f"blk.{i}."
        for name, shape in (("attn_norm.weight", (n_embd,)), ("attn_q.weight", (n_embd, n_embd)),
                            ("attn_k.weight", (n_embd, n_embd)), ("attn_v.weight", (n_embd, n_embd)),
                            ("attn_output.weight", (n_embd, n_embd)), ("ffn_norm.weight", (n_embd,))):
            tensor(b + name, shape)
        ffn = ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps") if experts else ("ffn_gate", "ffn_up", "ffn_down")
        lead = (2,) if experts else ()
        tensor(f"{b}{ffn[0]}.weight", (*lead, n_ff, n_embd))
        tensor(f"{b}{ffn[1]}.weight", (*lead, n_ff, n_embd))
        tensor(f"{b}{ffn[2]}.weight", (*lead, n_embd, n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
