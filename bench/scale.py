"""Scale on this CPU, by simulation: Llama-architecture GGUFs of about 1B, 3B and 7B
parameters with random weights, measured like the two real models on the same DISCOTEX items.

    pip install -e ".[bench]"          # the gguf package (writes the random-weight models)
    nice -n 10 python bench/scale.py --sample 12 --threads 2

Each random model has the shape of a real one and that model's own tokenizer (the
vocabulary-only GGUFs of llama.cpp's models/ folder: Llama 3's BPE for the 1B and 3B,
Llama 2/Mistral's SentencePiece for the 7B), is written as F16 one tensor at a time into
``<abricot cache>/bench-models/``, quantized to Q4_K_M with llama.cpp's own quantizer
(``llama_model_quantize``) and the F16 file deleted; the Q4_K_M file is kept as a cache.
Their outputs are meaningless: only time and memory are measured.

Every model runs as ``abricot-local run MODEL --tasks discotex --sample N --threads T`` in a
child process. Per model: s/item (the run's scoring time), load and start-up seconds, the
tokens the engine evaluates (counted by replaying the engine over the same schedules:
throughput.engine_work), prompt tokens/s, peak RSS (the child's ru_maxrss), the tool's
memory estimate (weights + KV cache, what ``run`` checks before loading) against it, and
``run --dry-run``'s predicted time against the measured one when the CLI has ``--dry-run``.
A second table projects a full run (DISCOTEX's 1600 items, ABRICOT's two tasks at the
release's 127 items, invented text) from the tokens it evaluates at each model's measured rate.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from random_gguf import SHAPES, gguf_params, random_model  # noqa: E402  (bench/ is this script's folder)

from abricot_local.gguf.file import model_bytes  # noqa: E402
from abricot_local.models.locate import resolve_model_ref  # noqa: E402
from abricot_local.tasks.selection import prepare  # noqa: E402
from abricot_local.tasks import make_task  # noqa: E402
from abricot_local.tasks.base import TaskOptions  # noqa: E402

MARK = "scale"
FULL_ABRICOT = 127  # items of each ABRICOT task in the release (the invented stand-in is sized like it)


def default_data_dir() -> str:
    """$ABRICOT_TEST_DATA/data/discotex, else the release where `abricot-local data pull discotex`
    puts it (the user cache)."""
    if os.environ.get("ABRICOT_TEST_DATA"):
        return str(Path(os.environ["ABRICOT_TEST_DATA"]) / "data" / "discotex")
    return str(make_task("discotex", TaskOptions()).cache_folder())


# -- measuring -----------------------------------------------------------------------------
def run_cmd(model: Path, threads: int, data_dir: str, *extra: str) -> list[str]:
    """``abricot-local run MODEL --tasks discotex`` with ``extra`` (the item selection, an engine, ...)."""
    return [sys.executable, "-m", "abricot_local", "run", str(model), "--tasks", "discotex", "--threads", str(threads),
            "--data-dir", data_dir, *extra]


def measure_run(model: Path, threads: int, data_dir: str, *extra: str) -> dict:
    """``abricot-local run`` in a child process: its wall and scoring seconds, CPU seconds of the
    scoring (from when the output folder says RUNNING: after loading and tokenizing), peak
    RSS (the child's own ru_maxrss), kernels, and each item's (id, pred, gold)."""
    from child import run_child

    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        c = run_child(run_cmd(model, threads, data_dir, *extra, "--out", out), lambda _: (Path(out) / "RUNNING").exists(),
                      env=env)
        if c.returncode != 0:
            raise SystemExit(f"run of {model.name} failed ({c.returncode}): {c.stderr[-2000:]}")
        doc = json.loads((Path(out) / "results.json").read_text())
        samples = [json.loads(line) for line in (Path(out) / "samples-discotex.jsonl").read_text().splitlines()]
    task = doc["tasks"]["discotex"]
    return {"wall_s": c.wall_s, "score_s": task["seconds"], "cpu_s": c.cpu_s, "score_cpu_s": c.cpu_after_start_s,
            "items": task["n"], "peak_rss": c.peak_rss, "threads": doc["provenance"]["threads"],
            "system_info": doc["provenance"]["system_info"], "preds": [(s["id"], s["pred"], s["gold"]) for s in samples],
            "multi_token": any(len(t) > 1 for s in samples for t in s["continuation_tokens"])}


def predicted_seconds(doc: dict) -> tuple[float | None, str]:
    """``run --dry-run --json``'s prediction for its one model (loading included) and where
    its speed came from (the calibration's model, own or scaled)."""
    m = doc["models"][0]
    speed = m.get("speed") or {}
    basis = " ".join(x for x in (speed.get("source"), speed.get("reference")) if x)
    return m.get("seconds"), basis or m.get("speed_note") or ""


def dry_run(model: Path, sample: int, threads: int, data_dir: str, env: dict, *extra: str) -> tuple[float | None, str]:
    """``run MODEL --dry-run --json`` (``--calibrate`` in ``extra`` measures the model first),
    with the calibration cache of ``env``: the prediction and its basis."""
    res = subprocess.run(run_cmd(model, threads, data_dir, "--sample", str(sample), "--dry-run", "--json", *extra),
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    if res.returncode != 0:
        raise SystemExit(f"--dry-run of {model.name} failed ({res.returncode}): {res.stderr[-2000:]}")
    return predicted_seconds(json.loads(res.stdout))


def predictions(models: list[tuple[str, Path]], args) -> dict[str, dict]:
    """Per model, ``--dry-run``'s predicted seconds twice, in a calibration cache of its own (a
    temporary ``$ABRICOT_CACHE_DIR``, so earlier calibrations do not count): *scaled*, from the
    first model's calibration alone (as for a model not yet on this machine), then *own*, after
    ``--calibrate`` measured the model itself."""
    with tempfile.TemporaryDirectory() as cache:
        env = {"ABRICOT_CACHE_DIR": cache}
        first = models[0][1]
        out = {models[0][0]: {"scaled": None, "scaled_basis": "", **dict(zip(("own", "own_basis"), dry_run(
            first, args.sample, args.threads, args.data_dir, env, "--calibrate")))}}
        for label, path in models[1:]:
            out[label] = dict(zip(("scaled", "scaled_basis"), dry_run(path, args.sample, args.threads, args.data_dir, env)))
        for label, path in models[1:]:
            out[label].update(zip(("own", "own_basis"), dry_run(path, args.sample, args.threads, args.data_dir, env,
                                                                 "--calibrate")))
    return out


def facts(model: Path, items: list, threads: int, data_dir: str) -> dict:
    """What needs no scoring: tokens and decode calls of the items (prefix engine) and of a
    full run, and the tool's memory estimate (weights + KV cache, as ``run`` checks it)."""
    from throughput import engine_work, open_llama

    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend, LlamaCppOptions

    opts = LlamaCppOptions(threads=threads)
    kv = LlamaCppBackend.preflight(model, opts).kv_bytes
    vb = open_llama(model, vocab_only=True)
    try:
        work = engine_work(vb, items, opts)
        full = {name: engine_work(vb, its, opts).tokens for name, its in full_items(data_dir).items()}
        arch = vb.metadata("general.architecture")
        n_vocab = vb.n_vocab
    finally:
        vb.close()
    return {"tokens": work.tokens, "decode_calls": work.decode_calls, "full_tokens": full, "n_vocab": n_vocab,
            "weights": model_bytes(model), "kv": kv, "arch": arch, "n_params": gguf_params(model)}


@functools.cache
def full_items(data_dir: str) -> dict:
    """The items of a full ABRICOT + DISCOTEX run: DISCOTEX's release (all 1600), ABRICOT's two
    tasks over invented rows sized like the release (throughput.sized_fixture)."""
    from throughput import load_items, sized_fixture

    fixture = sized_fixture(str(ROOT / "tests" / "data" / "abricot_invented_fixture.csv"), FULL_ABRICOT)
    return {"discotex": load_items("discotex", None, data_dir, fixture),
            **{task: load_items(task, None, None, fixture) for task in ("abricot_abs", "abricot_inc")}}


def real_models() -> list[tuple[str, Path]]:
    """The two real models the test extra installs."""
    from lmeval import model_path

    return [("Gemma 3 270M", resolve_model_ref("gemma-3-270m").path),
            ("SmolLM2-135M", model_path("smollm2", Path(tempfile.gettempdir())))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1b,3b,7b", help="random-weight shapes to build and run: " + ",".join(SHAPES))
    ap.add_argument("--no-real", action="store_true", help="skip the two real models")
    ap.add_argument("--sample", type=int, default=12, help="DISCOTEX items (a seeded draw), the same for every model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir", default=default_data_dir(), help="the DISCOTEX release (default: %(default)s)")
    ap.add_argument("--build-only", action="store_true", help="build the random-weight models and stop")
    ap.add_argument("--label", default="", help="machine name for the table")
    ap.add_argument("--no-readme", action="store_true", help="do not update bench/README.md")
    args = ap.parse_args()

    models = [] if args.no_real else real_models()
    for key in filter(None, args.sizes.split(",")):
        s = SHAPES[key]
        models.append((f"{s.like} shape, random", random_model(s, args.threads, log=lambda m: print(m, file=sys.stderr))))
    if args.build_only:
        return
    task = make_task("discotex", TaskOptions(data_dir=args.data_dir, allow_download=False))
    items = list(prepare([task], None, sample=args.sample)[0].items)
    predicted = predictions(models, args)
    rows = []
    for label, path in models:
        f = facts(path, items, args.threads, args.data_dir)
        load = os.getloadavg()[0]
        m = measure_run(path, args.threads, args.data_dir, "--sample", str(args.sample))
        m.pop("preds")
        # idle-cores rate: CPU seconds / threads bound the wall time the work needs on idle cores
        idle = f["tokens"] / (m["score_cpu_s"] / m["threads"])
        row = {"model": label, "file": path.name, **f, **m, "predicted": predicted[label],
               "load_avg": (load, os.getloadavg()[0]), "tok_s": f["tokens"] / m["score_s"], "idle_tok_s": idle,
               "s_item": m["score_s"] / m["items"], "idle_s_item": m["score_cpu_s"] / m["threads"] / m["items"]}
        full = sum(f["full_tokens"].values())
        row["full_h"], row["idle_full_h"] = full / row["tok_s"] / 3600, full / idle / 3600
        rows.append(row)
        print(f"{label}: {row['s_item']:.2f} s/item ({row['idle_s_item']:.2f} on idle cores), {row['tok_s']:.1f} tok/s "
              f"({idle:.1f}), peak RSS {m['peak_rss'] / 2**30:.2f} GiB", file=sys.stderr)
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": args.label or machine(),
           "cpu_count": os.cpu_count(), "threads": args.threads, "sample": args.sample,
           "command": "nice -n 10 python bench/scale.py " + " ".join(sys.argv[1:]),
           "full_items": {k: len(v) for k, v in full_items(args.data_dir).items()}, "rows": rows}
    from throughput import publish

    publish(doc, "scale", format_table(doc), None if args.no_readme else MARK,
            "## Scale: 1B, 3B and 7B shapes with random weights (`scale.py`)")


def machine() -> str:
    """CPU model and core count, as /proc/cpuinfo says."""
    try:
        name = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name"))
    except (OSError, StopIteration):
        name = "unknown CPU"
    return f"{name}, {os.cpu_count()} cores"


def seconds(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0f}"


def gib(n: float) -> str:
    return f"{n / 2**30:.2f}"


def format_table(doc: dict) -> str:
    rows = doc["rows"]
    kernels = rows[0]["system_info"] if rows else ""
    head = (f"scale: DISCOTEX, the same {doc['sample']} items (`--sample {doc['sample']}`) for every model, prefix engine, "
            f"{doc['threads']} threads, n_ctx 2048; {doc['machine']}; {doc['created'][:10]}; kernels: `{kernels}`. "
            f"*s/item* and *tok/s*: wall seconds of scoring (other jobs' time included: see the load average); "
            f"*idle*: the scoring's CPU seconds / {doc['threads']} threads, an upper bound on the time on idle cores. "
            f"Command: `{doc['command']}`\n\n")
    lines = ["| model | params | Q4 file GiB | vocab | tokens/item | decode calls | s/item (idle) | prompt tok/s (idle) "
             "| load s | peak RSS GiB | estimate GiB (weights + KV) | RSS / estimate | --dry-run predicted s: own "
             "calibration (scaled from the first model's) | measured s | load avg |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        est = r["weights"] + r["kv"]
        p = r["predicted"]
        predicted = " ".join(x for x in (seconds(p.get("own")), f"({seconds(p.get('scaled'))})" if p.get("scaled") else "")
                             if x)
        lines.append(f"| {r['model']} | {r['n_params'] / 1e9:.2f}B | {gib(r['weights'])} | {r['n_vocab']} "
                     f"| {r['tokens'] / r['items']:.0f} | {r['decode_calls']} | {r['s_item']:.2f} ({r['idle_s_item']:.2f}) "
                     f"| {r['tok_s']:.1f} ({r['idle_tok_s']:.1f}) | {r['wall_s'] - r['score_s']:.1f} | {gib(r['peak_rss'])} "
                     f"| {gib(est)} | {r['peak_rss'] / est:.2f} | {predicted} | {r['wall_s']:.0f} "
                     f"| {r['load_avg'][0]:.1f}-{r['load_avg'][1]:.1f} |")
    n = doc["full_items"]
    lines += ["", f"Projected full run (DISCOTEX's {n['discotex']} items + ABRICOT's {n['abricot_abs']} + "
              f"{n['abricot_inc']}, invented text sized like the release; prefix engine, each model's tokenizer): its "
              "tokens at the prompt tok/s measured above, on this VM as loaded and on idle cores:", "",
              "| model | DISCOTEX tokens | ABRICOT tokens | hours (this VM) | hours (idle cores) |", "|---|---|---|---|---|"]
    for r in rows:
        ft = r["full_tokens"]
        lines.append(f"| {r['model']} | {ft['discotex']} | {ft['abricot_abs'] + ft['abricot_inc']} | {r['full_h']:.1f} "
                     f"| {r['idle_full_h']:.1f} |")
    return head + "\n".join(lines)


if __name__ == "__main__":
    main()
