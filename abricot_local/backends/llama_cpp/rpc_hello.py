"""llama.cpp's RPC handshake, done here over a socket with a deadline before ggml-rpc connects.

ggml-rpc waits for a server's HELLO reply with no timeout, in the calling thread: a peer that
accepts the connection and never answers (a frozen server, another program on the port, a
server busy with another client) hangs the run before the model loads. So every server is
asked first, in Python, with one deadline for the connection and the reply:

    request:  cmd (1 byte, RPC_CMD_HELLO = 14) | size (u64 LE, 24) | conn_caps (24 zero bytes)
    reply:    size (u64 LE, 28) | major, minor, patch, padding (4 bytes) | conn_caps (24 bytes)

(ggml/src/ggml-rpc/ggml-rpc.cpp, rpc_serve_client and negotiate_hello; zero caps ask for no
transport upgrade.) The server then waits for the next command; closing the socket ends
that client, and the server accepts the next one (ggml-rpc's own connection). No llama_cpp
import: this is a plain socket exchange.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass

from abricot_local.backends.llama_cpp import interrupts
from abricot_local.errors import opt

RPC_CMD_HELLO = 14
CONN_CAPS_SIZE = 24  # RPC_CONN_CAPS_SIZE, ggml-rpc/transport.h
PROTOCOL = (7, 0)  # RPC_PROTO_MAJOR_VERSION, RPC_PROTO_MINOR_VERSION of ggml-rpc.h (llama-cpp-python 0.3.36)
HANDSHAKE_TIMEOUT = 5.0
_REPLY_SIZE = 4 + CONN_CAPS_SIZE
_SLICE = 0.1  # seconds between checks for a Ctrl-C while waiting


@dataclass(frozen=True)
class Refusal:
    """Why a server failed the handshake: ``reached`` is False when no TCP connection was made."""

    reached: bool
    why: str


class _Closed(Exception):
    pass


def split(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host, int(port)


def resolve(endpoint: str, timeout: float) -> tuple[str, int]:
    """``endpoint``'s address, found within ``timeout`` seconds (the system's resolver has no
    deadline of its own: it runs in a thread waited for, and a Ctrl-C goes through at once)."""
    host, port = split(endpoint)
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host.strip("[]"))
        return host.strip("[]"), port  # an address already
    except OSError:
        pass
    box: dict = {}

    def work() -> None:
        try:
            box["info"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            box["error"] = exc

    thread = threading.Thread(target=work, name="abricot-resolve", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"the host {host} was not resolved within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["info"][0][4][0], port


def _recv(sock: socket.socket, n: int, deadline: float) -> bytes:
    data = b""
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(min(left, _SLICE))
        try:
            chunk = sock.recv(n - len(data))
        except TimeoutError:
            if interrupts.pending() is not None:
                raise KeyboardInterrupt from None  # a signal recorded while llama.cpp's load waits on us
            continue
        if not chunk:
            raise _Closed(data)
        data += chunk
    return data


def handshake(endpoint: str, timeout: float = HANDSHAKE_TIMEOUT) -> Refusal | None:
    """None when a llama.cpp RPC server of this protocol answers HELLO at ``endpoint`` within
    ``timeout`` seconds (connection and reply together), else why not."""
    deadline = time.monotonic() + timeout
    try:
        address = resolve(endpoint, timeout)
        sock = socket.create_connection(address, timeout=max(deadline - time.monotonic(), 0.001))
    except socket.gaierror as exc:
        return Refusal(False, f"cannot resolve the host ({exc.strerror or exc})")
    except TimeoutError as exc:
        return Refusal(False, str(exc) or f"no answer within {timeout:g} s")
    except OSError as exc:
        return Refusal(False, (exc.strerror or str(exc)).lower())
    with sock:
        try:
            sock.sendall(struct.pack("<BQ", RPC_CMD_HELLO, CONN_CAPS_SIZE) + bytes(CONN_CAPS_SIZE))
            head = _recv(sock, 8, deadline)
            (size,) = struct.unpack("<Q", head)
            if size != _REPLY_SIZE:
                return Refusal(True, f"answered llama.cpp's RPC handshake with something else ({head!r}...): "
                                     "it is not a llama.cpp rpc-server")
            reply = _recv(sock, size, deadline)
        except TimeoutError:
            return Refusal(True, f"accepted the connection but did not answer llama.cpp's RPC handshake within "
                                 f"{timeout:g} s: it is frozen, busy with another run, or not an rpc-server "
                                 f"({opt('rpc_timeout')} sets the wait)")
        except _Closed as exc:
            got = f" after {exc.args[0]!r}" if exc.args[0] else ""
            return Refusal(True, f"closed the connection during llama.cpp's RPC handshake{got}: it is not an "
                                 "rpc-server of this llama-cpp-python version")
        except OSError as exc:
            return Refusal(True, f"failed during llama.cpp's RPC handshake ({(exc.strerror or str(exc)).lower()})")
    major, minor, patch = reply[:3]
    if major != PROTOCOL[0] or minor > PROTOCOL[1]:
        return Refusal(True, f"speaks llama.cpp's RPC protocol {major}.{minor}.{patch}, this machine "
                             f"{PROTOCOL[0]}.{PROTOCOL[1]}: run the same llama-cpp-python version on both")
    return None
