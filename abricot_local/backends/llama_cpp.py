"""llama.cpp backend (llama-cpp-python's low-level API). The only module importing llama_cpp
(besides rpc.py's ctypes bindings for ggml-rpc).

Layers, as in llama-cpp-python: the ctypes API; :class:`LlamaSession`, which owns
a model, a context and a batch and exposes llama.cpp's primitives (decode a list
of entries, rewind or copy a sequence, clear); :class:`LlamaCppBackend`, which
scores requests through an engine strategy (engines.py) over its session.

It never asks for logits of every position: each decode call requests output
rows only where the schedule needs a next-token distribution.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
from dataclasses import dataclass
from importlib.metadata import version as pkg_version
from pathlib import Path
from typing import Sequence

import llama_cpp
import numpy as np

from abricot_local.backends import rpc
from abricot_local.backends.base import (
    CHAT_MARK,
    GENERATE,
    ROLLING,
    SCHEDULE_VERSION,
    SCORE,
    Generated,
    Request,
    Schedule,
    Scored,
    ScoringOptions,
    generation_prefix_len,
    schedule,
    split_chat,
)
from abricot_local.backends import llama_log as resolved
from abricot_local.backends.engines import Engine, engine_class
from abricot_local.errors import ModelError, UsageError
from abricot_local.model_file import check_gguf

FLASH_ATTN = {
    "auto": llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO,
    "on": llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "off": llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}


@dataclass(frozen=True)
class LlamaCppOptions(ScoringOptions):
    """llama.cpp's own settings, on top of the schedule's; every one is recorded as resolved."""

    threads: int | None = None  # None: all cores
    n_gpu_layers: int = -1  # -1: all layers when the build can offload, else 0
    main_gpu: int = 0
    tensor_split: tuple[float, ...] = ()
    flash_attn: str = "auto"
    extra_bufts: str = "auto"  # llama.cpp's extra CPU buffer types (repack, AMX); auto: off on AMX builds
    rpc: tuple[str, ...] = ()  # HOST:PORT of llama.cpp RPC servers whose devices take layers (rpc.py)

    def __post_init__(self) -> None:
        if self.flash_attn not in FLASH_ATTN:
            raise UsageError(f"--flash-attn must be one of {', '.join(FLASH_ATTN)}")
        if self.extra_bufts not in ("auto", "on", "off"):
            raise UsageError("extra_bufts must be auto, on or off")
        engine_class(self.engine)  # validates the name


def resolved_gpu_layers(o: LlamaCppOptions) -> int:
    """-1 means every layer when this llama.cpp build has a GPU backend or RPC servers are
    given, else none. (An RPC-only build says it "supports GPU offload" too: its devices are
    the RPC servers, added with --rpc.)"""
    if o.n_gpu_layers >= 0:
        return o.n_gpu_layers
    return 999 if o.rpc or has_gpu_backend() else 0


@functools.cache
def has_gpu_backend() -> bool:
    from abricot_local.doctor import gpu_backends, parse_system_info

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    return bool(llama_cpp.llama_supports_gpu_offload()) and bool(gpu_backends(parse_system_info(info)))


def resolved_extra_bufts(o: LlamaCppOptions) -> bool:
    """Whether weights may use llama.cpp's extra CPU buffer types (repacked layouts, AMX).
    auto: not on a build with AMX kernels, which crash in ggml_backend_amx_mul_mat on
    Gemma 3 (a segfault, measured on a Sapphire Rapids VM with llama-cpp-python 0.3.36)."""
    if o.extra_bufts != "auto":
        return o.extra_bufts == "on"
    return b"AMX_INT8 = 1" not in llama_cpp.llama_print_system_info()


def resolved_threads(o: LlamaCppOptions) -> int:
    return o.threads or max(1, os.cpu_count() or 1)


class _Log:
    """llama.cpp log sink: keeps the last lines for error messages, prints only when verbose."""

    def __init__(self) -> None:
        self.verbose = False
        self.lines: list[str] = []
        self.notes: list[str] = []  # lines saying what llama.cpp resolved (llama_log.NOTABLE), all kept
        self._cb = llama_cpp.llama_log_callback(self._on_log)  # keep a reference
        llama_cpp.llama_log_set(self._cb, ctypes.c_void_p(0))

    def _on_log(self, level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        msg = text.decode("utf-8", "replace")
        self.lines = (self.lines + [msg])[-200:]
        if resolved.notable(msg):
            self.notes.append(msg)
        if self.verbose:
            os.write(2, text)

    def reason(self) -> str:
        errs = [ln.strip() for ln in self.lines if "error" in ln.lower() or "failed" in ln.lower()]
        return "; ".join(errs[-3:]) or "llama.cpp gave no reason"


@functools.cache
def llama_log() -> _Log:
    """The process's one llama.cpp log sink (llama.cpp's logger is global)."""
    # a GGML_ABORT (say, a damaged tensor type) otherwise attaches gdb to print a backtrace,
    # which can hang the process for good instead of ending it
    os.environ.setdefault("GGML_NO_BACKTRACE", "1")
    llama_cpp.llama_backend_init()
    return _Log()


class LlamaSession:
    """A loaded model with one context: llama.cpp's primitives, nothing more.

    ``decode`` returns views of llama.cpp's logits buffer, valid until the next
    decode; the engines convert them at once.
    """

    def __init__(self, path: Path, options: LlamaCppOptions, n_seq: int = 1):
        self.path = path
        self.options = options
        self.n_batch = options.n_batch
        log = llama_log()
        log.verbose = options.verbose
        log.lines, log.notes = [], []
        self._ctx = self._batch = self._mem = None
        self.model = self._load_model(log)
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        self.bos = llama_cpp.llama_vocab_bos(self.vocab)
        self.eos = llama_cpp.llama_vocab_eos(self.vocab)
        if not options.vocab_only:
            self._ctx = self._new_context(log, n_seq)
            self._mem = llama_cpp.llama_get_memory(self._ctx)
            # llama.cpp caps a decode call at the n_ctx asked (a context under n_batch tokens
            # decodes at most n_ctx per call, though it allocates more cells): cut there
            self.n_batch = min(options.n_batch, llama_cpp.llama_n_batch(self._ctx))
            self._batch = llama_cpp.llama_batch_init(options.n_batch, 0, 1)
        self.load_log = list(log.lines)
        self.load_notes = list(log.notes)

    def _load_model(self, log: _Log):
        o = self.options
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0 if o.vocab_only else resolved_gpu_layers(o)
        params.main_gpu = o.main_gpu
        params.vocab_only = o.vocab_only
        params.use_extra_bufts = resolved_extra_bufts(o)
        split, self.offload = o.tensor_split, None
        if (o.rpc or rpc.registered()) and not o.vocab_only:  # RPC: an explicit device list and split
            self.offload = rpc.offload(o.rpc, o.tensor_split)
            self._devices = self.offload.device_array()  # keep alive
            params.devices = ctypes.cast(self._devices, ctypes.c_void_p)
            split = self.offload.tensor_split
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

    def _new_context(self, log: _Log, n_seq: int):
        o = self.options
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = o.n_ctx
        params.n_batch = o.n_batch
        params.n_ubatch = o.n_batch
        # several sequences (batched engine): sequence 0 holds the prefix, the others the
        # items, in one unified KV cache of n_ctx cells; otherwise exactly one sequence.
        params.n_seq_max = n_seq
        if n_seq > 1:
            params.kv_unified = True
        params.n_threads = params.n_threads_batch = resolved_threads(o)
        params.flash_attn_type = FLASH_ATTN[o.flash_attn]
        params.swa_full = True  # sliding-window models (Gemma 3) keep every cell, so rewinds are exact
        params.no_perf = True
        ctx = llama_cpp.llama_init_from_model(self.model, params)
        if not ctx:
            raise ModelError(
                f"llama.cpp could not create a context of {o.n_ctx} tokens for {self.path}: {log.reason()}"
            )
        return ctx

    @property
    def can_decode(self) -> bool:
        return self._ctx is not None

    def n_ctx(self) -> int:
        return llama_cpp.llama_n_ctx(self._ctx) if self._ctx else self.options.n_ctx

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
        if self.model is not None:
            llama_cpp.llama_model_free(self.model)
            self.model = None

    # -- tokens ----------------------------------------------------------------------------
    def tokenize(self, text: str, *, special: bool = False, bos: bool = True) -> list[int]:
        """Tokens of ``text``, BOS first when the model adds one (and ``bos``)."""
        raw = text.encode("utf-8")
        n_max = len(raw) + 8
        buf = (llama_cpp.llama_token * n_max)()
        n = llama_cpp.llama_tokenize(self.vocab, raw, len(raw), buf, n_max, False, special)
        if n < 0:
            n_max = -n
            buf = (llama_cpp.llama_token * n_max)()
            n = llama_cpp.llama_tokenize(self.vocab, raw, len(raw), buf, n_max, False, special)
        toks = list(buf[:n])
        return [self.bos, *toks] if self.add_bos and bos else toks

    def piece(self, token: int) -> str:
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, 256, 0, True)
        return buf.raw[: max(n, 0)].decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    def token_bytes(self, token: int) -> bytes:
        """The text a generated token adds (special tokens render as nothing), as bytes."""
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, 256, 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, -n, 0, False)
        return buf.raw[: max(n, 0)]

    # -- the primitives --------------------------------------------------------------------
    def decode(self, entries: Sequence[tuple[int, int, int, bool]]) -> list[np.ndarray | None]:
        """One llama_decode of at most n_batch (seq, pos, token, wants_row) entries."""
        if self._ctx is None:
            raise UsageError("this model was loaded vocab-only and cannot score")
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
            raise ModelError(f"llama_decode failed (code {rc}): {llama_log().reason()}")
        return [self._logits(k) if e[3] else None for k, e in enumerate(entries)]

    def _logits(self, k: int) -> np.ndarray:
        ptr = llama_cpp.llama_get_logits_ith(self._ctx, k)  # k: index in the batch just decoded
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        return bool(llama_cpp.llama_memory_seq_rm(self._mem, seq, p0, p1))

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        llama_cpp.llama_memory_seq_cp(self._mem, src, dst, p0, p1)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self._mem, True)

    # -- facts -----------------------------------------------------------------------------
    def metadata(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(4096)
        n = llama_cpp.llama_model_meta_val_str(self.model, key.encode(), buf, 4096)
        return buf.value.decode("utf-8", "replace") if n >= 0 else None

    def chat_template(self) -> str | None:
        tpl = llama_cpp.llama_model_chat_template(self.model, None)
        return tpl.decode("utf-8") if tpl else None

    def resolved_flash_attn(self) -> str:
        """What llama.cpp made of --flash-attn ("on"/"off"; auto resolves when the context is created)."""
        return resolved.flash_attn(self.load_notes, self.options.flash_attn)

    def threads(self) -> int:
        """The threads the context uses (llama.cpp's own count)."""
        return llama_cpp.llama_n_threads(self._ctx) if self._ctx else resolved_threads(self.options)


class LlamaCppBackend:
    """Scores requests with llama.cpp: an engine strategy over one :class:`LlamaSession`."""

    name = "llama.cpp"
    Options = LlamaCppOptions
    capabilities = frozenset({SCORE, ROLLING, GENERATE})
    reads_model_file = True  # MODEL is a GGUF path or a registry alias
    synthetic = False

    def __init__(self, model_path: str | Path, options: LlamaCppOptions = LlamaCppOptions()):
        if not isinstance(options, LlamaCppOptions):
            options = LlamaCppOptions(**{f: getattr(options, f) for f in options.__dataclass_fields__})
        self.path = Path(model_path)
        self.options = options
        check_gguf(self.path)  # once per file per process (open_model has checked it already)
        self.engine_cls = engine_class(options.engine)
        n_seq = self.engine_cls(_NoSession(), options).sequences() if not options.vocab_only else 1
        self.session = LlamaSession(self.path, options, n_seq)
        self.engine: Engine = self.engine_cls(self.session, options)

    @property
    def counters(self):
        return self.engine.counters

    @property
    def bos(self) -> int:
        return self.session.bos

    @property
    def add_bos(self) -> bool:
        return self.session.add_bos

    @property
    def n_vocab(self) -> int:
        return self.session.n_vocab

    @classmethod
    def config(cls, options: LlamaCppOptions) -> dict:
        """The settings a run records in its config (compared on --resume)."""
        return {"n_ctx": options.n_ctx, "n_batch": options.n_batch, "n_gpu_layers": options.n_gpu_layers,
                "flash_attn": options.flash_attn, **engine_class(options.engine)(_NoSession(), options).config(),
                # only when set: the manifests of earlier runs (and --resume) stay the same
                **({"extra_bufts": options.extra_bufts} if options.extra_bufts != "auto" else {})}

    @classmethod
    def preflight(cls, path: Path, options: LlamaCppOptions) -> dict:
        """Memory facts before loading (vocab-only read of the GGUF): weights, KV cache, VRAM,
        and the RPC servers' free memory (asked of them: they are connected here)."""
        from abricot_local.doctor import nvidia_gpus

        vram = 0
        if resolved_gpu_layers(options) > 0:
            vram = sum(g.get("memory_free") or 0 for g in nvidia_gpus().get("gpus", []))
        remote = sum(d.memory_free for d in rpc.add_servers(options.rpc)) if options.rpc else 0
        return {"kv_bytes": kv_cache_bytes(path, options.n_ctx), "vram": vram, "remote": remote}

    def close(self) -> None:
        self.session.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass

    # -- tokens ----------------------------------------------------------------------------
    def tokenize(self, text: str, *, special: bool = False, bos: bool = True) -> list[int]:
        return self.session.tokenize(text, special=special, bos=bos)

    @property
    def prefix_token(self) -> int:
        s = self.session
        return s.bos if (s.add_bos and s.bos >= 0) or s.eos < 0 else s.eos

    def piece(self, token: int) -> str:
        return self.session.piece(token)

    def n_ctx(self) -> int:
        return self.session.n_ctx()

    def schedule(self, request: Request) -> Schedule:
        special = request.parse_special
        return schedule(request, lambda t: self.tokenize(t, special=special), self.n_ctx(),
                        asked_n_ctx=self.options.n_ctx)

    # -- scoring ---------------------------------------------------------------------------
    def score(self, request: Request) -> Scored:
        return self.score_many([request])[0]

    def score_many(self, requests: Sequence[Request]) -> list[Scored]:
        if not self.session.can_decode:
            raise UsageError("this backend was loaded vocab-only and cannot score")
        return self.engine.score_many([self.schedule(r) for r in requests], [r.label for r in requests])

    def batch_size(self) -> int:
        return self.engine.parallel

    def score_tokens(self, context: Sequence[int], continuations: Sequence[Sequence[int]], *,
                     label: str = "") -> Scored:
        if not self.session.can_decode:
            raise UsageError("this backend was loaded vocab-only and cannot score")
        sch = Schedule.from_tokens(context, continuations, self.n_ctx(), label=label, asked_n_ctx=self.options.n_ctx)
        return self.engine.score(sch, label)

    # -- generation ------------------------------------------------------------------------
    def generate(self, prompt: str, until: Sequence[str], max_tokens: int, *, prefix: str = "",
                 label: str = "", parse_special: bool = False) -> Generated:
        if not self.session.can_decode:
            raise UsageError("this backend was loaded vocab-only and cannot generate")
        tokens = self.tokenize(prompt, special=parse_special)
        p = generation_prefix_len(tokens, self.tokenize(prefix, special=parse_special)) if prefix else 0
        return self.engine.generate(tokens, p, until, max_tokens, label)

    # -- facts -----------------------------------------------------------------------------
    def metadata(self, key: str) -> str | None:
        return self.session.metadata(key)

    def chat_wrap(self) -> tuple[str, str]:
        """(head, tail) the GGUF's own chat template puts around one user message, with the
        generation prompt; the BOS text is dropped from the head since tokenize() adds BOS."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        s = self.session
        tpl = s.chat_template()
        if not tpl:
            raise UsageError(f"{self.path.name} has no chat template (tokenizer.chat_template); run without --chat-template")
        bos_text = s.piece(s.bos) if s.bos >= 0 else ""
        fmt = Jinja2ChatFormatter(template=tpl, eos_token=s.piece(s.eos) if s.eos >= 0 else "", bos_token=bos_text)
        return split_chat(fmt(messages=[{"role": "user", "content": CHAT_MARK}]).prompt, bos_text if s.add_bos else "")

    def render_chat(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        """A conversation through the GGUF's own chat template, without the BOS text (tokenize
        adds BOS); the text holds special-token markup, so tokenize it with special=True."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        s = self.session
        tpl = s.chat_template()
        if not tpl:
            raise UsageError(f"{self.path.name} has no chat template (tokenizer.chat_template); drop --apply_chat_template")
        bos_text = s.piece(s.bos) if s.bos >= 0 else ""
        fmt = Jinja2ChatFormatter(template=tpl, eos_token=s.piece(s.eos) if s.eos >= 0 else "", bos_token=bos_text,
                                  add_generation_prompt=add_generation_prompt)
        text = fmt(messages=list(messages)).prompt
        return text[len(bos_text):] if s.add_bos and bos_text and text.startswith(bos_text) else text

    def provenance(self) -> dict:
        o, s = self.options, self.session
        return {
            "backend": self.name,
            "llama_cpp_python": pkg_version("llama-cpp-python"),
            "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
            "gpu_offload_supported": bool(llama_cpp.llama_supports_gpu_offload()),
            "platform": platform.platform(),
            "model_desc": self.metadata("general.name"),
            "architecture": self.metadata("general.architecture"),
            "n_vocab": s.n_vocab,
            "add_bos": s.add_bos,
            "schedule": {
                "version": SCHEDULE_VERSION,
                "engine": o.engine,
                "n_ctx": o.n_ctx,
                "n_ctx_allocated": s.n_ctx(),
                "n_batch": s.n_batch,  # --n-batch, or n_ctx when llama.cpp caps it there
                "n_ubatch": s.n_batch,
                "flash_attn": o.flash_attn,
                "flash_attn_resolved": s.resolved_flash_attn(),
                "n_gpu_layers": resolved_gpu_layers(o),
                "layers_offloaded": resolved.layers_on_gpu(s.load_notes),
                "model_buffers": resolved.model_buffers(s.load_notes),
                "extra_bufts": resolved_extra_bufts(o),
                "swa_full": True,
                **({"parallel": self.engine.parallel, "n_seq_max": self.engine.sequences(), "kv_unified": True}
                   if not self.engine.exact else {}),
            },
            "threads": s.threads(),
            **({"rpc": s.offload.facts(llama_cpp.llama_model_n_layer(s.model), resolved_gpu_layers(o), o.rpc)}
               if s.offload else {}),
        }


class _NoSession:
    """Stands in for a session where an engine is built only to read its settings."""

    n_batch = 0


def kv_cache_bytes(path: str | Path, n_ctx: int) -> int:
    """The f16 KV cache a context of ``n_ctx`` tokens needs, from the GGUF's metadata (vocab-only load)."""
    from abricot_local.memory import estimate_kv_bytes

    b = LlamaSession(Path(path), LlamaCppOptions(vocab_only=True))
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
