"""The llama.cpp backend's options: its settings as fields (one field is one setting: its
flag, its model_args key, its checks and whether a run records it). This module does not
import llama_cpp, so ``--help`` and option checks load no llama.cpp; backend.py resolves
the values (``auto``, -1) against the build."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from abricot_local.backends.options import C_INT_MAX, ScoringOptions
from abricot_local.errors import UsageError, opt
from abricot_local.backends.llama_cpp.rpc_hello import HANDSHAKE_TIMEOUT
from abricot_local.option_fields import option

MAX_DEVICES = 16  # llama.cpp's LLAMA_MAX_DEVICES: the most proportions --tensor-split takes
ON_OFF = ("auto", "on", "off")
# several servers as each door writes a list: --rpc A,B; model_args rpc=A;B; rpc=[A, B]
_EXPECTS = f"{opt('rpc')} expects HOST:PORT (several: {opt('rpc', ['HOST:PORT', 'HOST:PORT'])})"


def parse_endpoints(spec: str | Iterable[str]) -> tuple[str, ...]:
    """``"a:1,b:2"`` (or several such strings; ``;`` separates too) -> ("a:1", "b:2"), each
    HOST:PORT checked."""
    parts = [spec] if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for text in parts:
        for ep in (p.strip() for p in str(text).replace(";", ",").split(",")):
            if not ep:
                continue
            host, sep, port = ep.rpartition(":")
            if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
                raise UsageError(f"{_EXPECTS}, got {ep!r}")
            if ":" in host or host.startswith("["):  # ggml-rpc parses HOST:PORT at the first colon, IPv4 only
                raise UsageError(f"{opt('rpc', ep)}: llama.cpp's RPC client speaks IPv4 only; give an IPv4 address or "
                                 "a host name (127.0.0.1 or localhost for this machine)")
            if ep in out:
                raise UsageError(f"{opt('rpc')} lists {ep} twice")
            out.append(ep)
    if not out:
        raise UsageError(f"{_EXPECTS}, got no server")
    return tuple(out)


@dataclass(frozen=True)
class LlamaCppOptions(ScoringOptions):
    """llama.cpp's own settings, on top of the schedule's; every one is recorded as resolved
    in the provenance, and the ones that change numbers in the config."""

    threads: int | None = option(None, "CPU threads.", min=1, max=C_INT_MAX, default_text="all cores", recheck=True)
    n_gpu_layers: int = option(-1, "Layers offloaded; -1: all layers if the build can offload.", min=-1,
                               max=C_INT_MAX, record="always")
    main_gpu: int = option(0, "The GPU that holds the model when it is not split.", min=0, max=MAX_DEVICES - 1)
    tensor_split: tuple[float, ...] = option((), "Comma-separated proportions across GPUs (like 3,1).", min=0.0,
                                             sep=",;:", metavar="P,P...")
    flash_attn: str = option("auto", "Flash attention.", choices=ON_OFF, record="always")
    extra_bufts: str = option("off", "llama.cpp's extra CPU buffer types (repacked weights, AMX). off: the plain "
                              "kernels, as an RPC server's CPU uses. on: repacked weights (another arithmetic, "
                              "sometimes faster). auto: on except on AMX builds (where they crash).", choices=ON_OFF,
                              record="always")
    rpc: tuple[str, ...] = option((), "llama.cpp RPC servers (abricot-local rpc-server) whose devices take layers.",
                                  parse=parse_endpoints, metavar="HOST:PORT[,HOST:PORT]")
    rpc_timeout: float = option(HANDSHAKE_TIMEOUT, "Seconds each --rpc server has to answer llama.cpp's RPC "
                                "handshake, and each exchange before the load (its devices, their memory), before "
                                "the run stops, naming it (a server busy with another run does not answer "
                                "either).", min=0.001, recheck=True)

    @property
    def context_window(self) -> int:
        """What llama.cpp allocates for :attr:`n_ctx`: the next multiple of 256 (llama_context's constructor,
        ``GGML_PAD(n_ctx, 256)``; llama-cpp-python 0.3.36 measured: one or several sequences, never capped at the
        model's n_ctx_train)."""
        return -(-self.n_ctx // 256) * 256

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.tensor_split) > MAX_DEVICES:
            raise UsageError(f"{opt('tensor_split')} takes at most {MAX_DEVICES} proportions, got {len(self.tensor_split)}")
        if self.rpc:
            from abricot_local.backends.llama_cpp import rpc

            rpc.require()  # a build without RPC: one line with the reinstall command
