"""What `run MODEL --quants Q,Q,Q` costs against the same quants run one command each.

A ladder of three registry entries of one model (``base``, ``quant``), here of the fake backend
(``source = "synthetic"``: no model file, so the figure is the tool's own cost: the process, the
data, the plan, the sweep's report and verdicts, not llama.cpp's), on DISCOTEX items drawn with
the seed: the wall time of one `run --quants` against three `run` commands, best of ``--repeat``,
and their ratio, in one run of this script. A real ladder adds what loading each model costs
either way (the same in both).

    python bench/quants.py --data-dir data/discotex --sample 100
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from throughput import publish  # noqa: E402

QUANTS = (("q8", "Q8_0"), ("q5", "Q5_K_M"), ("q4", "Q4_K_M"))
LADDER = "".join(f'[bench-{k}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\nbase = "Bench"\nn_ctx = 8192\n\n'
                 for k, q in QUANTS)


def cli(*args: str) -> float:
    """Seconds one `abricot-local` command takes (a failure ends the script with its error)."""
    cmd = [sys.executable, "-m", "abricot_local", *args]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr[-2000:]}")
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True, help="the DISCOTEX release's folder")
    p.add_argument("--sample", type=int, default=100, help="DISCOTEX items per run")
    p.add_argument("--repeat", type=int, default=2, help="the best of this many of each")
    p.add_argument("--no-readme", action="store_true", help="print only; leave bench/README.md as it is")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models.toml"
        models.write_text(LADDER, encoding="utf-8")
        task = ["--tasks", "discotex", "--data-dir", args.data_dir, "--sample", str(args.sample), "--models", str(models)]
        ladder, separate = [], []
        for k in range(args.repeat):
            ladder.append(cli("run", "bench-q8", "--quants", ",".join(q for _, q in QUANTS), *task,
                              "--out", f"{tmp}/ladder{k}"))
            separate.append(sum(cli("run", f"bench-{name}", *task, "--out", f"{tmp}/sep{k}-{name}")
                                for name, _ in QUANTS))
    one, three = min(ladder), min(separate)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    table = "\n".join([
        f"Measured {when} by `python bench/quants.py --sample {args.sample}` on {platform.machine()}, "
        f"{os.cpu_count()} cores (fake backend: the tool's own cost; best of {args.repeat}).",
        "",
        "| three quants of one model | wall seconds |",
        "|---|---|",
        f"| `run bench-q8 --quants Q8_0,Q5_K_M,Q4_K_M` (one command, a sweep) | {one:.1f} |",
        f"| three `run bench-qX` commands | {three:.1f} |",
        f"| ratio (one command / three) | {one / three:.2f} |"])
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "sample": args.sample,
           "repeat": args.repeat, "ladder_s": ladder, "separate_s": separate,
           "ratio": one / three}
    publish(doc, "quants", table, None if args.no_readme else "quants", "## `run --quants` against separate runs (`quants.py`)")


if __name__ == "__main__":
    main()
