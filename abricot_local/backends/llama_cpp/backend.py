"""llama.cpp backend: :class:`LlamaCppBackend` scores requests through an engine strategy
(engines.py) over one :class:`~abricot_local.backends.llama_cpp.session.LlamaSession`
(llama.cpp's primitives). Its options are options.py's. With session.py, system.py and rpc.py
(ggml-rpc's ctypes bindings), the only modules importing llama_cpp.
"""

from __future__ import annotations

import platform
from importlib.metadata import version as pkg_version
from pathlib import Path
from typing import Sequence

import llama_cpp

from abricot_local.backends.llama_cpp import log as resolved
from abricot_local.backends.llama_cpp import kernels as llama_kernels, rpc
from abricot_local.backends.base import (
    GENERATE,
    ROLLING,
    SCHEDULE_VERSION,
    SCORE,
    Declared,
    Generated,
    Preflight,
    Request,
    Schedule,
    Scored,
    generation_prefix_len,
    provenance_of,
    schedule,
    schedule_facts,
)
from abricot_local.core import cached_prefix
from abricot_local.record.schema import Provenance
from abricot_local.backends.engines import Engine, engine_class
from abricot_local.backends.llama_cpp.options import LlamaCppOptions
from abricot_local.backends.session import Counters
from abricot_local.backends.llama_cpp.session import (LlamaSession, resolved_extra_bufts, resolved_gpu_layers,
                                                      resolved_threads)
from abricot_local.errors import UsageError, opt
from abricot_local.gguf.file import check_gguf


class LlamaCppBackend(Declared):
    """Scores requests with llama.cpp: an engine strategy over one :class:`LlamaSession`."""

    name = "llama.cpp"
    Options = LlamaCppOptions
    capabilities = frozenset({SCORE, ROLLING, GENERATE})

    def __init__(self, model_path: str | Path, options: LlamaCppOptions = LlamaCppOptions()):
        if not isinstance(options, LlamaCppOptions):
            options = LlamaCppOptions(**{f: getattr(options, f) for f in options.__dataclass_fields__})
        self.path = Path(model_path)
        self.options = options
        check_gguf(self.path)  # once per file per process (open_model has checked it already)
        engine_cls = engine_class(options.engine)
        n_seq = engine_cls.sequences(options) if not options.vocab_only else 1
        self.session = LlamaSession(self.path, options, n_seq)
        self.engine: Engine = engine_cls(self.session, options)

    @property
    def counters(self) -> Counters:
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
    def preflight(cls, path: Path, options: LlamaCppOptions) -> Preflight:
        """Memory facts before loading (vocab-only read of the GGUF): weights, KV cache, VRAM,
        and the RPC servers' free memory (asked of them: they are connected here)."""
        from abricot_local.backends.gpus import nvidia_gpus

        vram = 0
        if resolved_gpu_layers(options) > 0:
            vram = sum(g.get("memory_free") or 0 for g in nvidia_gpus().get("gpus", []))
        remote = 0
        if options.rpc:
            remote = sum(d.memory_free for d in rpc.add_servers(options.rpc, timeout=options.rpc_timeout))
        return Preflight(kv_bytes=kv_cache_bytes(path, options.context_window), vram=vram, remote=remote)

    @classmethod
    def speed_settings(cls, options: LlamaCppOptions) -> dict:
        """What changes this backend's speed besides the model, as resolved on this build: the key
        of a calibration (calibration.py)."""
        return {"backend": cls.name, "llama_cpp_python": pkg_version("llama-cpp-python"),
                "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
                "threads": resolved_threads(options), "n_batch": options.n_batch, "flash_attn": options.flash_attn,
                "n_gpu_layers": resolved_gpu_layers(options), "main_gpu": options.main_gpu,
                "tensor_split": list(options.tensor_split), "extra_bufts": resolved_extra_bufts(options),
                "rpc": list(options.rpc)}

    @classmethod
    def kernel_threads(cls, options: LlamaCppOptions) -> int:
        """The threads llama.cpp decodes on with ``options``: --threads, else every core (session.resolved_threads)."""
        return resolved_threads(options)

    @classmethod
    def watch_remote(cls, options: LlamaCppOptions, lost) -> None:
        """Call ``lost(err)`` (which must end the process) when one of the --rpc servers goes away:
        ggml-rpc ends the process then, and ``err`` names the server."""
        if options.rpc:
            rpc.on_server_lost(options.rpc, lost)

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

    def n_ctx(self) -> int:  # a vocabulary-only load has no context: the one a load would allocate (the plan's)
        return self.session.n_ctx() if self.session.can_decode else self.options.context_window

    def make_schedule(self, request: Request) -> Schedule:
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
    def generate(self, prompt: str, until: Sequence[str], max_tokens: int, *, label: str = "",
                 parse_special: bool = False) -> Generated:
        if not self.session.can_decode:
            raise UsageError("this backend was loaded vocab-only and cannot generate")
        tokens = self.tokenize(prompt, special=parse_special)
        prefix = cached_prefix(prompt)
        p = generation_prefix_len(tokens, self.tokenize(prefix, special=parse_special)) if prefix else 0
        return self.engine.generate(tokens, p, until, max_tokens, label)

    # -- facts -----------------------------------------------------------------------------
    def metadata(self, key: str) -> str | None:
        return self.session.metadata(key)

    def render_chat(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        """A conversation through the GGUF's own chat template, without the BOS text (tokenize
        adds BOS); the text holds special-token markup, so tokenize it with special=True."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        s = self.session
        tpl = s.chat_template()
        if not tpl:
            from abricot_local.option_fields import lm_eval_option

            raise UsageError(f"{self.path.name} has no chat template (tokenizer.chat_template); run without "
                             f"{opt('chat_template')}, lm-eval without "
                             f"{lm_eval_option('apply_chat_template')}")
        bos_text = s.piece(s.bos) if s.bos >= 0 else ""
        made = self.__dict__.setdefault("_chat_formatters", {})  # compiled once per template (a run renders each item)
        key = (tpl, add_generation_prompt)
        if key not in made:
            made[key] = Jinja2ChatFormatter(template=tpl, eos_token=s.piece(s.eos) if s.eos >= 0 else "",
                                            bos_token=bos_text, add_generation_prompt=add_generation_prompt)
        text = made[key](messages=list(messages)).prompt
        return text[len(bos_text):] if s.add_bos and bos_text and text.startswith(bos_text) else text

    def start_facts(self) -> tuple[str, ...]:
        """Engine, context (as allocated), threads, GPU layers (as offloaded), flash attention (as resolved)."""
        o, s = self.options, self.session
        layers = resolved.layers_on_gpu(s.load_notes)
        return (*schedule_facts(o.engine, o.n_ctx, s.n_ctx()), f"threads {s.threads()}",
                f"GPU layers {layers or resolved_gpu_layers(o)}", f"flash-attn {s.resolved_flash_attn()}")

    def provenance(self) -> Provenance:
        o, s = self.options, self.session
        info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
        remote = [d for d in s.offload.devices if d.endpoint] if s.offload else []
        return provenance_of({
            "backend": self.name,
            "llama_cpp_python": pkg_version("llama-cpp-python"),
            "system_info": info,
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
                **({"parallel": self.engine.parallel, "n_seq_max": self.engine.sequences(o), "kv_unified": True}
                   if not self.engine.exact else {}),
            },
            "threads": s.threads(),
            **({"rpc": s.offload.facts(llama_cpp.llama_model_n_layer(s.model), resolved_gpu_layers(o), o.rpc)}
               if s.offload else {}),
            "kernels": llama_kernels.kernels(info, resolved_extra_bufts(o), s.threads(), remote),
        })


def kv_cache_bytes(path: str | Path, n_ctx: int) -> int:
    """The f16 KV cache a context of ``n_ctx`` tokens needs, from the GGUF's header (read without
    llama.cpp: no model load)."""
    from abricot_local.gguf.file import headers
    from abricot_local.memory import estimate_kv_bytes

    infos = headers(Path(path))  # never empty in use; a test's stand-in verifier gives none: no estimate
    meta = infos[0].metadata if infos else {}
    arch = str(meta.get("general.architecture") or "llama")

    def num(key: str, default: int = 0) -> int:
        value = meta.get(f"{arch}.{key}")  # None for a per-layer array: take the default
        try:
            return int(float(value or default))
        except (TypeError, ValueError):
            return default

    n_layer, n_embd = num("block_count"), num("embedding_length")
    n_head = max(num("attention.head_count", 1), 1)
    n_head_kv = num("attention.head_count_kv", n_head) or n_head
    k_len = num("attention.key_length", n_embd // n_head)
    v_len = num("attention.value_length", k_len)
    return estimate_kv_bytes(n_layer, n_ctx, n_head_kv * k_len, n_head_kv * v_len)
