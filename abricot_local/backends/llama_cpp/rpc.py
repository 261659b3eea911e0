"""llama.cpp's RPC backend (ggml-rpc) through ctypes: use another machine's devices
(rpc_server.py serves this machine's, with the bindings here).

Besides backend.py, session.py and system.py, the only module importing llama_cpp. Every
ggml symbol comes from the libggml that llama-cpp-python itself loaded, and the
two RPC entry points from the RPC backend's registry (as llama.cpp's rpc-server
and ``--rpc`` do), so no separate C++ build is needed.

A server serves one client at a time. ggml-rpc has no error path for a server
that cannot be reached or that dies mid-run: it calls GGML_ABORT, which ends the
process; and it waits for every answer with no timeout. So each server must first
complete llama.cpp's handshake, asked here with a deadline (rpc_hello.py; a server
busy with another run fails it too); then every exchange before the load (llama.cpp's
own connection, its device list, their memory) runs in a thread waited for with the same
deadline (:func:`bounded`; ``--rpc-timeout``), and
:func:`on_server_lost` hooks ggml's abort callback: the caller's handler receives
one :class:`RpcServerError` naming the server, and must end the process itself
(ggml aborts once the handler returns). A server that freezes or a network that
drops (no TCP reset) during the load or the scoring is not detected: llama.cpp waits for
its answer, and only a signal ends the wait (interrupts.py: within a few seconds, the
checkpoint kept).
"""

from __future__ import annotations

import ctypes
import os
import re
import socket
import sys
import threading
from dataclasses import dataclass, field
from importlib.metadata import version as pkg_version
from typing import Callable, Sequence, TypeVar

import llama_cpp

from abricot_local.backends.llama_cpp import interrupts
from abricot_local.backends.llama_cpp.rpc_hello import HANDSHAKE_TIMEOUT, handshake, resolve, split as _split
from abricot_local.backends.llama_cpp.build import REINSTALL_RPC
from abricot_local.errors import ModelError, UsageError, opt

DEFAULT_PORT = 50052
LOOPBACK = "127.0.0.1"
REINSTALL = REINSTALL_RPC
MIN_VERSION = (0, 3, 36)  # ggml_backend_rpc_start_server(endpoint, cache_dir, n_threads, n_devices, devices)
PROBE_TIMEOUT = 5.0
EXIT_SERVER_LOST = 75  # EX_TEMPFAIL: try again (resume) once the server is back

_DEV_TYPE_GPU, _DEV_TYPE_IGPU = 1, 2  # enum ggml_backend_dev_type
T = TypeVar("T")


class RpcUnavailableError(UsageError):
    """This llama-cpp-python build has no RPC backend (or one too old for this module)."""


class RpcServerError(ModelError):
    """An RPC server that cannot be reached, or that went away during a run."""

    exit_code = EXIT_SERVER_LOST


@dataclass(frozen=True)
class RemoteDevice:
    """A device llama.cpp can offload to: a remote one (``endpoint`` host:port) or a local GPU ("")."""

    name: str  # llama.cpp's device name: "RPC0", "CUDA0"
    description: str
    endpoint: str
    memory_free: int
    memory_total: int
    handle: int = field(default=0, repr=False, compare=False)  # ggml_backend_dev_t

    def facts(self) -> dict:
        return {"name": self.name, "description": self.description, "endpoint": self.endpoint or None,
                "memory_free": self.memory_free, "memory_total": self.memory_total}


@dataclass(frozen=True)
class Offload:
    """Where llama.cpp puts the layers: the device list it is given and the proportions."""

    devices: tuple[RemoteDevice, ...]
    tensor_split: tuple[float, ...]

    def device_array(self):
        """NULL-terminated ggml_backend_dev_t[] for llama_model_params.devices (keep it alive)."""
        return (ctypes.c_void_p * (len(self.devices) + 1))(*[d.handle for d in self.devices], None)

    def layers(self, n_layer: int, n_gpu_layers: int) -> dict[str, int]:
        """Layers (and the output layer, counted as one more) each device gets, as llama.cpp's
        load_tensors assigns them (the first ones stay on the CPU when n_gpu_layers is smaller)."""
        import numpy as np

        counts = {"CPU": 0, **{d.name: 0 for d in self.devices}}
        cum = np.cumsum(np.asarray(self.tensor_split, dtype=np.float32), dtype=np.float32)
        cum = cum / cum[-1] if len(cum) and cum[-1] > 0 else cum
        start = max(n_layer + 1 - n_gpu_layers, 0)
        act = min(n_gpu_layers, n_layer + 1) if self.devices else 0
        for il in range(n_layer + 1):
            if il < start or il - start >= act:
                counts["CPU"] += 1
            else:
                k = int(np.searchsorted(cum, np.float32(il - start) / np.float32(act), side="right"))
                counts[self.devices[min(k, len(self.devices) - 1)].name] += 1
        return counts

    def facts(self, n_layer: int, n_gpu_layers: int, servers: Sequence[str]) -> dict:
        return {"servers": list(servers), "devices": [d.facts() for d in self.devices],
                "tensor_split": list(self.tensor_split), "layers": self.layers(n_layer, n_gpu_layers)}


# -- the libraries -----------------------------------------------------------------------------
ADD_SERVER_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)
START_SERVER_FN = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t,
                                 ctypes.POINTER(ctypes.c_void_p))
_ABORT_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_char_p)
_SIGNATURES = {
    "ggml_backend_reg_by_name": ([ctypes.c_char_p], ctypes.c_void_p),
    "ggml_backend_reg_get_proc_address": ([ctypes.c_void_p, ctypes.c_char_p], ctypes.c_void_p),
    "ggml_backend_register": ([ctypes.c_void_p], None),
    "ggml_backend_reg_dev_count": ([ctypes.c_void_p], ctypes.c_size_t),
    "ggml_backend_reg_dev_get": ([ctypes.c_void_p, ctypes.c_size_t], ctypes.c_void_p),
    "ggml_backend_reg_name": ([ctypes.c_void_p], ctypes.c_char_p),
    "ggml_backend_dev_count": ([], ctypes.c_size_t),
    "ggml_backend_dev_get": ([ctypes.c_size_t], ctypes.c_void_p),
    "ggml_backend_dev_by_name": ([ctypes.c_char_p], ctypes.c_void_p),
    "ggml_backend_dev_name": ([ctypes.c_void_p], ctypes.c_char_p),
    "ggml_backend_dev_description": ([ctypes.c_void_p], ctypes.c_char_p),
    "ggml_backend_dev_type": ([ctypes.c_void_p], ctypes.c_int),
    "ggml_backend_dev_backend_reg": ([ctypes.c_void_p], ctypes.c_void_p),
    "ggml_backend_dev_memory": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)], None),
    "ggml_set_abort_callback": ([_ABORT_CALLBACK], ctypes.c_void_p),
}
_GGML = None
_LOCK = threading.Lock()
_REGISTERED: dict[str, tuple[RemoteDevice, ...]] = {}  # endpoint -> its devices, registered once per process


def ggml_lib():
    """The libggml llama-cpp-python loaded (same process-wide device registry), typed."""
    global _GGML
    if _GGML is None:
        from llama_cpp._ggml import libggml

        for name, (args, res) in _SIGNATURES.items():
            fn = getattr(libggml, name)
            fn.argtypes, fn.restype = args, res
        llama_cpp.llama_backend_init()
        _GGML = libggml
    return _GGML


def _version() -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in pkg_version("llama-cpp-python").split(".")[:3])
    except ValueError:
        return MIN_VERSION


def available() -> bool:
    """Whether this llama-cpp-python build has the RPC backend (GGML_RPC=on) this module can drive."""
    try:
        return (_version() >= MIN_VERSION and bool(llama_cpp.llama_supports_rpc())
                and bool(ggml_lib().ggml_backend_reg_by_name(b"RPC")))
    except (AttributeError, ImportError, OSError):
        return False


def rpc_function(name: str, proto):
    if not available():
        v = ".".join(map(str, _version()))
        raise RpcUnavailableError(
            f"this llama-cpp-python ({v}) was built without RPC (or is older than "
            f"{'.'.join(map(str, MIN_VERSION))}); reinstall it with: {REINSTALL}"
        )
    lib = ggml_lib()
    ptr = lib.ggml_backend_reg_get_proc_address(lib.ggml_backend_reg_by_name(b"RPC"), name.encode())
    if not ptr:
        raise RpcUnavailableError(f"llama.cpp's RPC backend has no {name}; reinstall with: {REINSTALL}")
    return proto(ptr)


def require() -> None:
    """Raise :class:`RpcUnavailableError` (one line, with the reinstall command) without RPC."""
    rpc_function("ggml_backend_rpc_add_server", ADD_SERVER_FN)


# -- endpoints (parse_endpoints: options.py, which loads no llama.cpp; split: rpc_hello.py) ------------


def probe(endpoint: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """None when something accepts TCP connections at ``endpoint``, else why not."""
    try:
        socket.create_connection(resolve(endpoint, timeout), timeout=timeout).close()
        return None
    except socket.gaierror as exc:
        return f"cannot resolve the host ({exc.strerror or exc})"
    except socket.timeout as exc:
        return str(exc) or f"no answer within {timeout:g} s"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()


def _unreachable(endpoint: str, why: str) -> RpcServerError:
    host, port = _split(endpoint)
    return RpcServerError(
        f"cannot reach the RPC server {endpoint} ({why}); start it on {host} with "
        f"`abricot-local rpc-server --host <its address> --port {port}` and check the firewall"
    )


# -- client side -------------------------------------------------------------------------------
def device_facts(lib, dev: int, endpoint: str) -> RemoteDevice:
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
    return RemoteDevice(
        name=(lib.ggml_backend_dev_name(dev) or b"?").decode("utf-8", "replace"),
        description=(lib.ggml_backend_dev_description(dev) or b"").decode("utf-8", "replace"),
        endpoint=endpoint, memory_free=free.value, memory_total=total.value, handle=dev,
    )


def add_servers(endpoints: Sequence[str], timeout: float = HANDSHAKE_TIMEOUT) -> tuple[RemoteDevice, ...]:
    """Connect to each server, register its devices with llama.cpp (once per process), and
    return them with their memory now (asked of the server: ggml_backend_rpc_get_device_memory).
    A server new to this process must first answer llama.cpp's handshake within ``timeout``
    seconds; one already registered is held by llama.cpp's own connection, so it is only probed."""
    add = rpc_function("ggml_backend_rpc_add_server", ADD_SERVER_FN)
    lib = ggml_lib()
    out: list[RemoteDevice] = []
    with _LOCK:
        for ep in endpoints:  # Python, with a deadline (and a Ctrl-C goes through at once)
            if ep in _REGISTERED:
                why = probe(ep, timeout)
                if why:
                    raise _unreachable(ep, why)
            elif refused := handshake(ep, timeout):
                if not refused.reached:
                    raise _unreachable(ep, refused.why)
                raise RpcServerError(f"the RPC server {ep} {refused.why}")
        for ep in endpoints:  # llama.cpp's own exchanges, each within the deadline (bounded)
            if ep not in _REGISTERED:
                _REGISTERED[ep] = bounded(lambda ep=ep: _register(ep, add, lib), timeout,
                                          f"the RPC server {ep} answered the handshake but not llama.cpp's "
                                          "connection (its devices)")
            devices = _REGISTERED[ep]
            out.extend(bounded(lambda ep=ep, ds=devices: [device_facts(lib, d.handle, ep) for d in ds], timeout,
                               f"the RPC server {ep} did not report its devices' memory"))  # as of now
    return tuple(out)


def _register(ep: str, add, lib) -> tuple[RemoteDevice, ...]:
    reg = add(ep.encode())  # connects (HELLO, device count); GGML_ABORT if that fails
    if not reg:
        raise RpcServerError(f"the RPC server {ep} offers no device")
    lib.ggml_backend_register(reg)
    return tuple(device_facts(lib, lib.ggml_backend_reg_dev_get(reg, i), ep)
                 for i in range(lib.ggml_backend_reg_dev_count(reg)))


def bounded(call: Callable[[], T], timeout: float, what: str) -> T:
    """``call()`` (llama.cpp talking to a server, which has no timeout of its own) in a thread of
    its own, waited for at most ``timeout`` seconds: then an RpcServerError ("``what`` within N
    s"), the call left behind (it can only end with the process: interrupts.abandoned). The
    main thread waits in Python, so a Ctrl-C or SIGTERM is acted on at once; llama.cpp's log
    callback runs in that thread, where no signal handler runs."""
    box: dict = {}

    def work() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=work, name="abricot-rpc", daemon=True)
    thread.start()
    try:
        thread.join(timeout)
    finally:  # a Ctrl-C while waiting leaves it behind too
        if thread.is_alive():
            interrupts.abandoned(thread)
    if thread.is_alive():
        raise RpcServerError(f"{what} within {timeout:g} s: it is frozen or not a llama.cpp rpc-server "
                             f"({opt('rpc_timeout')} sets the wait)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def registered() -> bool:
    """Whether RPC devices were registered in this process (llama.cpp's default device list,
    used when none is given, would then include them)."""
    return bool(_REGISTERED)


def local_gpus() -> tuple[RemoteDevice, ...]:
    """This machine's GPUs as llama.cpp's default device selection takes them (integrated
    ones only when there is no discrete one; RPC devices are not local)."""
    lib = ggml_lib()
    gpus, igpus = [], []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        kind = lib.ggml_backend_dev_type(dev)
        reg = lib.ggml_backend_dev_backend_reg(dev)
        if (lib.ggml_backend_reg_name(reg) or b"").startswith(b"RPC"):
            continue
        if kind == _DEV_TYPE_GPU:
            gpus.append(device_facts(lib, dev, ""))
        elif kind == _DEV_TYPE_IGPU and not igpus:
            igpus.append(device_facts(lib, dev, ""))
    return tuple(gpus or igpus)


def offload(endpoints: Sequence[str], tensor_split: Sequence[float] = (), *,
            timeout: float = HANDSHAKE_TIMEOUT) -> Offload:
    """The devices a model is given: the servers' devices first (as llama.cpp orders them),
    then the local GPUs; ``tensor_split`` default: proportional to each device's free memory."""
    devices = (add_servers(endpoints, timeout) if endpoints else ()) + local_gpus()
    if tensor_split:
        if len(tensor_split) != len(devices):
            names = ", ".join(f"{d.name} {d.endpoint or 'local'}" for d in devices) or "none"
            raise UsageError(f"{opt('tensor_split')} has {len(tensor_split)} values but there are {len(devices)} "
                             f"devices ({names})")
        if any(x < 0 for x in tensor_split) or not sum(tensor_split) > 0:
            raise UsageError(f"{opt('tensor_split')} needs non-negative proportions, not all zero")
        split = tuple(float(x) for x in tensor_split)
    else:
        free = [max(d.memory_free, 0) for d in devices]
        split = tuple(f / sum(free) for f in free) if sum(free) else tuple(1.0 for _ in devices)
    return Offload(devices, split)


# -- a server that goes away -------------------------------------------------------------------
_HOOK = {"callback": None, "servers": ()}


def on_server_lost(servers: Sequence[str], handler: Callable[[ModelError], None]) -> None:
    """Route ggml's aborts (in any thread) to ``handler``: an :class:`RpcServerError` naming the
    server that went away, or a ModelError for any other abort. The handler must end the
    process (os._exit): llama.cpp cannot continue, and it aborts when the handler returns."""
    lib = ggml_lib()
    once = threading.Lock()

    def hook(raw: bytes | None) -> None:
        if not once.acquire(blocking=False):  # another thread aborts too: the first one ends the process
            threading.Event().wait()
        handler(_abort_error((raw or b"").decode("utf-8", "replace").strip(), servers))

    cb = _ABORT_CALLBACK(hook)
    _HOOK.update(callback=cb, servers=tuple(servers))  # keep the callback alive
    lib.ggml_set_abort_callback(cb)


def _abort_error(message: str, servers: Sequence[str]) -> ModelError:
    text = re.sub(r"^\S+:\d+: ", "", message).strip()  # ggml prefixes file:line
    if "rpc" not in message.lower():
        return ModelError(f"llama.cpp aborted: {text}")
    named = [s for s in servers if s in message]
    if not named:  # "Remote RPC server crashed...": the servers this process lost its connection to
        up = _established(servers)
        named = [s for s in servers if s not in up] if up else []
    if not named:  # else those that no longer accept connections
        named = [s for s in servers if probe(s, timeout=2.0)]
    who = " and ".join(named) if named else " or ".join(servers) or "an RPC server"
    where = "RPC server" + ("s" if len(named) > 1 else "")
    if "handshake" in text.lower():
        return RpcServerError(f"the {where} {who} did not complete llama.cpp's RPC handshake (llama.cpp: {text}); "
                              "it must run the same llama-cpp-python version as this machine")
    return RpcServerError(f"lost the {where} {who} (llama.cpp: {text})")


def _established(servers: Sequence[str]) -> set[str]:
    """The servers this process holds an ESTABLISHED TCP connection to (Linux /proc; else none).
    A dead server's connection is already closed (or CLOSE_WAIT) when ggml-rpc gives up on it,
    while its listening port may linger a moment as the process exits: no probe race."""
    try:
        mine = {os.readlink(f"/proc/self/fd/{fd}")[8:-1] for fd in os.listdir("/proc/self/fd")
                if os.path.islink(f"/proc/self/fd/{fd}")}
        want = {(socket.gethostbyname(h), p): ep for ep in servers for h, p in [_split(ep)]}
        up = set()
        with open("/proc/net/tcp", encoding="ascii") as fh:
            for line in list(fh)[1:]:
                f = line.split()
                ip_hex, port_hex = f[2].split(":")
                ip = socket.inet_ntoa(int(ip_hex, 16).to_bytes(4, sys.byteorder))
                ep = want.get((ip, int(port_hex, 16)))
                if ep and f[3] == "01" and f[9] in mine:  # 01: ESTABLISHED
                    up.add(ep)
        return up
    except (OSError, ValueError, IndexError):
        return set()
