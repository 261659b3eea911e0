"""`abricot-local rpc-server`: this machine's devices served with ggml_backend_rpc_start_server
(the RPC backend's own server loop, as llama.cpp's rpc-server runs it), bindings from rpc.py."""

from __future__ import annotations

import ctypes
import ipaddress
import os
import socket
import threading
from pathlib import Path
from typing import Sequence

from abricot_local.backends.llama_cpp.rpc import (
    START_SERVER_FN,
    DEFAULT_PORT,
    LOOPBACK,
    RemoteDevice,
    RpcServerError,
    device_facts,
    ggml_lib,
    rpc_function,
)
from abricot_local.errors import UsageError, opt

# rpc-server's own warning (tools/rpc/rpc-server.cpp) and the reason docs/beyond-one-machine.md gives for it.
EXPOSED_WARNING = """\
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
WARNING: Host ('{host}') is != '127.0.0.1'
         Never expose the RPC server to an open network!
         This is an experimental feature and is not secure!
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
The RPC protocol has no authentication and no encryption: anyone who reaches
{host}:{port} can run computations and read or write this device's memory.
Use it only on a trusted network."""


def listen_address(host: str) -> str:
    """The IPv4 address to listen on for ``--host`` (ggml-rpc's server binds IPv4 addresses
    only): an IPv4 address as given, a name as it resolves (localhost: 127.0.0.1), and the
    IPv6 loopback ::1 as 127.0.0.1. Anything else is a UsageError, before any warning."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None and ip.version == 4:
        return host
    if ip is not None:
        if ip.is_loopback:
            return LOOPBACK
        raise UsageError(f"{opt('host', host)}: llama.cpp's RPC server listens on IPv4 only; give an IPv4 address "
                         "(127.0.0.1 for this machine only, 0.0.0.0 for every interface)")
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (socket.gaierror, UnicodeError, IndexError):
        raise UsageError(f"{opt('host', repr(host))} is neither an IPv4 address nor a name this machine resolves "
                         "(127.0.0.1 or localhost for this machine only)") from None


def exposed_warning(address: str, port: int) -> str | None:
    """llama.cpp's warning for a server reachable from other machines (None on a loopback
    address: 127.0.0.0/8)."""
    return None if ipaddress.IPv4Address(address).is_loopback else EXPOSED_WARNING.format(host=address, port=port)


def server_devices(names: Sequence[str] = ()) -> tuple[RemoteDevice, ...]:
    """The devices a server offers: those named, else (as rpc-server) every GPU-like device,
    else the CPU."""
    lib = ggml_lib()
    all_devs = [lib.ggml_backend_dev_get(i) for i in range(lib.ggml_backend_dev_count())]
    if names:
        out = []
        for name in names:
            dev = lib.ggml_backend_dev_by_name(name.encode())
            if not dev:
                known = ", ".join(device_facts(lib, d, "").name for d in all_devs)
                raise UsageError(f"unknown device {name!r}; this machine has: {known}")
            out.append(device_facts(lib, dev, ""))
        return tuple(out)
    accel = [d for d in all_devs if lib.ggml_backend_dev_type(d) not in (0, 3)]  # not CPU, not ACCEL
    cpu = [d for d in all_devs if lib.ggml_backend_dev_type(d) == 0][:1]
    return tuple(device_facts(lib, d, "") for d in (accel or cpu))


def default_threads() -> int:
    return max(1, (os.cpu_count() or 2) // 2)  # rpc-server's default


def start_server(host: str = LOOPBACK, port: int = DEFAULT_PORT, threads: int | None = None,
                 devices: Sequence[str] = (), cache_dir: str | Path | None = None) -> None:
    """Serve ``devices`` on host:port (see :func:`listen_address`) with
    ggml_backend_rpc_start_server until the process is stopped (Ctrl-C or a signal).
    Returns only by raising: llama.cpp gave up (its reason is on stderr)."""
    start = rpc_function("ggml_backend_rpc_start_server", START_SERVER_FN)
    host = listen_address(host)
    if not 1 <= port <= 65535:
        raise UsageError(f"{opt('port')} must be between 1 and 65535, got {port}")
    threads = default_threads() if threads is None else threads
    if threads < 1:
        raise UsageError(f"{opt('threads')} must be at least 1, got {threads}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # a clear message for a taken port
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise UsageError(f"cannot listen on {host}:{port}: {(exc.strerror or str(exc)).lower()}; "
                             f"choose another {opt('port')} or {opt('host')}") from None
    devs = server_devices(devices)
    cache = None
    if cache_dir is not None:
        try:
            Path(cache_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create the cache folder {cache_dir}: {exc.strerror}") from None
        cache = str(Path(cache_dir).resolve()).encode()
    arr = (ctypes.c_void_p * len(devs))(*[d.handle for d in devs])
    endpoint = f"{host}:{port}".encode()

    def serve() -> None:
        import signal

        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})  # they go to the main thread
        start(endpoint, cache, threads, len(devs), arr)

    t = threading.Thread(target=serve, name="ggml-rpc-server", daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.5)  # the main thread stays interruptible (KeyboardInterrupt)
    raise RpcServerError(f"the RPC server on {host}:{port} stopped (llama.cpp's reason is above)")
