"""Drift: how far the log-probs and each metric move between the settings that change llama.cpp's
arithmetic, on the real models, with `compare`'s verdict for each change.

Each setting is a complete `run` (DISCOTEX, `--sample N` drawn with the seed, and ABRICOT's
invented 18-row fixture: abricot_abs and abricot_inc) in one process, one after the other; each
change is compared with its base (the default run, unless said) by abricot_local.analysis.compare: the
largest |delta log-prob|, the share of same predictions, every metric's difference, the
verdict. Also: items/s of every run (the speed cost of a setting, one run each) and the decode
calls whose numbers depend on the thread count (llama.cpp's CPU flash attention for one token
over 512+ cached tokens: docs/numerics.md#threads).

    python bench/numerics.py --data-dir DISCOTEX_DIR                     # both models, 24 DISCOTEX items
    python bench/numerics.py --data-dir DISCOTEX_DIR --models gemma-3-270m --sample 40

The table goes to docs/numerics.md (between its `numerics` markers) unless --no-docs, and the
figures to bench/results/.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from abricot_local.analysis import compare as cmp  # noqa: E402
from abricot_local.analysis.loading import load_run  # noqa: E402
from abricot_local.record import kernel_path  # noqa: E402
from abricot_local.run.plan import make_plan  # noqa: E402
from abricot_local.run.request import RunRequest  # noqa: E402
from abricot_local.run.session import run_plan  # noqa: E402
from abricot_local.backends.llama_cpp.options import LlamaCppOptions  # noqa: E402
from abricot_local.models.given import Given  # noqa: E402
from abricot_local.record import read_run  # noqa: E402
from abricot_local.tasks.base import TaskOptions  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "abricot_invented_fixture.csv"
def settings(alt: int) -> tuple:
    """(name, options over the default, the setting it is compared with)."""
    return (
        ("default", {}, None),
        ("extra buffer types on", {"extra_bufts": "on"}, "default"),
        ("flash attention off", {"flash_attn": "off"}, "default"),
        ("n_batch 64", {"n_batch": 64}, "default"),
        ("batched engine", {"engine": "batched"}, "default"),
        (f"threads {alt}", {"threads": alt}, "default"),
        (f"n_batch 64, threads {alt}", {"n_batch": 64, "threads": alt}, "n_batch 64"),
    )


def run_setting(model: str, name: str, over: dict, args, out: Path) -> dict:
    """One complete run; what the table needs of it."""
    opts = LlamaCppOptions(**{"threads": args.threads, **over})
    topts = TaskOptions(data=(("abricot", str(FIXTURE)),), data_dir=args.data_dir, allow_download=False)
    plan = make_plan(RunRequest((model,), Given.of(opts, but=("n_ctx",)), "discotex,abricot", topts,
                                sample=args.sample))
    loaded = []
    t0 = time.perf_counter()
    run_plan(plan, out, on_loaded=loaded.append)
    wall = time.perf_counter() - t0
    record = read_run(out)
    items = sum(t.n for t in record.tasks.values())
    seconds = sum(t.seconds or 0 for t in record.tasks.values())
    return {"setting": name, "options": over, "folder": str(out), "items": items, "scoring_s": seconds,
            "wall_s": wall, "items_per_s": items / seconds if seconds else None,
            "thread_dependent_decodes": loaded[0].counters.thread_dependent if loaded else None,
            "threads": record.provenance.extra.get("threads"),
            "kernels": kernel_path.describe(kernel_path.recorded(record.provenance))}


def compare_pair(base: dict, other: dict, seed: int) -> dict:
    a = replace(load_run(base["folder"]), label=base["setting"])
    b = replace(load_run(other["folder"]), label=other["setting"])
    c = cmp.compare([a, b], seed=seed)
    tasks = []
    for g in c.agreements:
        metrics = {m.metric: m.value_b - m.value_a for m in c.metrics if m.task == g.task}
        tasks.append({"task": g.task, "n": g.n, "max_abs_delta": g.max_abs_delta, "same_pred": g.same_pred,
                      "metric_deltas": metrics})
    v = c.verdicts[0]
    return {"change": other["setting"], "base": base["setting"], "verdict": v.kind, "reason": v.reason,
            "tasks": tasks}


def _num(x: float) -> str:
    return "nan" if x != x else f"{x:+.3f}"


def table(doc: dict) -> str:
    head = (f"Measured {doc['created'][:10]} by `python bench/numerics.py --sample {doc['sample']}` "
            f"(DISCOTEX: {doc['sample']} items drawn with the seed; ABRICOT: as many of the invented 18-row fixture's, both "
            f"tasks) on {doc['machine']}, {doc['threads']} threads; kernels: {doc['kernels']}. "
            "Each change is compared with the default run (extra buffer types off, flash attention auto = on, "
            "n_batch 512, the prefix engine) unless its base is named; *max |delta|*: the largest |delta "
            "log-prob| over every choice of every item (nats); *metric deltas*: the change minus its base, "
            "over the same items; the verdict is `compare`'s over both tasks.\n\n")
    lines = ["| model | change (vs base) | task | max abs delta | same pred | metric deltas | verdict |",
             "|---|---|---|---|---|---|---|"]
    for model, pairs in doc["comparisons"].items():
        for p in pairs:
            change = p["change"] + (f" (vs {p['base']})" if p["base"] != "default" else "")
            for k, t in enumerate(p["tasks"]):
                deltas = ", ".join(f"{m} {_num(d)}" for m, d in t["metric_deltas"].items() if d == d) or "-"
                verdict = p["verdict"] if k == 0 else ""
                lines.append(f"| {model if k == 0 else ''} | {change if k == 0 else ''} | {t['task']} | "
                             f"{t['max_abs_delta']:.3g} | {t['same_pred']:.0%} | {deltas} | {verdict} |")
    lines += ["", "| model | setting | items | items/s | thread-dependent decode calls |", "|---|---|---|---|---|"]
    for model, runs in doc["runs"].items():
        for r in runs:
            lines.append(f"| {model} | {r['setting']} | {r['items']} | {r['items_per_s']:.3f} | "
                         f"{r['thread_dependent_decodes']} |")
    return head + "\n".join(lines)


def update_docs(text: str) -> None:
    path = ROOT / "docs" / "numerics.md"
    doc = path.read_text(encoding="utf-8")
    start, end = "<!-- numerics:start -->", "<!-- numerics:end -->"
    if start not in doc or end not in doc:
        raise SystemExit(f"{path} has no {start} ... {end} block")
    path.write_text(doc[: doc.index(start)] + f"{start}\n{text}\n{end}" + doc[doc.index(end) + len(end):],
                    encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gemma-3-270m,smollm2-135m-pypi")
    ap.add_argument("--data-dir", required=True, help="the DISCOTEX release folder")
    ap.add_argument("--sample", type=int, default=24)
    ap.add_argument("--threads", type=int, default=None, help="threads of every setting but the threads ones "
                    "(default: all cores; on a machine shared with other jobs, 1 avoids spinning threads)")
    ap.add_argument("--alt-threads", type=int, default=None,
                    help="the thread count the threads settings compare with (default: 1, or 2 when --threads is 1)")
    ap.add_argument("--settings", default=None, help="comma-separated setting names (default: all)")
    ap.add_argument("--work", default=None, help="folder for the runs (default: a temporary one)")
    ap.add_argument("--label", default="", help="machine name for the table (default: the CPU and cores)")
    ap.add_argument("--no-docs", action="store_true", help="do not update docs/numerics.md")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="numerics-"))
    alt = args.alt_threads or (2 if args.threads == 1 else 1)
    table_of = settings(alt)
    wanted = args.settings.split(",") if args.settings else [s[0] for s in table_of]
    from scale import machine

    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": args.label or machine(),
           "cpu_count": os.cpu_count(), "threads": args.threads or os.cpu_count(), "sample": args.sample,
           "runs": {}, "comparisons": {}}
    for model in args.models.split(","):
        runs = {}
        for name, over, _ in table_of:
            if name in wanted:
                out = work / model / name.replace(" ", "_").replace(",", "")
                runs[name] = run_setting(model, name, over, args, out)
                print(f"{model} {name}: {runs[name]['items_per_s']:.3f} items/s", file=sys.stderr, flush=True)
        doc["runs"][model] = list(runs.values())
        doc["kernels"] = runs["default"]["kernels"] if "default" in runs else "?"
        doc["comparisons"][model] = [compare_pair(runs[base], runs[name], seed=1234)
                                     for name, _, base in table_of if base and name in runs and base in runs]
    from throughput import publish

    text = table(doc)
    publish(doc, "numerics", text, None)  # its table goes to docs/numerics.md, not bench/README.md
    if not args.no_docs:
        update_docs(text)


if __name__ == "__main__":
    main()
