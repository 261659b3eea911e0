"""The table bench/gpu.sh prints, from its `abricot-local run` folders.

    python bench/gpu_report.py OUT_DIR --sample N --data-dir DIR

OUT_DIR holds one run folder per model, device and engine, named MODEL--DEVICE--ENGINE
(gpu.sh's layout), all over the same DISCOTEX items. Per run: s/item and items/s (the
run's scoring time), tokens the engine evaluated (replayed over the same schedules:
throughput.engine_work) and tokens/s; against the prefix engine on the same device, the
predictions that agree and the largest |log-prob difference| (batched is not bit-identical);
against the prefix engine on the CPU, the same (the CPU-vs-GPU drift).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))


def load(folder: Path) -> dict:
    doc = json.loads((folder / "results.json").read_text())
    samples = [json.loads(ln) for ln in (folder / "samples-discotex.jsonl").read_text().splitlines() if ln.strip()]
    model, device, engine = folder.name.split("--")
    return {"model": model, "device": device, "engine": engine, "doc": doc,
            "samples": {s["id"]: (s["pred"], s["logprobs"]) for s in samples}}


def agreement(a: dict, b: dict) -> tuple[int, int, float]:
    """(same predictions, items in both, max |log-prob difference|) of two runs' samples."""
    ids = sorted(set(a["samples"]) & set(b["samples"]))
    same = sum(a["samples"][i][0] == b["samples"][i][0] for i in ids)
    diff = max((abs(x - y) for i in ids for x, y in zip(a["samples"][i][1], b["samples"][i][1])), default=0.0)
    return same, len(ids), diff


def rows(runs: list[dict], tokens: dict) -> list[dict]:
    """One row per run; ``tokens``: (model, engine) -> (tokens, decode calls)."""
    by = {(r["model"], r["device"], r["engine"]): r for r in runs}
    out = []
    for r in runs:
        task = r["doc"]["tasks"]["discotex"]
        tok, calls = tokens.get((r["model"], r["engine"]), (None, None))
        row = {"model": r["model"], "device": r["device"], "engine": r["engine"], "items": task["n"],
               "s_item": task["seconds"] / task["n"], "items_s": task["n"] / task["seconds"], "tokens": tok,
               "calls": calls, "tok_s": tok / task["seconds"] if tok else None,
               "layers": r["doc"]["provenance"].get("schedule", {}).get("layers_offloaded")}
        for key, ref in (("vs_prefix", by.get((r["model"], r["device"], "prefix"))),
                         ("vs_cpu", by.get((r["model"], "cpu", "prefix")) if r["device"] != "cpu" else None)):
            row[key] = agreement(r, ref) if ref is not None and ref is not r else None
        out.append(row)
    return out


def _agree(a) -> str:
    return "-" if a is None else f"{a[0]}/{a[1]}, max {a[2]:.2g}"


def format_table(table: list[dict], device_name: str, kernels: str) -> str:
    lines = [f"gpu: DISCOTEX; device: {device_name}; kernels: `{kernels}`", "",
             "| model | device | engine | layers on GPU | items | s/item | items/s | tokens | decode calls | tokens/s "
             "| vs prefix, same device (same pred, max abs diff) | vs CPU prefix (drift) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        tok_s = f"{r['tok_s']:.0f}" if r["tok_s"] else "-"
        lines.append(f"| {r['model']} | {r['device']} | {r['engine']} | {r['layers'] if r['layers'] is not None else '-'} "
                     f"| {r['items']} | {r['s_item']:.3f} | {r['items_s']:.2f} | {r['tokens'] or '-'} | {r['calls'] or '-'} "
                     f"| {tok_s} | {_agree(r['vs_prefix'])} | {_agree(r['vs_cpu'])} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--sample", type=int, required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--device-name", default="CPU only")
    args = ap.parse_args()

    from throughput import engine_work, open_llama

    from abricot_local.backends.llama_cpp.backend import LlamaCppOptions
    from abricot_local.tasks.selection import prepare
    from abricot_local.tasks import make_task
    from abricot_local.tasks.base import TaskOptions

    runs = [load(f) for f in sorted(args.out.iterdir()) if (f / "results.json").is_file() and f.name.count("--") == 2]
    if not runs:
        raise SystemExit(f"no finished runs in {args.out}")
    task = make_task("discotex", TaskOptions(data_dir=args.data_dir, allow_download=False))
    items = list(prepare([task], None, sample=args.sample)[0].items)
    tokens = {}
    for r in runs:
        key = (r["model"], r["engine"])
        if key not in tokens:
            vb = open_llama(r["doc"]["model"]["path"], vocab_only=True)
            try:
                parallel = r["doc"]["provenance"]["schedule"].get("parallel")
                c = engine_work(vb, items, LlamaCppOptions(engine=r["engine"], parallel=parallel))
            finally:
                vb.close()
            tokens[key] = (c.tokens, c.decode_calls)
    kernels = runs[0]["doc"]["provenance"].get("system_info", "")
    print(format_table(rows(runs, tokens), args.device_name, kernels))


if __name__ == "__main__":
    main()
