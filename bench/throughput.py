"""Throughput of the evaluation engines, measured in one process on one machine.

For a GGUF (default: the embedded gemma-3-270m) and a task, every engine scores
the same items; the table gives tokens evaluated, wall seconds, evaluated and
unique tok/s, the ratio of unique tok/s to llama.cpp's raw prompt-processing
throughput measured in the same run (512-token batches of the same text),
peak RSS during each engine, and the max |logprob difference| against naive.

    python bench/throughput.py --task abricot            # 127 invented items, sized like the release
    python bench/throughput.py --task discotex --limit 40
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from abricot_local.models.given import Given  # noqa: E402
from abricot_local.models.locate import open_model  # noqa: E402
from abricot_local.backends.llama_cpp.backend import LlamaCppOptions  # noqa: E402
from abricot_local.tasks.selection import prepare  # noqa: E402
from abricot_local.tasks import make_task  # noqa: E402
from abricot_local.tasks.base import TaskOptions  # noqa: E402

ENGINES = ("naive", "single", "prefix", "batched")


def peak_rss_reset() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM (Linux)
    except OSError:
        pass


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def sized_fixture(fixture: str, n: int) -> str:
    """An invented ABRICOT file of ``n`` rows (the release has 127), cycling the test fixture's
    invented rows with a numbered clause so every sentence is distinct. Not ABRICOT data."""
    import pandas as pd

    base = pd.read_csv(fixture, dtype=str, keep_default_na=False)
    rows = []
    for i in range(n):
        row = dict(base.iloc[i % len(base)])
        row["ID"] = f"bench-{i:03d}"
        row["text"] = f"{row['text'][:-1]}, come si legge nella scheda {i + 1}."
        rows.append(row)
    out = Path(tempfile.mkdtemp()) / f"abricot_bench_{n}.csv"
    pd.DataFrame(rows).to_csv(out, index=False)
    return str(out)


def load_items(task: str, limit: int | None, data_dir: str | None, fixture: str):
    data = (("abricot", fixture),) if task.startswith("abricot") else ()
    opts = TaskOptions(data=data, data_dir=data_dir, allow_download=False)
    return list(prepare([make_task(task, opts)], limit)[0].items)


def raw_pp(backend, items, n_tokens: int) -> float:
    """llama.cpp's own prompt processing: the items' text in n_batch-token calls, one output."""
    text = "".join(it.context for it in items)
    toks = backend.tokenize(text)[:n_tokens]
    engine = backend.engine
    engine.reset()
    t0 = time.perf_counter()
    engine.decode(0, tuple(toks), {len(toks) - 1}, "raw prompt processing")
    dt = time.perf_counter() - t0
    engine.reset()
    return len(toks) / dt


def open_llama(model, **options):
    """``model`` (a path or any name `run` takes) opened on llama.cpp with ``options`` as `run` opens a
    model: ``models.locate.open_model`` (found, verified, the registry's n_ctx unless given), memory checked."""
    given = {k: v for k, v in options.items() if v is not None and v != ()}
    return open_model(str(model), Given("llama.cpp", given)).load()


def engine_work(backend, items, options):
    """The session.Counters (decode calls, tokens) of scoring ``items`` with ``options.engine``,
    in the runner's order and chunks: ``abricot_local.run.cost``'s count (the engine's own
    class over a session that decodes nothing), the one `run --dry-run` makes. ``backend``
    only tokenizes (a vocab-only LlamaCppBackend is enough)."""
    from abricot_local.backends.session import Counters
    from abricot_local.run.cost import count_work

    work = count_work(items, backend.schedule, options, exact=True, basis="the model's tokenizer")
    return Counters(decode_calls=work.calls, tokens=work.tokens)


def unique_tokens(backend, items) -> int:
    prefixes, rest = {}, 0
    for it in items:
        sch = backend.schedule(it.request())
        prefixes[sch.seqs[0][: sch.prefix_len]] = sch.prefix_len
        rest += sch.n_tokens - sch.prefix_len
    return sum(prefixes.values()) + rest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gemma-3-270m")
    ap.add_argument("--task", default="abricot", choices=["abricot", "discotex"])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--data-dir", default=None,
                    help="the DISCOTEX release folder (default: the user cache, where `abricot-local data pull discotex` puts it)")
    ap.add_argument("--fixture", default=str(ROOT / "tests" / "data" / "abricot_invented_fixture.csv"))
    ap.add_argument("--abricot-items", type=int, default=127,
                    help="ABRICOT: invented rows, sized like the release (127); 0 = the 18-row test fixture")
    ap.add_argument("--naive-items", type=int, default=24, help="naive scores only this many items (scaled); 0 = all")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--n-gpu-layers", type=int, default=-1)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--parallel", type=int, default=None, help="batched engine: items per decode")
    ap.add_argument("--label", default=platform.node(), help="machine name for the table")
    ap.add_argument("--no-readme", action="store_true", help="do not update bench/README.md")
    args = ap.parse_args()

    task = "abricot_abs" if args.task == "abricot" else "discotex"
    fixture = sized_fixture(args.fixture, args.abricot_items) if args.abricot_items else args.fixture
    items = load_items(task, args.limit, args.data_dir, fixture)
    items.sort(key=lambda it: it.prefix)  # as the runner orders them
    model = open_model(args.model, Given("llama.cpp")).ref.path  # found (fetched) once, verified
    rows, logprobs, raws = [], {}, []
    uniq = None
    for engine in args.engines.split(","):
        opts = LlamaCppOptions(engine=engine, threads=args.threads, n_gpu_layers=args.n_gpu_layers, n_ctx=2048,
                              parallel=args.parallel if engine == "batched" else None)
        b = open_llama(model, **{f: getattr(opts, f) for f in ("engine", "threads", "n_gpu_layers", "n_ctx",
                                                               "parallel")})
        if uniq is None:
            uniq = unique_tokens(b, items)
        raw_before = raw_pp(b, items, 2048)  # measured next to each engine: the machine is noisy
        b.engine.counters = type(b.counters)()  # count only the scoring below
        peak_rss_reset()
        # naive has no reuse, so its cost is linear in the items: on large sets it scores the first
        # --naive-items and its tokens and wall time are scaled to all items (marked "*").
        part = items[: args.naive_items] if engine == "naive" and 0 < args.naive_items < len(items) else items
        t0 = time.perf_counter()
        size = b.batch_size()  # chunks as the runner makes them
        logprobs[engine] = [s.logprobs for k in range(0, len(part), size)
                            for s in b.score_many([it.request() for it in part[k : k + size]])]
        wall = time.perf_counter() - t0
        scale = len(items) / len(part)
        # read before the raw pp measurement below, which decodes through the same counters
        wall, tokens, calls = wall * scale, round(b.counters.tokens * scale), round(b.counters.decode_calls * scale)
        rss = peak_rss() / 2**20
        raw = (raw_before + raw_pp(b, items, 2048)) / 2
        raws.append(raw)
        label = engine if engine != "batched" else f"batched (parallel {size})"
        label += f" * ({len(part)} items scaled)" if scale != 1 else ""
        rows.append({"engine": label, "key": engine, "tokens": tokens, "decode_calls": calls,
                     "wall_s": wall, "tok_s": tokens / wall, "unique_tok_s": uniq / wall,
                     "raw_pp_tok_s": raw, "ratio_to_raw_pp": uniq / wall / raw, "peak_rss_mb": rss})
        b.close()
    base = np.array(logprobs.get("naive", next(iter(logprobs.values()))))
    for r in rows:
        lp = np.array(logprobs[r["key"]])[: len(base)]
        r["max_abs_diff_vs_naive"] = float(np.max(np.abs(lp - base)))
        r["same_pred_vs_naive"] = float(np.mean(lp.argmax(1) == base.argmax(1)))
    model_mb = Path(model).stat().st_size / 2**20
    from abricot_local.backends.llama_cpp.backend import kv_cache_bytes

    kv_mb = kv_cache_bytes(model, 2048) / 2**20
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": args.label,
           "cpu_count": os.cpu_count(), "threads": args.threads or os.cpu_count(), "model": str(model),
           "model_mb": round(model_mb, 1), "kv_mb": round(kv_mb, 1),
           "rss_budget_mb": round(model_mb + kv_mb + 400, 1), "task": task, "items": len(items), "unique_tokens": uniq,
           "raw_pp_tok_s": float(np.mean(raws)), "rows": rows}
    publish(doc, task, format_table(doc), None if args.no_readme else task)


def format_table(doc: dict) -> str:
    head = (f"{doc['task']}: {doc['items']} items, {doc['unique_tokens']} unique tokens; raw prompt processing "
            f"{doc['raw_pp_tok_s']:.0f} tok/s (mean; each engine is compared with the raw throughput measured "
            f"just before and after it); {doc['machine']}, {doc['threads']} threads; model {doc['model_mb']} MB, "
            f"KV cache {doc['kv_mb']} MB: peak RSS budget (model + KV + 400 MB) {doc['rss_budget_mb']} MB\n\n")
    lines = ["| engine | tokens | wall s | tok/s | unique tok/s | raw pp tok/s | vs raw pp | peak RSS MB | max abs diff vs naive | same pred |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        lines.append(f"| {r['engine']} | {r['tokens']} | {r['wall_s']:.2f} | {r['tok_s']:.0f} | {r['unique_tok_s']:.0f} "
                     f"| {r['raw_pp_tok_s']:.0f} | {r['ratio_to_raw_pp']:.2f}x | {r['peak_rss_mb']:.0f} | {r['max_abs_diff_vs_naive']:.2g} "
                     f"| {r['same_pred_vs_naive']:.0%} |")
    return head + "\n".join(lines)


def simulation_args(doc: str, reps: int = 20000) -> argparse.Namespace:
    """A simulation script's arguments (coverage.py, correlation_coverage.py): ``--reps`` replications per cell,
    ``--seed``, ``--no-readme``; its help the first paragraph of ``doc``."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=reps, help="replications per cell")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-readme", action="store_true", help="print only; leave bench/README.md as it is")
    return ap.parse_args()


def save_results(doc: dict, name: str) -> Path:
    """``doc`` as bench/results/<its created time>-<name>.json (ignored by git); the path."""
    out = HERE / "results" / f"{doc['created'].replace(':', '')}-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    return out


def publish(doc: dict, name: str, table: str, mark: str | None, heading: str = "") -> None:
    """A bench script's ending: the table printed, ``doc`` saved (:func:`save_results`), the
    table put into bench/README.md between its ``mark`` markers (none when ``mark`` is None)."""
    print(table)
    out = save_results(doc, name)
    if mark is not None:
        update_readme(mark, table, heading)
    print(f"\nsaved {out.relative_to(ROOT)}")


def update_readme(mark: str, table: str, heading: str = "") -> None:
    """Replace the block between ``<!-- mark:start -->`` and ``<!-- mark:end -->`` in
    bench/README.md with ``table`` (appended, under ``heading``, when there is none yet)."""
    readme = HERE / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.exists() else ""
    start, end = f"<!-- {mark}:start -->", f"<!-- {mark}:end -->"
    block = f"{start}\n{table}\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + "\n\n" + (f"{heading}\n\n" if heading else "") + block + "\n"
    readme.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
