"""`rpc-server`: serve this machine's devices to `run --rpc`."""

from __future__ import annotations

import sys

import click

from abricot_local.cli.app import cli, echo


@cli.command("rpc-server")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="IPv4 address (or name) to listen on; any but a loopback one (127.0.0.1, localhost, ::1) exposes "
                   "this machine (no authentication).")
@click.option("--port", type=click.IntRange(1, 65535), default=50052, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Threads of the CPU device (default: half the cores).")
@click.option("--device", "devices", multiple=True,
              help="Device to serve (CUDA0, CPU...; repeat or comma-separate). Default: every GPU, else the CPU.")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False), default=None,
              help="Folder keeping received tensors by hash, so the next load of the same model is local.")
def rpc_server(host: str, port: int, threads: int | None, devices: tuple[str, ...], cache_dir: str | None) -> None:
    """Serve this machine's devices to `run --rpc` with llama.cpp's RPC protocol, until stopped (Ctrl-C)."""
    from abricot_local.backends.llama_cpp import rpc, rpc_server

    rpc.require()
    host = rpc_server.listen_address(host)  # a name or address refused here gets no warning first
    warning = rpc_server.exposed_warning(host, port)
    if warning:
        echo(warning, err=True)
    names = tuple(n.strip() for d in devices for n in d.split(",") if n.strip())
    try:
        rpc_server.start_server(host, port, threads, names, cache_dir)
    except KeyboardInterrupt:
        echo("\nRPC server stopped", err=True)
        sys.exit(130)
