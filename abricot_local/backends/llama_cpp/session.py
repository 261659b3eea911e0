"""llama.cpp's primitives for the llama.cpp backend (llama-cpp-python's low-level API):
:class:`LlamaSession` owns a model, a context and a batch (decode a list of entries, rewind or
copy a sequence, clear), and the settings resolved against this build (auto, -1). With
backend.py, system.py and rpc.py, the only modules importing llama_cpp.

It never asks for logits of every position: each decode call requests output rows only
where the schedule needs a next-token distribution.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path
from typing import Sequence

import llama_cpp
import numpy as np

from abricot_local.backends.llama_cpp import log as resolved
from abricot_local.backends.llama_cpp import interrupts, rpc
from abricot_local.backends.llama_cpp.options import LlamaCppOptions
from abricot_local.errors import ModelError, UsageError, opt

FLASH_ATTN = {  # one per choice of LlamaCppOptions.flash_attn
    "auto": llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO,
    "on": llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "off": llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}


# llama_decode's code when the abort callback stopped it: the ubatches it finished stay in the context's memory
# (llama.h), the context usable; the engines clear them as they go on (hold_prefix's seq_rm past the prefix, or reset)
ABORTED = 2
SPLIT_KV_FROM = 256  # llama.cpp pads the cells attended to 256: a token here sees 512 (ggml's split-KV threshold)


def resolved_gpu_layers(o: LlamaCppOptions) -> int:
    """-1 means every layer when this llama.cpp build has a GPU backend or RPC servers are
    given, else none. (An RPC-only build says it "supports GPU offload" too: its devices are
    the RPC servers, added with --rpc.)"""
    if o.n_gpu_layers >= 0:
        return o.n_gpu_layers
    return 999 if o.rpc or has_gpu_backend() else 0


@functools.cache
def has_gpu_backend() -> bool:
    from abricot_local.backends.llama_cpp.system import gpu_backends, parse_system_info

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
        self.sink: list[str] | None = None  # every line, while a caller collects them (quantize.py)
        self._cb = llama_cpp.llama_log_callback(self._on_log)  # keep a reference
        llama_cpp.llama_log_set(self._cb, ctypes.c_void_p(0))

    def _on_log(self, level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        msg = text.decode("utf-8", "replace")
        self.lines = (self.lines + [msg])[-200:]
        if self.sink is not None:
            self.sink.append(msg)
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

    normalized = False  # raw logits: the engine takes their log-softmax
    nonfinite_advice = f"try {opt('flash_attn', 'off')}, or {opt('n_gpu_layers', 0)} to compare with the CPU"

    def __init__(self, path: Path, options: LlamaCppOptions, n_seq: int = 1):
        self.path = path
        self.options = options
        self.n_batch = options.n_batch
        log = llama_log()
        log.verbose = options.verbose
        log.lines, log.notes = [], []
        self.model = self._ctx = self._batch = self._mem = self.offload = None
        self._abort_flag = interrupts.new_abort_flag()  # this context's: raised for its main-thread decode only
        if (options.rpc or rpc.registered()) and not options.vocab_only:
            # RPC: an explicit device list and split; a new server answers the handshake first
            # (in Python, with a deadline, interruptible), then llama.cpp connects
            self.offload = rpc.offload(options.rpc, options.tensor_split, timeout=options.rpc_timeout)
        try:
            with interrupts.deferred():  # Ctrl-C/SIGTERM inside llama.cpp's log callback: raised after it
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
                    self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)  # no decode call holds more
        except BaseException:
            self.close()
            raise
        self.load_log = list(log.lines)
        self.load_notes = list(log.notes)
        self.n_seq = n_seq
        # llama.cpp's CPU flash attention splits the KV cache across threads for a one-token
        # ubatch over 512+ cells (256-cell padding: a token at position 256 or later), and sums the
        # parts in thread order: those calls' numbers depend on the thread count (docs/numerics.md)
        self._split_by_threads = (not options.vocab_only and self.resolved_flash_attn() == "on"
                                  and not resolved.all_layers_offloaded(self.load_notes))

    def _load_model(self, log: _Log):
        o = self.options
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0 if o.vocab_only else resolved_gpu_layers(o)
        params.main_gpu = o.main_gpu
        params.vocab_only = o.vocab_only
        params.use_extra_bufts = resolved_extra_bufts(o)
        split = o.tensor_split
        if self.offload is not None:
            self._devices = self.offload.device_array()  # keep alive
            params.devices = ctypes.cast(self._devices, ctypes.c_void_p)
            split = self.offload.tensor_split
        if split:
            arr = (ctypes.c_float * llama_cpp.LLAMA_MAX_DEVICES)(*split)
            self._tensor_split = arr  # keep alive
            params.tensor_split = arr
        # a signal stops the load at the next tensor (llama.cpp cancels when this returns False)
        self._progress = llama_cpp.llama_progress_callback(lambda _done, _user: interrupts.pending() is None)
        params.progress_callback = self._progress
        model = llama_cpp.llama_model_load_from_file(str(self.path).encode("utf-8"), params)
        if not model and interrupts.pending() is not None:
            raise KeyboardInterrupt  # the load was cancelled for a Ctrl-C or SIGTERM
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
        check = interrupts.abort_check()  # a signal stops a decode at its next graph node (CPU backend)
        if check is not None:
            self._abort = llama_cpp.ggml_abort_callback(check)  # a C function: it only reads the flag
            llama_cpp.llama_set_abort_callback(ctx, self._abort, ctypes.cast(self._abort_flag, ctypes.c_void_p))
        return ctx

    @property
    def can_decode(self) -> bool:
        return self._ctx is not None

    def n_ctx(self) -> int:
        return llama_cpp.llama_n_ctx(self._ctx) if self._ctx else self.options.n_ctx

    def close(self) -> None:
        with interrupts.deferred():  # llama.cpp logs as it frees
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
        # a warning in llama.cpp's log must not swallow a Ctrl-C; in the main thread a signal raises this
        # context's flag: the decode aborts (2), the signal raised as the block ends (another thread's: never)
        with interrupts.deferred(abort=self._abort_flag):
            rc = llama_cpp.llama_decode(self._ctx, b)
        if rc == ABORTED:  # (a signal's handler that did not raise: the decode is cut all the same)
            raise KeyboardInterrupt
        if rc != 0:
            raise ModelError(f"llama_decode failed (code {rc}): {llama_log().reason()}")
        return [self._logits(k) if e[3] else None for k, e in enumerate(entries)]

    def _logits(self, k: int) -> np.ndarray:
        ptr = llama_cpp.llama_get_logits_ith(self._ctx, k)  # k: index in the batch just decoded
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def thread_dependent(self, entries: Sequence[tuple[int, int, int, bool]]) -> bool:
        """A one-token decode whose attention llama.cpp splits by thread (several sequences share
        the cells: any position may be past the first 256)."""
        return self._split_by_threads and len(entries) == 1 and (self.n_seq > 1 or entries[0][1] >= SPLIT_KV_FROM)

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
