"""llama.cpp backend (llama-cpp-python's low-level API). The only module importing llama_cpp.

It never asks for logits of every position: each decode call requests output
rows only where the schedule needs a next-token distribution. The batched
engine's orchestration lives in batched.py, on the primitives here.
"""

from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass, field
from importlib.metadata import version as pkg_version
from pathlib import Path

import llama_cpp
import numpy as np

from abricot_local.backends import batched, rpc
from abricot_local.backends.base import (
    CHAT_MARK,
    ENGINES,
    SCHEDULE_VERSION,
    BackendOptions,
    Request,
    Schedule,
    Scored,
    chunks,
    log_softmax,
    resolved_parallel,
    schedule,
    split_chat,
)
from abricot_local.errors import ModelError, UsageError
from abricot_local.fetch import check_gguf

FLASH_ATTN = {
    "auto": llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO,
    "on": llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "off": llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}


def resolved_gpu_layers(o: BackendOptions) -> int:
    """-1 means every layer when this llama.cpp build can offload, else none."""
    if o.n_gpu_layers >= 0:
        return o.n_gpu_layers
    return 999 if llama_cpp.llama_supports_gpu_offload() else 0


class _Log:
    """llama.cpp log sink: keeps the last lines for error messages, prints only when verbose."""

    def __init__(self) -> None:
        self.verbose = False
        self.lines: list[str] = []
        self._cb = llama_cpp.llama_log_callback(self._on_log)  # keep a reference
        llama_cpp.llama_log_set(self._cb, ctypes.c_void_p(0))

    def _on_log(self, level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        msg = text.decode("utf-8", "replace")
        self.lines = (self.lines + [msg])[-40:]
        if self.verbose:
            os.write(2, text)

    def reason(self) -> str:
        errs = [ln.strip() for ln in self.lines if "error" in ln.lower() or "failed" in ln.lower()]
        return "; ".join(errs[-3:]) or "llama.cpp gave no reason"


_LOG: _Log | None = None


def _log() -> _Log:
    global _LOG
    if _LOG is None:
        llama_cpp.llama_backend_init()
        _LOG = _Log()
    return _LOG


@dataclass
class _Counters:
    decode_calls: int = 0
    tokens: int = 0
    requests: int = 0
    prefix_hits: int = 0
    extra: dict = field(default_factory=dict)


class LlamaCppBackend:
    """Scores requests with llama.cpp, following the canonical schedule of base.py."""

    name = "llama.cpp"

    def __init__(self, model_path: str | Path, options: BackendOptions = BackendOptions()):
        if options.engine not in ENGINES:
            raise UsageError(f"unknown engine {options.engine!r}; choose from {', '.join(ENGINES)}")
        if options.flash_attn not in FLASH_ATTN:
            raise UsageError(f"--flash-attn must be one of {', '.join(FLASH_ATTN)}")
        self.path = Path(model_path)
        self.options = options
        self.parallel = resolved_parallel(options)  # validates --parallel; 1 unless batched
        self.counters = _Counters()
        check_gguf(self.path)  # a clear message for what llama.cpp would fail on obscurely
        log = _log()
        log.verbose = options.verbose
        log.lines = []
        self._model = self._load_model(log)
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        self.bos = llama_cpp.llama_vocab_bos(self._vocab)
        self._ctx = None
        self._batch = None
        self._kv_prefix: tuple[int, ...] | None = None  # tokens [0, P) held in the KV cache
        if not options.vocab_only:
            self._ctx = self._new_context(log)
            self._mem = llama_cpp.llama_get_memory(self._ctx)
            self._batch = llama_cpp.llama_batch_init(options.n_batch, 0, 1)

    # -- loading ---------------------------------------------------------------------------
    def _load_model(self, log: _Log):
        o = self.options
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0 if o.vocab_only else resolved_gpu_layers(o)
        params.main_gpu = o.main_gpu
        params.vocab_only = o.vocab_only
        params.use_extra_bufts = o.repack
        split = o.tensor_split
        self._offload = None
        if (o.rpc or rpc.registered()) and not o.vocab_only:  # RPC: an explicit device list and split
            self._offload = rpc.offload(o.rpc, o.tensor_split)
            self._devices = self._offload.device_array()  # keep alive
            params.devices = ctypes.cast(self._devices, ctypes.c_void_p)
            split = self._offload.tensor_split
        if split:
            arr = (ctypes.c_float * llama_cpp.LLAMA_MAX_DEVICES)(*split)
            self._tensor_split = arr  # keep alive
            params.tensor_split = arr
        model = llama_cpp.llama_model_load_from_file(str(self.path).encode("utf-8"), params)
        if not model:
            raise ModelError(
                f"llama.cpp could not load {self.path} (truncated or unsupported GGUF?): {log.reason()}"
            )
        return model

    def _new_context(self, log: _Log):
        o = self.options
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = o.n_ctx
        params.n_batch = o.n_batch
        params.n_ubatch = o.n_batch
        # batched: sequence 0 holds the prefix, 1..parallel the items, in one unified KV cache of
        # n_ctx cells; the other engines keep exactly the one-sequence context they always had.
        params.n_seq_max = self.parallel + 1 if o.engine == "batched" else 1
        if o.engine == "batched":
            params.kv_unified = True
        threads = o.threads or max(1, os.cpu_count() or 1)
        params.n_threads = threads
        params.n_threads_batch = threads
        params.flash_attn_type = FLASH_ATTN[o.flash_attn]
        params.swa_full = True  # sliding-window models (Gemma 3) keep every cell, so rewinds are exact
        params.no_perf = True
        ctx = llama_cpp.llama_init_from_model(self._model, params)
        if not ctx:
            raise ModelError(
                f"llama.cpp could not create a context of {o.n_ctx} tokens for {self.path}: {log.reason()}"
            )
        return ctx

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
        if self._model is not None:
            llama_cpp.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass

    # -- tokens ----------------------------------------------------------------------------
    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Tokens of ``text``, BOS first when the model adds one."""
        raw = text.encode("utf-8")
        n_max = len(raw) + 8
        buf = (llama_cpp.llama_token * n_max)()
        n = llama_cpp.llama_tokenize(self._vocab, raw, len(raw), buf, n_max, False, special)
        if n < 0:
            n_max = -n
            buf = (llama_cpp.llama_token * n_max)()
            n = llama_cpp.llama_tokenize(self._vocab, raw, len(raw), buf, n_max, False, special)
        toks = list(buf[:n])
        return [self.bos, *toks] if self.add_bos else toks

    def piece(self, token: int) -> str:
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, 256, 0, True)
        return buf.raw[: max(n, 0)].decode("utf-8", "replace")

    def n_ctx(self) -> int:
        return llama_cpp.llama_n_ctx(self._ctx) if self._ctx else self.options.n_ctx

    def schedule(self, request: Request) -> Schedule:
        special = request.parse_special
        return schedule(request, lambda t: self.tokenize(t, special=special), self.n_ctx())

    # -- decoding --------------------------------------------------------------------------
    def _decode_call(self, entries: list[tuple[int, int, int, bool]]) -> list[np.ndarray | None]:
        """One llama_decode of at most n_batch (seq, pos, token, wants_logits) entries:
        the log-softmax row of each entry that wants one, else None."""
        b = self._batch
        b.n_tokens = len(entries)
        for k, (seq, pos, tok, want) in enumerate(entries):
            b.token[k] = tok
            b.pos[k] = pos
            b.n_seq_id[k] = 1
            b.seq_id[k][0] = seq
            b.logits[k] = want
        rc = llama_cpp.llama_decode(self._ctx, b)
        if rc != 0:
            raise ModelError(f"llama_decode failed (code {rc}): {_log().reason()}")
        self.counters.decode_calls += 1
        self.counters.tokens += len(entries)
        return [self._row(k) if e[3] else None for k, e in enumerate(entries)]

    def _row(self, k: int) -> np.ndarray:
        ptr = llama_cpp.llama_get_logits_ith(self._ctx, k)  # k: index in the batch just decoded
        return log_softmax(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)))

    def _decode(self, start: int, tokens: tuple[int, ...], outputs: set[int], seq: int = 0) -> dict[int, np.ndarray]:
        """Decode one segment in n_batch calls; log-softmax rows for the positions in ``outputs``."""
        out: dict[int, np.ndarray] = {}
        for pos0, part in chunks(start, tokens, self.options.n_batch):
            rows = self._decode_call([(seq, pos0 + k, tok, (pos0 + k) in outputs) for k, tok in enumerate(part)])
            out.update((pos0 + k, row) for k, row in enumerate(rows) if row is not None)
        return out

    def _seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        return bool(llama_cpp.llama_memory_seq_rm(self._mem, seq, p0, p1))

    def _seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        llama_cpp.llama_memory_seq_cp(self._mem, src, dst, p0, p1)

    def _clear(self) -> None:
        llama_cpp.llama_memory_clear(self._mem, True)
        self._kv_prefix = None

    def _ensure_prefix(self, sch: Schedule) -> None:
        """KV cache holds exactly the prefix segment [0, P), decoded by the canonical cuts."""
        prefix = sch.seqs[0][: sch.prefix_len]
        reuse = self.options.engine in ("prefix", "batched") and self._kv_prefix == prefix
        if reuse and self._seq_rm(0, sch.prefix_len):
            self.counters.prefix_hits += 1
            return
        self._clear()
        self._decode(0, prefix, set())
        self._kv_prefix = prefix

    def score(self, request: Request) -> Scored:
        if self._ctx is None:
            raise UsageError("this backend was loaded vocab-only and cannot score")
        if self.options.engine == "batched":
            return self.score_many([request])[0]
        sch = self.schedule(request)
        self.counters.requests += 1
        n = len(sch.seqs)
        trunk_out = set(sch.trunk_logit_positions())
        rows: list[dict[int, np.ndarray]] = []
        if self.options.engine == "naive":
            for i in range(n):
                self._ensure_prefix(sch)
                got = self._decode(sch.prefix_len, sch.trunk[sch.prefix_len :], trunk_out)
                rows.append(got | self._tail(sch, i, rewind=False))
            self._kv_prefix = None  # naive never reuses
        else:
            self._ensure_prefix(sch)
            shared = self._decode(sch.prefix_len, sch.trunk[sch.prefix_len :], trunk_out)
            rows = [shared | self._tail(sch, i) for i in range(n)]
        return self._scored(sch, rows)

    def _tail(self, sch: Schedule, i: int, *, seq: int = 0, rewind: bool = True) -> dict[int, np.ndarray]:
        """Rows of continuation i's tail, decoded on ``seq`` after the trunk, then rewound to it."""
        tail = sch.tail(i)
        if not tail:
            return {}
        got = self._decode(sch.trunk_len, tail, set(range(sch.trunk_len, sch.trunk_len + len(tail))), seq=seq)
        if rewind and not self._seq_rm(seq, sch.trunk_len):
            raise ModelError("llama.cpp could not rewind its KV cache")
        return got

    def _scored(self, sch: Schedule, rows: list[dict[int, np.ndarray]]) -> Scored:
        """Sum each continuation's token log-probs from its rows (position -> log-softmax)."""
        return sch.scored(sum(rows[i][pos][tok] for pos, tok in sch.targets(i)) for i in range(len(sch.seqs)))

    def score_many(self, requests: list[Request]) -> list[Scored]:
        if self.options.engine != "batched" or self._ctx is None:
            return [self.score(r) for r in requests]  # score refuses a vocab-only backend
        return batched.score_many(self, requests)

    def batch_size(self) -> int:
        return self.parallel

    # -- facts -----------------------------------------------------------------------------
    def metadata(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(4096)
        n = llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buf, 4096)
        return buf.value.decode("utf-8", "replace") if n >= 0 else None

    def chat_template(self) -> str | None:
        tpl = llama_cpp.llama_model_chat_template(self._model, None)
        return tpl.decode("utf-8") if tpl else None

    def chat_wrap(self) -> tuple[str, str]:
        """(head, tail) the GGUF's own chat template puts around one user message, with the
        generation prompt; the BOS text is dropped from the head since tokenize() adds BOS."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        tpl = self.chat_template()
        if not tpl:
            raise UsageError(f"{self.path.name} has no chat template (tokenizer.chat_template); run without --chat-template")
        eos = llama_cpp.llama_vocab_eos(self._vocab)
        bos_text = self.piece(self.bos) if self.bos >= 0 else ""
        fmt = Jinja2ChatFormatter(template=tpl, eos_token=self.piece(eos) if eos >= 0 else "", bos_token=bos_text)
        return split_chat(fmt(messages=[{"role": "user", "content": CHAT_MARK}]).prompt, bos_text if self.add_bos else "")

    def memory_facts(self) -> dict:
        """What the memory check needs: layer count and embedding size."""
        return {
            "n_layer": llama_cpp.llama_model_n_layer(self._model),
            "n_embd": llama_cpp.llama_model_n_embd(self._model),
            "size": llama_cpp.llama_model_size(self._model),
        }

    def provenance(self) -> dict:
        o = self.options
        return {
            "backend": self.name,
            "llama_cpp_python": pkg_version("llama-cpp-python"),
            "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
            "gpu_offload_supported": bool(llama_cpp.llama_supports_gpu_offload()),
            "platform": platform.platform(),
            "model_desc": self.metadata("general.name"),
            "architecture": self.metadata("general.architecture"),
            "n_vocab": self.n_vocab,
            "add_bos": self.add_bos,
            "schedule": {
                "version": SCHEDULE_VERSION,
                "engine": o.engine,
                "n_ctx": o.n_ctx,
                "n_batch": o.n_batch,
                "n_ubatch": o.n_batch,
                "flash_attn": o.flash_attn,
                "n_gpu_layers": resolved_gpu_layers(o),
                "swa_full": True,
                **({"parallel": self.parallel, "n_seq_max": self.parallel + 1, "kv_unified": True}
                   if o.engine == "batched" else {}),
            },
            "threads": o.threads or os.cpu_count(),
            **({"rpc": self._offload.facts(llama_cpp.llama_model_n_layer(self._model), resolved_gpu_layers(o), o.rpc)}
               if self._offload else {}),
        }


def kv_cache_bytes(path: str | Path, n_ctx: int) -> int:
    """The f16 KV cache a context of ``n_ctx`` tokens needs, from the GGUF's metadata (vocab-only load)."""
    from abricot_local.memory import estimate_kv_bytes

    b = LlamaCppBackend(path, BackendOptions(vocab_only=True))
    try:
        arch = b.metadata("general.architecture") or "llama"

        def num(key: str, default: int = 0) -> int:
            try:
                return int(float(b.metadata(f"{arch}.{key}") or default))
            except ValueError:  # per-layer arrays: take the default
                return default

        n_layer, n_embd = num("block_count"), num("embedding_length")
        n_head = max(num("attention.head_count", 1), 1)
        n_head_kv = num("attention.head_count_kv", n_head) or n_head
        k_len = num("attention.key_length", n_embd // n_head)
        v_len = num("attention.value_length", k_len)
    finally:
        b.close()
    return estimate_kv_bytes(n_layer, n_ctx, n_head_kv * k_len, n_head_kv * v_len)
