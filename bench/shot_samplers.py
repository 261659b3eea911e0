"""ABRICOT's two shot samplers, measured: what the paper protocol costs beside one draw for all.

The paper's protocol (lm-eval's sampler: every item its own 3 shots, so no two items share a
prefix) against ``--shot-sampler shared`` (one draw of 3 for every item: one prefix, its KV
cache computed once), on the real release, per model: items/s of ``abricot_abs`` as `run`
scores it (its ``tasks.<task>.seconds``), the tokens decoded, and what ``run --dry-run
--json`` predicted for each after ``--calibrate`` measured the model (its calibration
replacing this machine's entry), so the dry run is seen to count the per-item shot contexts.

    abricot-local data pull abricot && python bench/shot_samplers.py
    python bench/shot_samplers.py --data dataset_it.csv --models gemma-3-270m --sample 40
"""

from __future__ import annotations

import argparse
import json
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

SAMPLERS = (("lm-eval", "paper protocol (lm-eval's sampler, per item)"), ("shared", "one draw for all (shared)"))


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "abricot_local", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr[-2000:]}")
    return res


def common(model: str, sampler: str, args) -> list[str]:
    out = [model, "--tasks", "abricot_abs", "--protocol", "paper", "--shot-sampler", sampler,
           "--data", f"abricot={args.data}"]
    out += ["--sample", str(args.sample)] if args.sample else []
    return out + (["--threads", str(args.threads)] if args.threads else [])


def measure(model: str, sampler: str, args, env: dict) -> dict:
    """One run: the task's scoring seconds and items, its tokens from the dry run's count."""
    plan = json.loads(cli("run", *common(model, sampler, args), "--dry-run", "--json", env=env).stdout)
    task = plan["models"][0]["tasks"][0]
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        cli("run", *common(model, sampler, args), "--out", out, env=env)
        wall = time.perf_counter() - t0
        doc = json.loads((Path(out) / "results.json").read_text())
    entry = doc["tasks"]["abricot_abs"]
    return {"sampler": sampler, "items": entry["n"], "score_s": entry["seconds"], "wall_s": wall,
            "items_s": entry["n"] / entry["seconds"], "tokens": task["tokens"], "decode_calls": task["decode_calls"],
            "predicted_s": task["seconds"], "threads": doc["provenance"].get("threads"),
            "kernels": doc["provenance"].get("kernels", {}).get("build")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gemma-3-270m,smollm2-135m-pypi")
    ap.add_argument("--data", default=None, help="the ABRICOT release, dataset_it.csv (default: the user cache, "
                    "where `abricot-local data pull abricot` puts it)")
    ap.add_argument("--sample", type=int, default=None, help="score N items (default: all 127)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--label", default=platform.node(), help="machine name for the table")
    ap.add_argument("--no-readme", action="store_true", help="do not update bench/README.md")
    args = ap.parse_args()
    if args.data is None:
        sys.path.insert(0, str(ROOT))
        from abricot_local.models import fetch

        args.data = str(fetch.cache_dir() / "data" / "abricot" / "dataset_it.csv")
    rows = []
    env = {"TQDM_DISABLE": "1"}  # the user cache: where the models are (a calibration here replaces its entry)
    for model in args.models.split(","):
        cli("run", *common(model, "shared", args), "--dry-run", "--calibrate", env=env)  # calibrated first
        got = {s: measure(model, s, args, env) for s, _ in SAMPLERS}
        for sampler, label in SAMPLERS:
            r = got[sampler]
            rows.append({"model": model, "label": label, **r, "speedup": r["items_s"] / got["lm-eval"]["items_s"]})
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": args.label,
           "cpu_count": os.cpu_count(), "data": args.data, "rows": rows}
    publish(doc, "shot-samplers", format_table(doc), None if args.no_readme else "shot-samplers",
            "## ABRICOT shot samplers")


def format_table(doc: dict) -> str:
    rows = doc["rows"]
    head = (f"abricot_abs, {rows[0]['items']} items, 3 shots; {doc['machine']}, {rows[0]['threads']} threads, "
            f"{rows[0]['kernels']} build; items/s from the task's scoring seconds; predicted: `run --dry-run` "
            "after `--calibrate`, its seconds for the task (scoring, no load)\n\n")
    lines = ["| model | shots drawn | tokens | decode calls | scoring s | items/s | vs paper | predicted s | run wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pred = f"{r['predicted_s']:.1f}" if r["predicted_s"] is not None else "n/a"
        lines.append(f"| {r['model']} | {r['label']} | {r['tokens']} | {r['decode_calls']} | {r['score_s']:.1f} "
                     f"| {r['items_s']:.2f} | {r['speedup']:.2f}x | {pred} | {r['wall_s']:.1f} |")
    return head + "\n".join(lines)


if __name__ == "__main__":
    main()
