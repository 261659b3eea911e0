"""Start-up cost of the command line, as ratios to `--help` in one run: how long a refusal
(`abricot-local run no-such-model`, a typo in a model's name) takes, and how long its imports take.

    nice -n 10 python bench/startup.py --repeats 7

Each command runs ``--repeats`` times in a fresh interpreter (``python -m abricot_local``), the
two kinds interleaved so that the machine's other jobs weigh on both alike; the median wall time
of each, and their ratio. The imports: ``python -X importtime`` of the same two commands, the
sum of the top-level imports' cumulative microseconds (what the interpreter spent importing),
and the heavy modules the refusal imports that `--help` does not (llama_cpp, scipy, pandas: none
should be). Nothing is downloaded; an empty temporary HOME and cache, offline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MARK = "startup"
COMMANDS = {"--help": ["--help"], "run no-such-model": ["run", "no-such-model"]}
HEAVY = ("llama_cpp", "scipy", "pandas", "matplotlib", "lm_eval", "huggingface_hub")


def env(home: str) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HOME": home, "ABRICOT_CACHE_DIR": str(Path(home) / "cache"),
            "ABRICOT_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


def wall(args: list[str], home: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "abricot_local", *args], env=env(home), capture_output=True, check=False)
    return time.perf_counter() - t0


def imports(args: list[str], home: str) -> tuple[float, set[str]]:
    """(seconds spent importing: the top-level imports' cumulative time, the top-level packages imported)."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "abricot_local", *args], env=env(home),
                       capture_output=True, text=True, check=False)
    total, names = 0, set()
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        names.add(name.strip().split(".")[0])
        if not name[1:].startswith(" "):  # a top-level import ("| name"): its cumulative time holds its children's
            total += int(cumulative)
    return total / 1e6, names


def measure(repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as home:
        wall(["--help"], home)  # warm the file cache (and the bytecode)
        times: dict[str, list[float]] = {k: [] for k in COMMANDS}
        for _ in range(repeats):
            for key, args in COMMANDS.items():
                times[key].append(wall(args, home))
        imp = {key: imports(args, home) for key, args in COMMANDS.items()}
    help_s, refusal_s = (statistics.median(times[k]) for k in COMMANDS)
    (help_imp, help_mods), (ref_imp, ref_mods) = (imp[k] for k in COMMANDS)
    return {"wall_s": {k: statistics.median(v) for k, v in times.items()}, "all_s": times,
            "ratio": refusal_s / help_s, "import_s": {k: imp[k][0] for k in COMMANDS},
            "import_ratio": ref_imp / help_imp if help_imp else None,
            "heavy_in_refusal": sorted(m for m in ref_mods - help_mods if m in HEAVY)}


def format_table(doc: dict) -> str:
    w, i = doc["wall_s"], doc["import_s"]
    heavy = ", ".join(doc["heavy_in_refusal"]) or "none"
    return (f"startup: `python -m abricot_local` in a fresh interpreter, median of {doc['repeats']} (interleaved); "
            f"{doc['machine']}; {doc['created'][:10]}; load average {doc['load'][0]:.1f}-{doc['load'][1]:.1f}. "
            f"Command: `{doc['command']}`\n\n"
            "| command | wall s | imports s (-X importtime) |\n|---|---|---|\n"
            + "".join(f"| `{k}` | {w[k]:.2f} | {i[k]:.2f} |\n" for k in COMMANDS)
            + f"| **ratio** (refusal / --help) | **{doc['ratio']:.2f}** | **{doc['import_ratio']:.2f}** |\n\n"
            f"Heavy modules a refusal imports that `--help` does not: {heavy}.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--label", default="", help="machine name for the table")
    ap.add_argument("--no-readme", action="store_true", help="do not update bench/README.md")
    args = ap.parse_args()
    from scale import machine
    from throughput import publish

    load0 = os.getloadavg()[0]
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": args.label or machine(),
           "repeats": args.repeats, "command": "nice -n 10 python bench/startup.py " + " ".join(sys.argv[1:]),
           **measure(args.repeats)}
    doc["load"] = (load0, os.getloadavg()[0])
    publish(doc, "startup", format_table(doc), None if args.no_readme else MARK,
            "## Start-up: a refused model name against `--help` (`startup.py`)")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
