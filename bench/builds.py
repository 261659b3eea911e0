"""What a build and the extra buffer types cost in speed: `abricot-local run` in each given
Python environment (the same llama-cpp-python built portable and native), with
``--extra-bufts off`` (the default) and ``on``, in one run of this script.

    python bench/builds.py --python portable=/path/venv/bin/python \\
        --python native=/path/venv-native/bin/python --sample 12 --rounds 2

Every environment runs this checkout's abricot_local (PYTHONPATH), only its llama_cpp differs.
The settings run interleaved, round after round (portable off, portable on, native off, ...),
so a slow minute of a shared machine falls on all of them alike. Per setting: the items/s of
the scoring (results.json's task seconds; the best round and the median), the CPU seconds of
the scoring, the kernels the run recorded, and its speed as a ratio to the first setting
within each round. And whether the predictions and log-probs equal the first setting's: the
builds' numbers differ (docs/numerics.md#a-portable-build), the speeds are what this measures.

The table goes to bench/README.md (its `builds` markers) unless --no-readme.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from child import run_child  # noqa: E402
from throughput import publish  # noqa: E402

MARK = "builds"


def measure(python: str, model: str, xb: str, args) -> dict:
    """One `run` in a child process of ``python``; scoring seconds, CPU seconds, kernels, samples."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [python, "-m", "abricot_local", "run", model, "--tasks", "discotex", "--sample", str(args.sample),
               "--threads", str(args.threads), "--data-dir", args.data_dir, "--extra-bufts", xb, "--out", out]
        c = run_child(cmd, lambda _: (Path(out) / "RUNNING").exists(), env={**os.environ, "PYTHONPATH": str(ROOT)})
        if c.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({c.returncode}): {c.stderr[-2000:]}")
        doc = json.loads((Path(out) / "results.json").read_text())
        lines = (Path(out) / "samples-discotex.jsonl").read_text().splitlines()
    task = doc["tasks"]["discotex"]
    samples = {s["id"]: (s["pred"], s["logprobs"]) for s in map(json.loads, lines)}
    k = doc["provenance"].get("kernels") or {}
    return {"score_s": task["seconds"], "items": task["n"], "cpu_s": c.cpu_after_start_s, "wall_s": c.wall_s,
            "kernels": f"{k.get('build', '?')} build, extra buffer types {'on' if k.get('extra_bufts') else 'off'}: "
                       f"{' '.join(k.get('cpu_features') or []) or '?'}",
            "samples": samples}


def table(doc: dict) -> str:
    rows = doc["rows"]
    base = rows[0]
    out = [f"{doc['created'][:10]}, {doc['machine']}: {doc['model']}, {doc['sample']} DISCOTEX items (`--sample`), "
           f"{doc['threads']} threads, {doc['rounds']} interleaved rounds; items/s of the scoring (best / median), "
           f"and each setting against `{base['setting']}` within a round (median of the rounds).", "",
           "| setting | kernels | items/s best | items/s median | CPU s (median) | vs first | same predictions | "
           "max abs Δ log-prob |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['setting']} | {r['kernels']} | {r['best']:.3f} | {r['median']:.3f} | {r['cpu_median']:.1f} | "
                   f"{r['ratio']:.2f}x | {r['same_pred']}/{r['items']} | {r['max_diff']:.3g} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", action="append", required=True, metavar="NAME=PATH",
                    help="an environment's Python (its llama-cpp-python build); the first is the baseline")
    ap.add_argument("--model", default="gemma-3-270m")
    ap.add_argument("--sample", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--extra-bufts", default="off,on", help="the values to run, comma-separated")
    ap.add_argument("--data-dir", required=True, help="the DISCOTEX release folder")
    ap.add_argument("--label", default="", help="machine name for the table (default: the CPU and cores)")
    ap.add_argument("--no-readme", action="store_true")
    args = ap.parse_args()
    envs = [tuple(p.split("=", 1)) for p in args.python]
    settings = [(name, py, xb) for name, py in envs for xb in args.extra_bufts.split(",")]
    runs: dict[str, list[dict]] = {f"{n}, extra buffer types {xb}": [] for n, _, xb in settings}
    for r in range(args.rounds):
        for name, py, xb in settings:
            m = measure(py, args.model, xb, args)
            runs[f"{name}, extra buffer types {xb}"].append(m)
            print(f"round {r + 1}: {name} {xb}: {m['items'] / m['score_s']:.3f} items/s", file=sys.stderr, flush=True)
    first = next(iter(runs.values()))
    rows = []
    for setting, ms in runs.items():
        speeds = [m["items"] / m["score_s"] for m in ms]
        ratio = statistics.median(first[i]["score_s"] / m["score_s"] for i, m in enumerate(ms))
        ref, got = first[0]["samples"], ms[0]["samples"]
        diffs = [abs(a - b) for k in ref for a, b in zip(ref[k][1], got[k][1])]
        rows.append({"setting": setting, "kernels": ms[0]["kernels"], "items": ms[0]["items"], "best": max(speeds),
                     "median": statistics.median(speeds), "ratio": ratio,
                     "cpu_median": statistics.median(m["cpu_s"] or float("nan") for m in ms),
                     "same_pred": sum(ref[k][0] == got[k][0] for k in ref), "max_diff": max(diffs)})
    from scale import machine

    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": args.label or machine(),
           "model": args.model, "sample": args.sample, "threads": args.threads, "rounds": args.rounds, "rows": rows}
    publish(doc, "builds", table(doc), None if args.no_readme else MARK)


if __name__ == "__main__":
    main()
