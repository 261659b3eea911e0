"""What `--prompt-variant all` costs against one run per variant, in one run of this script.

Per model, DISCOTEX on the same drawn items: one `run --prompt-variant all` (both wordings, one
process, one model load, one plan) against `run --prompt-variant card` then `run --prompt-variant
ita-bench` (two processes, two loads, two plans), each as a user runs it (a subprocess, its wall
time), the order alternated over ``--repeat`` rounds. It prints the wall seconds, the scoring
seconds of every variant (``tasks.<key>.seconds``) and their ratio, and checks that every variant's
samples file is the same bytes either way (a number never depends on how the run was cut).

    python bench/prompt_variants.py --data-dir DIR                 # gemma-3-270m, 20 items
    python bench/prompt_variants.py --data-dir DIR --models gemma-3-270m,smollm2-135m-pypi --sample 40
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

VARIANTS = ("card", "ita-bench")


def cli(*args: str) -> float:
    """Run one command line; its wall seconds."""
    cmd = [sys.executable, "-m", "abricot_local", *args]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"})
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr[-2000:]}")
    return time.perf_counter() - t0


def one(model: str, variant: str, args, out: Path) -> tuple[float, dict]:
    """(wall seconds, the record) of one run."""
    line = [model, "--tasks", "discotex", "--data-dir", args.data_dir, "--prompt-variant", variant,
            "--sample", str(args.sample), "--out", str(out)]
    wall = cli("run", *line, *(["--threads", str(args.threads)] if args.threads else []))
    return wall, json.loads((out / "results.json").read_text())


def samples(out: Path, doc: dict, key: str) -> bytes:
    return (out / doc["tasks"][key]["samples_file"]).read_bytes()


def measure(model: str, args) -> dict:
    rounds = []
    for k in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            order = ["all", "separate"] if k % 2 == 0 else ["separate", "all"]
            got: dict = {}
            for what in order:
                if what == "all":
                    got["all"] = one(model, "all", args, root / "all")
                else:
                    got["separate"] = {v: one(model, v, args, root / v) for v in VARIANTS}
            wall_all, doc = got["all"]
            keys = list(doc["tasks"])  # discotex, discotex~ita-bench
            same = all(samples(root / "all", doc, key) == samples(root / v, got["separate"][v][1], "discotex")
                       for key, v in zip(keys, VARIANTS))
            rounds.append({
                "wall_all_s": wall_all, "wall_separate_s": sum(w for w, _ in got["separate"].values()),
                "score_all_s": sum(doc["tasks"][key]["seconds"] for key in keys),
                "score_separate_s": sum(d["tasks"]["discotex"]["seconds"] for _, d in got["separate"].values()),
                "same_samples": same, "items": doc["tasks"][keys[0]]["n"],
                "threads": doc["provenance"].get("threads"),
                "kernels": doc["provenance"].get("kernels", {}).get("build"),
                "extra_bufts": doc["provenance"].get("kernels", {}).get("extra_bufts")})
    best = {k: min(r[k] for r in rounds) for k in ("wall_all_s", "wall_separate_s", "score_all_s", "score_separate_s")}
    return {"model": model, **rounds[0], **best, "rounds": rounds,
            "same_samples": all(r["same_samples"] for r in rounds),
            "wall_ratio": best["wall_all_s"] / best["wall_separate_s"],
            "score_ratio": best["score_all_s"] / best["score_separate_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gemma-3-270m")
    ap.add_argument("--data-dir", required=True, help="the DisCoTEX release (or its Parquet rows)")
    ap.add_argument("--sample", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=1, help="rounds, the order alternated; the best of each is kept")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--label", default=platform.node(), help="machine name for the table")
    ap.add_argument("--no-readme", action="store_true", help="do not update bench/README.md")
    args = ap.parse_args()
    rows = [measure(m, args) for m in args.models.split(",")]
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": args.label,
           "cpu_count": os.cpu_count(), "rows": rows}
    publish(doc, "prompt-variants", format_table(doc), None if args.no_readme else "prompt-variants",
            "## `--prompt-variant all` against one run per variant (`prompt_variants.py`)")


def format_table(doc: dict) -> str:
    r0 = doc["rows"][0]
    head = (f"DISCOTEX, {r0['items']} items x {len(VARIANTS)} wordings ({', '.join(VARIANTS)}); {doc['machine']}, "
            f"{r0['threads']} threads, {r0['kernels']} build, {'extra buffer types' if r0['extra_bufts'] else 'plain'} kernels; "
            f"best of {len(r0['rounds'])} round(s); wall: each command line as a subprocess, load and plan "
            "included; scoring: the tasks' recorded seconds\n\n")
    lines = ["| model | all: wall s | separate: wall s | wall ratio | all: scoring s | separate: scoring s "
             "| scoring ratio | same samples |", "|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        lines.append(f"| {r['model']} | {r['wall_all_s']:.1f} | {r['wall_separate_s']:.1f} | {r['wall_ratio']:.2f} "
                     f"| {r['score_all_s']:.1f} | {r['score_separate_s']:.1f} | {r['score_ratio']:.2f} "
                     f"| {'yes' if r['same_samples'] else 'NO'} |")
    return head + "\n".join(lines)


if __name__ == "__main__":
    main()
