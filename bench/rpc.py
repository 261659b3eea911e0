"""Local llama.cpp against llama.cpp RPC over loopback: same model, same items, one run.

Starts `abricot-local rpc-server` processes on 127.0.0.1 (the CPU device, --threads
each), then scores the same DISCOTEX items with the whole model local, with its layers
on one server, and split across two (default split: by free memory), all without
repacked weights (an RPC server's CPU device has none). Prints a table
(load seconds, including sending the weights; tokens evaluated per wall second of
scoring; max |logprob difference| against local) and appends it to bench/README.md.

    python bench/rpc.py --limit 20
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from abricot_local.models.locate import resolve_model_ref  # noqa: E402
from abricot_local.backends.llama_cpp.backend import LlamaCppOptions  # noqa: E402
from abricot_local.tasks.selection import prepare  # noqa: E402
from throughput import publish  # noqa: E402  (bench/ is this script's own folder)
from abricot_local.tasks import make_task  # noqa: E402
from abricot_local.tasks.base import TaskOptions  # noqa: E402

MARK = "rpc"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(threads: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "abricot_local", "rpc-server", "--port", str(port),
                             "--threads", str(threads)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"rpc-server on port {port} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"rpc-server on port {port} did not start")


def measure(model, items, opts: LlamaCppOptions) -> dict:
    from throughput import open_llama

    t0 = time.perf_counter()
    b = open_llama(model, threads=opts.threads, engine=opts.engine, rpc=opts.rpc, extra_bufts=opts.extra_bufts)
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    logprobs = [b.score(it.request()).logprobs for it in items]
    wall = time.perf_counter() - t0
    row = {"load_s": load, "wall_s": wall, "tokens": b.counters.tokens, "tok_s": b.counters.tokens / wall,
           "logprobs": logprobs, "layers": b.provenance().extra.get("rpc", {}).get("layers")}
    b.close()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gemma-3-270m")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--data-dir", default=None,
                    help="the DISCOTEX release folder (default: the user cache, where `abricot-local data pull discotex` puts it)")
    ap.add_argument("--threads", type=int, default=2, help="threads of the local run and of each server")
    ap.add_argument("--label", default=platform.node(), help="machine name for the table")
    ap.add_argument("--no-readme", action="store_true", help="do not update bench/README.md")
    args = ap.parse_args()

    task = make_task("discotex", TaskOptions(data_dir=args.data_dir, allow_download=False))
    items = list(prepare([task], args.limit)[0].items)
    items.sort(key=lambda it: it.prefix)  # as the runner orders them
    model = resolve_model_ref(args.model).path
    servers = [start_server(args.threads) for _ in range(2)]
    try:
        eps = [ep for _, ep in servers]
        setups = [("local", ()), ("RPC, 1 loopback server", (eps[0],)), ("RPC, 2 loopback servers", tuple(eps))]
        rows = []
        for label, rpc in setups:
            # no extra buffer types: an RPC server's CPU device has no repacked weights, so the local
            # run uses the same kernels (and llama.cpp's AMX ones crash on AMX machines: #20824)
            opts = LlamaCppOptions(threads=args.threads, engine="prefix", rpc=rpc, extra_bufts="off")
            r = measure(model, items, opts)
            rows.append({"setup": label, **r})
            print(f"{label}: {r['tok_s']:.0f} tok/s", file=sys.stderr)
    finally:
        for proc, _ in servers:
            proc.kill()
            proc.wait()
    base = np.array(rows[0]["logprobs"])
    for r in rows:
        r["max_abs_diff_vs_local"] = float(np.max(np.abs(np.array(r.pop("logprobs")) - base)))
        r["vs_local"] = r["tok_s"] / rows[0]["tok_s"]
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": args.label,
           "cpu_count": os.cpu_count(), "threads": args.threads, "model": str(model),
           "model_mb": round(Path(model).stat().st_size / 2**20, 1), "items": len(items), "rows": rows}
    publish(doc, "rpc", format_table(doc), None if args.no_readme else MARK,
            "## Local against RPC over loopback (`rpc.py`)")


def format_table(doc: dict) -> str:
    head = (f"rpc: DISCOTEX, {doc['items']} items, prefix engine; {doc['machine']} ({doc['cpu_count']} cores), "
            f"{doc['threads']} threads for the local run and for each server (CPU device), --extra-bufts off; model "
            f"{doc['model_mb']} MB. Command: `python bench/rpc.py --limit {doc['items']} --threads {doc['threads']}`\n\n")
    lines = ["| setup | layers (device: count) | load s | tokens | wall s | tok/s | vs local | max abs diff vs local |",
             "|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        layers = ", ".join(f"{k} {v}" for k, v in (r["layers"] or {"CPU": "all"}).items())
        lines.append(f"| {r['setup']} | {layers} | {r['load_s']:.2f} | {r['tokens']} | {r['wall_s']:.2f} "
                     f"| {r['tok_s']:.0f} | {r['vs_local']:.2f}x | {r['max_abs_diff_vs_local']:.2g} |")
    return head + "\n".join(lines)


if __name__ == "__main__":
    main()
