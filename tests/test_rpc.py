"""llama.cpp RPC over loopback: two `abricot-local rpc-server` processes take gemma-3-270m's
layers; the numbers equal a local run's, and a server killed mid-run gives one clean error,
keeps the checkpoint, and the resumed run equals an uninterrupted one.

Every server, and every run that reaches ggml-rpc, is a subprocess (ggml-rpc ends the process
when a server goes away, which must not be pytest's); what is refused before it, runs in this one.
Only 127.0.0.1 is used. Under CI=true nothing here skips: a llama-cpp-python built without
GGML_RPC, or missing data, fails.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import isolated_env

CI = os.environ.get("CI", "").lower() == "true"
RUN = [sys.executable, "-m", "abricot_local"]


def _need(ok: bool, why: str) -> None:
    if not ok:
        if CI:
            pytest.fail(f"CI=true: {why}")
        pytest.skip(why)


@pytest.fixture(scope="module", autouse=True)
def rpc_build():
    from abricot_local.backends.llama_cpp import rpc

    _need(rpc.available(), f"this llama-cpp-python was built without RPC; reinstall with: {rpc.REINSTALL}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `abricot-local rpc-server` on 127.0.0.1 (the CPU device), killed at teardown."""

    def __init__(self, log_dir: Path, port: int | None = None, host: str = "127.0.0.1"):
        self.port = port or free_port()
        self.host = host
        self.endpoint = f"127.0.0.1:{self.port}"
        self.log = log_dir / f"server-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Server":
        return self.launch().listening()

    def launch(self) -> "Server":
        """The process started, not waited for (:meth:`listening`): several start at once."""
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen([*RUN, "rpc-server", "--host", self.host, "--port", str(self.port),
                                          "--threads", "1"], stdout=fh, stderr=subprocess.STDOUT)
        return self

    def listening(self) -> "Server":
        """Once it accepts connections."""
        deadline = time.time() + 60
        while time.time() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.02)
        raise AssertionError(f"rpc-server on {self.endpoint} did not start: {self.log.read_text()}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def servers(tmp_path):
    made: list[Server] = []

    def start(n: int = 2) -> list[Server]:
        new = [Server(tmp_path).start() for _ in range(n)]
        made.extend(new)
        return new

    start.made = made
    yield start
    for s in made:
        s.kill()


@pytest.fixture
def data_dir(discotex_dir):
    return str(discotex_dir)


@pytest.fixture
def vocab_gguf(vocab_dir) -> Path:
    """A vocabulary-only GGUF: enough for what is refused before any weight is read."""
    return vocab_dir / "ggml-vocab-llama-bpe.gguf"


def run(model, data_dir, out, *extra, timeout=600, limit=4):
    args = [*RUN, "run", str(model), "--tasks", "discotex", "--data-dir", data_dir, "--limit", str(limit),
            "--threads", "1", "--out", str(out), *map(str, extra)]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def samples(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "samples-discotex.jsonl").read_text().splitlines()]


# -- without a model -------------------------------------------------------------------------
def test_endpoints_are_checked():
    from abricot_local.backends.llama_cpp.options import parse_endpoints
    from abricot_local.errors import UsageError

    assert parse_endpoints("127.0.0.1:50052, 10.0.0.2:1") == ("127.0.0.1:50052", "10.0.0.2:1")
    for bad in ("127.0.0.1", "127.0.0.1:0", "127.0.0.1:x", ":50052", "a:1,a:1", ","):
        with pytest.raises(UsageError, match="^rpc "):  # the option, by its field
            parse_endpoints(bad)
    for v6 in ("::1:50052", "[::1]:50052"):  # ggml-rpc would cut it at the first colon
        with pytest.raises(UsageError, match="IPv4 only.*localhost"):
            parse_endpoints(v6)


def test_server_warns_when_not_on_loopback_and_refuses_a_taken_port(rpc_children):
    from abricot_local.backends.llama_cpp.rpc_server import exposed_warning, listen_address
    from abricot_local.errors import UsageError

    assert exposed_warning("127.0.0.1", 50052) is None and exposed_warning("127.0.0.2", 50052) is None
    text = exposed_warning("0.0.0.0", 50052)
    assert "Never expose the RPC server to an open network" in text and "no authentication" in text
    assert [listen_address(h) for h in ("localhost", "::1", "127.0.0.1", "0.0.0.0")] == \
        ["127.0.0.1", "127.0.0.1", "127.0.0.1", "0.0.0.0"]
    for bad, why in (("2001:db8::1", "IPv4 only"), ("no-such-host.invalid", "neither an IPv4 address nor a name")):
        with pytest.raises(UsageError, match=why):
            listen_address(bad)
    got = driven(rpc_children["taken_port"])  # TAKEN_PORT: the port held, rpc-server on it
    port, r = got["port"], subprocess.CompletedProcess(RUN, got["returncode"], "", got["stderr"])
    assert r.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr
    r = CliRunner().invoke(cli, ["rpc-server", "--host", "2001:db8::1"])  # refused before any server starts
    assert r.exit_code == 2 and "IPv4 only" in r.output and "WARNING" not in r.output  # refused, not warned about


def test_server_on_a_loopback_name_serves_without_the_warning(tmp_path):
    """`--host localhost` or `::1` used to print the exposure warning, then reject the address."""
    from abricot_local.backends.llama_cpp.rpc_hello import handshake

    ports = [free_port()]
    while len(ports) < 2:  # two at once: two ports
        ports += [p for p in (free_port(),) if p not in ports]
    made = [Server(tmp_path, port, host=host) for port, host in zip(ports, ("localhost", "::1"))]
    try:
        for server in [s.launch() for s in made]:
            assert handshake(server.listening().endpoint, timeout=10) is None
    finally:
        for server in made:
            server.kill()
    for server in made:
        log = server.log.read_text()
        assert "WARNING" not in log and "endpoint       : 127.0.0.1:" in log, log


# -- the handshake, asked before llama.cpp connects (issue 21, item 3) ----------------------------
class Peer:
    """A TCP peer on 127.0.0.1 that accepts and then: stays silent, closes, or answers ``reply``."""

    def __init__(self, mode: str, reply: bytes = b""):
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.endpoint = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.mode, self.reply, self.conns = mode, reply, []
        if mode != "silent":  # silent: the kernel accepts into the backlog, nobody reads
            threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        self.conns.append(conn)
        conn.recv(64)
        if self.mode == "reply":
            conn.sendall(self.reply)
            time.sleep(30)
        conn.close()

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


def test_the_handshake_names_a_silent_closing_foreign_or_other_version_server():
    import struct

    from abricot_local.backends.llama_cpp.rpc_hello import handshake

    hello_v6 = struct.pack("<Q", 28) + bytes([6, 0, 0, 0]) + bytes(24)
    cases = (
        (Peer("silent"), "did not answer llama.cpp's RPC handshake within 0.2 s: it is frozen, busy with another run"),
        (Peer("close"), "closed the connection during llama.cpp's RPC handshake"),
        (Peer("reply", b"HTTP/1.1 400 Bad Request\r\n\r\n"), "answered llama.cpp's RPC handshake with something "
                                                                 "else (b'HTTP/1.1'...): it is not a llama.cpp rpc-server"),
        (Peer("reply", hello_v6), "speaks llama.cpp's RPC protocol 6.0.0, this machine 7.0"),
    )
    for peer, why in cases:
        t0 = time.monotonic()
        try:
            refused = handshake(peer.endpoint, timeout=0.2 if peer.mode == "silent" else 0.5)  # silent: waits it out
        finally:
            peer.close()
        assert refused is not None and refused.reached and why in refused.why, (peer.mode, refused)
        assert time.monotonic() - t0 < 3
    refused = handshake(f"127.0.0.1:{free_port()}", timeout=0.5)
    assert refused is not None and not refused.reached and "refused" in refused.why


def test_the_timeout_is_the_backends_option(vocab_gguf):
    import dataclasses

    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend, LlamaCppOptions
    from abricot_local.backends.llama_cpp.rpc import RpcServerError

    field = {f.name: f for f in dataclasses.fields(LlamaCppOptions)}["rpc_timeout"]
    assert field.default == 5.0 and "handshake" in field.metadata["option"]["help"]
    peer = Peer("silent")
    t0 = time.monotonic()
    try:
        with pytest.raises(RpcServerError, match=f"the RPC server {peer.endpoint} accepted the connection but did "
                                                 "not answer llama.cpp's RPC handshake within 0.1 s"):
            LlamaCppBackend.preflight(vocab_gguf, LlamaCppOptions(rpc=(peer.endpoint,), rpc_timeout=0.1))
    finally:
        peer.close()
    assert time.monotonic() - t0 < 10  # 0.1 s for the handshake, not forever


def test_a_build_without_rpc_says_how_to_reinstall(monkeypatch):
    import llama_cpp

    from abricot_local.backends.llama_cpp import rpc

    monkeypatch.setattr(llama_cpp, "llama_supports_rpc", lambda: False)
    for args in (["run", "any.gguf", "--rpc", "127.0.0.1:50052"], ["rpc-server"]):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
        assert "built without RPC" in r.output and rpc.REINSTALL in r.output
    r = CliRunner().invoke(cli, ["doctor"])
    assert r.exit_code == 0 and f"not in this build; reinstall with: {rpc.REINSTALL}" in r.output


def test_lost_server_errors_name_it():
    from abricot_local.backends.llama_cpp.rpc import RpcServerError, _abort_error
    from abricot_local.errors import ModelError

    dead, alive = f"127.0.0.1:{free_port()}", "127.0.0.1:1"
    err = _abort_error(f"/src/ggml-rpc.cpp:547: Failed to connect to {dead}", (alive, dead))
    assert isinstance(err, RpcServerError) and str(err).startswith(f"lost the RPC server {dead} (llama.cpp: Failed")
    with socket.socket() as s:  # one server still listening, the other gone: the message names the gone one
        s.bind(("127.0.0.1", 0))
        s.listen()
        up = f"127.0.0.1:{s.getsockname()[1]}"
        err = _abort_error("/src/ggml-rpc.cpp:566: Remote RPC server crashed or returned malformed response", (up, dead))
    assert str(err) == f"lost the RPC server {dead} (llama.cpp: Remote RPC server crashed or returned malformed response)"
    with socket.socket() as s:  # both ports accept, but this process is connected only to one: the other is lost
        s.bind(("127.0.0.1", 0))
        s.listen()
        with socket.socket() as s2:
            s2.bind(("127.0.0.1", 0))
            s2.listen()
            up, gone = (f"127.0.0.1:{x.getsockname()[1]}" for x in (s, s2))
            with socket.create_connection(s.getsockname()):
                err = _abort_error("/src/ggml-rpc.cpp:566: Remote RPC server crashed", (up, gone))
    assert str(err) == f"lost the RPC server {gone} (llama.cpp: Remote RPC server crashed)"
    assert err.exit_code == 75
    other = _abort_error("/src/ggml.c:10: GGML_ASSERT(x) failed", (dead,))
    assert type(other) is ModelError and str(other) == "llama.cpp aborted: GGML_ASSERT(x) failed"


def test_unreachable_server_is_one_clear_error(vocab_gguf, data_dir, tmp_path):
    """In this process: refused by the probe, before ggml-rpc connects to anything."""
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    r = CliRunner().invoke(cli, ["run", str(vocab_gguf), "--tasks", "discotex", "--data-dir", data_dir, "--limit", "4",
                                 "--threads", "1", "--out", str(tmp_path / "o"), "--rpc", dead])
    assert r.exit_code == 75, r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error")]
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach the RPC server {dead}"), r.output
    assert "abricot-local rpc-server" in lines[0] and "Traceback" not in r.output
    assert not (tmp_path / "o" / "results.json").exists()


@pytest.mark.real
def test_a_silent_server_stops_the_run_in_the_timeout_with_one_line(gemma_path, data_dir, tmp_path):
    """It used to hang before loading (ggml-rpc waits for HELLO's answer forever), and a TERM then
    said the server was lost. (--rpc-timeout 0.5: its 5 s default is checked with the option, above.)"""
    peer = Peer("silent")
    t0 = time.monotonic()
    try:
        r = run(gemma_path, data_dir, tmp_path / "o", "--rpc", peer.endpoint, "--rpc-timeout", "0.5", timeout=120)
    finally:
        peer.close()
    assert r.returncode == 75, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error")]
    assert len(lines) == 1 and lines[0].startswith(f"error: the RPC server {peer.endpoint} accepted the connection "
                                                   "but did not answer llama.cpp's RPC handshake within 0.5 s"), \
        r.stderr
    assert "Traceback" not in r.stderr and "lost the RPC server" not in r.stderr
    assert time.monotonic() - t0 < 60 and not (tmp_path / "o").exists()


class HelloPeer:
    """A peer on 127.0.0.1 that completes llama.cpp's RPC HELLO on every connection (rpc_hello.py's
    protocol) and then never answers again: a server frozen after the handshake."""

    def __init__(self):
        import struct
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.endpoint = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.reply = struct.pack("<Q", 28) + bytes([7, 0, 0, 0]) + bytes(24)
        self.conns, self.hellos = [], 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            got = b""
            while len(got) < 33:  # cmd (1) | size (8) | conn_caps (24)
                chunk = conn.recv(33 - len(got))
                if not chunk:
                    break
                got += chunk
            if len(got) == 33 and got[0] == 14:
                self.hellos += 1
                conn.sendall(self.reply)

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


# The tests that only wait on processes, as drivers started once the tests are collected (conftest.start_early) and at
# the latest when this module starts (rpc_children), beside the in-process tests; each prints what its test reads.
TAKEN_PORT = """
import json, socket, subprocess, sys
with socket.socket() as s:  # a port taken: rpc-server refuses it
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    r = subprocess.run([sys.executable, "-m", "abricot_local", "rpc-server", "--port", str(port)], capture_output=True,
                       text=True, timeout=60)
print(json.dumps({"port": port, "returncode": r.returncode, "stderr": r.stderr}))
"""
# the run against a HelloPeer (its class, as above) in the driver's own thread, as run() makes it
SILENT_AFTER_HELLO = ("import json, socket, subprocess, sys, time\n" + inspect.getsource(HelloPeer) + """
peer = HelloPeer()
t0 = time.monotonic()
try:
    r = subprocess.run([*sys.argv[1:], "--rpc", peer.endpoint, "--rpc-timeout", "0.3"], capture_output=True, text=True,
                       timeout=120)
finally:
    peer.close()
print(json.dumps({"endpoint": peer.endpoint, "returncode": r.returncode, "stderr": r.stderr, "hellos": peer.hellos,
                  "seconds": time.monotonic() - t0}))
""")


def early_children(tmp_path_factory, vocab_dir=None, discotex_dir=None) -> dict:
    """TAKEN_PORT and SILENT_AFTER_HELLO in fresh processes (a private cache and config each, in its folder), the
    data sets where the suite finds them (none: no SILENT_AFTER_HELLO yet, its test's fixtures say why)."""
    import realdata
    from conftest import Early, isolated_env

    def child(root: Path, script: str, *args) -> Early:
        return Early([sys.executable, "-c", script, *map(str, args)], timeout=300, cwd=root,
                     env={**os.environ, **isolated_env(root)})

    made = {"taken_port": child(tmp_path_factory.mktemp("rpc-taken-port"), TAKEN_PORT)}
    try:
        vocab_dir = vocab_dir or realdata.obtain(realdata.VOCAB)
        data_dir = str(discotex_dir or realdata.obtain(realdata.DISCOTEX))
    except realdata.Missing:
        return made
    root = tmp_path_factory.mktemp("rpc-silent-after-hello")
    made["silent_after_hello"] = child(root, SILENT_AFTER_HELLO, *RUN, "run", vocab_dir / "ggml-vocab-llama-bpe.gguf",
                                       "--tasks", "discotex", "--data-dir", data_dir, "--limit", 4, "--threads", 1,
                                       "--out", root / "o")
    return made


def driven(child) -> dict:
    """What a driver printed, once it has ended."""
    r = child.result()
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def rpc_children(tmp_path_factory):
    """This module's early_children, each started now if its turn has not come."""
    from conftest import early_children_of

    children = early_children_of(__name__, early_children, tmp_path_factory)
    for child in children.values():
        child.start()
    yield children
    for child in children.values():
        child.close()


def test_a_server_silent_after_the_handshake_is_bounded_by_rpc_timeout(vocab_dir, discotex_dir, tmp_path_factory,
                                                                       rpc_children):
    """It used to hang inside ggml_backend_rpc_add_server (llama.cpp's own connection asks for the
    devices and waits forever): now every exchange before the load waits --rpc-timeout at most. (The run and
    its HelloPeer in a driver, SILENT_AFTER_HELLO, started beside the other tests: rpc_children.)"""
    child = rpc_children.get("silent_after_hello") or \
        early_children(tmp_path_factory, vocab_dir, discotex_dir)["silent_after_hello"]
    got = driven(child)
    r, endpoint = subprocess.CompletedProcess(RUN, got["returncode"], "", got["stderr"]), got["endpoint"]
    assert r.returncode == 75, r.stderr
    assert got["hellos"] >= 2  # ours, then llama.cpp's
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error")]
    assert len(lines) == 1 and lines[0] == (f"error: the RPC server {endpoint} answered the handshake but not "
                                            "llama.cpp's connection (its devices) within 0.3 s: it is frozen or not a "
                                            "llama.cpp rpc-server (--rpc-timeout sets the wait)"), r.stderr
    assert "Traceback" not in r.stderr and got["seconds"] < 60
    assert not (Path(child.popen["cwd"]) / "o").exists()


@pytest.mark.real  # llama.cpp's real ggml_backend_rpc_add_server, stuck on the peer
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_ends_a_run_stuck_on_a_server_silent_after_the_handshake(gemma_path, data_dir, tmp_path, sig):
    """SIGTERM and Ctrl-C were recorded and never acted on: only SIGKILL ended the run."""
    peer = HelloPeer()
    out = tmp_path / "o"
    args = [*RUN, "run", str(gemma_path), "--tasks", "discotex", "--data-dir", data_dir, "--limit", "2",
            "--threads", "1", "--out", str(out), "--rpc", peer.endpoint, "--rpc-timeout", "600"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while peer.hellos < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert peer.hellos >= 2, proc.communicate()
        time.sleep(0.5)  # llama.cpp now waits for the devices' answer
        sent = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the signal was not acted on") from None
    finally:
        peer.close()
    assert proc.returncode == 130 and time.monotonic() - sent < 10, (proc.returncode, err)
    assert "interrupted: nothing scored yet" in err and "Traceback" not in err
    assert not [ln for ln in err.splitlines() if ln.startswith("error")]
    assert not out.exists()


def test_a_real_server_answers_the_handshake_and_llama_cpp_connects_after_it(servers):
    """The protocol constants match this build's rpc-server, and the handshake's connection,
    once closed, leaves the server to ggml-rpc's own."""
    from abricot_local.backends.llama_cpp.rpc_hello import handshake

    (a,) = servers(1)
    assert handshake(a.endpoint, timeout=10) is None
    code = ("from abricot_local.backends.llama_cpp import rpc; "
            f"print([d.name for d in rpc.add_servers(['{a.endpoint}'], timeout=10)])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "['RPC0']", r.stderr


def test_doctor_says_rpc_is_available():
    r = CliRunner().invoke(cli, ["doctor"])
    assert r.exit_code == 0 and "RPC (llama.cpp over the network; run --rpc, rpc-server): available" in r.output


# -- gemma-3-270m over two loopback servers ---------------------------------------------------
LIMIT = 6  # items of the shared runs; the killed run is stopped after 2 of them


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory):
    """Two servers for this module's real runs (the killed-server test restarts one on its port)."""
    log_dir = tmp_path_factory.mktemp("rpc-logs")
    made = [Server(log_dir).start() for _ in range(2)]
    yield made
    for s in made:
        s.kill()


@pytest.fixture(scope="module")
def shared_runs(gemma_path, discotex_dir, two_servers, tmp_path_factory):
    """gemma-3-270m on the first LIMIT items, locally and with its layers on the two servers."""
    root = tmp_path_factory.mktemp("rpc-runs")
    a, b = two_servers[:2]
    with pytest.MonkeyPatch.context() as mp:  # a module fixture runs before any test's isolated_home
        for key, value in isolated_env(root).items():
            mp.setenv(key, value)
        local = run(gemma_path, str(discotex_dir), root / "local", "--extra-bufts", "off", limit=LIMIT)  # an RPC server has no repacked weights
        remote = run(gemma_path, str(discotex_dir), root / "rpc", "--rpc", f"{a.endpoint},{b.endpoint}", limit=LIMIT)
    assert local.returncode == 0, local.stderr
    assert remote.returncode == 0, remote.stderr
    return root / "local", root / "rpc"


@pytest.mark.real
def test_layers_on_two_servers_give_the_local_logprobs(shared_runs, two_servers):
    a, b = two_servers[:2]
    local, rpc = shared_runs
    got, want = samples(rpc), samples(local)
    assert len(got) == LIMIT
    assert [s["logprobs"] for s in got] == [s["logprobs"] for s in want]  # bit-identical
    assert (rpc / "samples-discotex.jsonl").read_bytes() == (local / "samples-discotex.jsonl").read_bytes()
    prov = json.loads((rpc / "results.json").read_text())["provenance"]["rpc"]
    assert prov["servers"] == [a.endpoint, b.endpoint]
    assert [d["endpoint"] for d in prov["devices"]] == [a.endpoint, b.endpoint]
    assert all(d["memory_total"] >= d["memory_free"] > 0 for d in prov["devices"])
    assert abs(sum(prov["tensor_split"]) - 1) < 1e-6
    names = [d["name"] for d in prov["devices"]]
    assert prov["layers"]["CPU"] == 0 and all(prov["layers"][n] > 0 for n in names)  # split across both
    assert sum(prov["layers"].values()) == 18 + 1  # gemma-3-270m: 18 layers and the output layer
    assert "rpc" not in json.loads((local / "results.json").read_text())["provenance"]


@pytest.mark.real
def test_server_killed_mid_run_then_resume_equals_an_uninterrupted_run(gemma_path, data_dir, two_servers, shared_runs,
                                                                         tmp_path):
    a, b = two_servers[:2]
    spec = f"{a.endpoint},{b.endpoint}"
    ref = shared_runs[1]  # the same command, uninterrupted

    out = tmp_path / "killed"
    args = [*RUN, "run", str(gemma_path), "--tasks", "discotex", "--data-dir", data_dir, "--limit", str(LIMIT),
            "--threads", "1", "--out", str(out), "--rpc", spec]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ck = out / ".checkpoint" / "samples-discotex.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not (ck.exists() and len(ck.read_bytes().splitlines()) >= 2):
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    b.kill()
    try:
        stdout, stderr = proc.communicate(timeout=120)  # no hang
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 75, stderr
    assert "Traceback" not in stderr and "ggml_abort" not in stderr
    error = [ln for ln in stderr.splitlines() if ln.startswith("error: ")]
    assert len(error) == 1 and f"lost the RPC server {b.endpoint}" in error[0] and a.endpoint not in error[0], stderr
    assert "--resume" in stderr
    kept = ck.read_text().splitlines()
    assert 2 <= len(kept) < LIMIT and not (out / "results.json").exists()
    assert not (out / "RUNNING").exists() and f"lost the RPC server {b.endpoint}" in (out / "FAILED").read_text()
    assert stderr.count(f"lost the RPC server {b.endpoint}") == 1 and not (out / ".lock").exists()

    again = run(gemma_path, data_dir, out, "--rpc", spec, "--resume", limit=LIMIT)
    assert again.returncode == 75 and f"cannot reach the RPC server {b.endpoint}" in again.stderr  # still down
    two_servers.append(Server(tmp_path, b.port).start())  # back on the same port
    done = run(gemma_path, data_dir, out, "--rpc", spec, "--resume", limit=LIMIT)
    assert done.returncode == 0, done.stderr
    assert (out / "samples-discotex.jsonl").read_bytes() == (ref / "samples-discotex.jsonl").read_bytes()
    doc = json.loads((out / "results.json").read_text())
    assert doc["tasks"]["discotex"]["scored_now"] == LIMIT - len(kept)


# -- lm-eval's model over the same servers ----------------------------------------------------
LM_EVAL = r"""
import json, sys
from lm_eval.api.instance import Instance
from lm_eval.utils import simple_parse_args_string
from abricot_local.lm_eval.model import AbricotLM
lm = AbricotLM(model=sys.argv[1], **simple_parse_args_string(sys.argv[2]))  # as lm-eval's --model_args
reqs = [Instance("loglikelihood", {}, tuple(p), 0) for p in json.loads(sys.argv[3])]
print(json.dumps({"ll": lm.loglikelihood(reqs, disable_tqdm=True), "info": lm.get_model_info()["abricot_local"]}))
lm.close()
"""


@pytest.mark.real
def test_lm_eval_model_args_rpc_gives_the_local_numbers(gemma_path, servers):
    """`abricot-local lm-eval MODEL --model_args rpc=A;B,...`: lm-eval's model opens the model as
    `run --rpc` does (the servers' memory in the check), and scores what a local run scores."""
    _need(importlib.util.find_spec("lm_eval") is not None, 'lm-eval is not installed: pip install "abricot-local[test]"')
    a, b = servers(2)
    pairs = [["Domanda: qual è la capitale d'Italia?\nRisposta:", " Roma"],
             ["Domanda: qual è la capitale d'Italia?\nRisposta:", " Parigi"],
             ["Il gatto dorme", " sul divano."]]

    def score(model_args: str) -> dict:
        r = subprocess.run([sys.executable, "-c", LM_EVAL, str(gemma_path), model_args, json.dumps(pairs)],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    local = score("n_ctx=512,threads=1,extra_bufts=off")  # an RPC server has no repacked weights
    remote = score(f"n_ctx=512,threads=1,rpc={a.endpoint};{b.endpoint}")
    assert remote["ll"] == local["ll"]  # bit-identical, as run --rpc
    assert remote["info"]["rpc"]["servers"] == [a.endpoint, b.endpoint] and "rpc" not in local["info"]
    assert remote["info"]["model"]["sha256"] == local["info"]["model"]["sha256"]
    assert remote["info"]["model"]["source"] == "path"
