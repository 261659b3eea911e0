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
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from abricot_local import fetch  # noqa: E402
from abricot_local.planning import model_bytes, prepare  # noqa: E402
from abricot_local.tasks import make_task  # noqa: E402
from abricot_local.tasks.base import TaskOptions  # noqa: E402

MARK = "scale"
Q4_K_M = 15  # llama_ftype LLAMA_FTYPE_MOSTLY_Q4_K_M
F16 = 1  # LLAMA_FTYPE_MOSTLY_F16
FULL_DISCOTEX, FULL_ABRICOT = 1600, 127  # items of a full run: DISCOTEX sub-task 1 test; each ABRICOT task


@dataclass(frozen=True)
class Shape:
    """A Llama-architecture model's hyperparameters (as in its GGUF metadata)."""

    name: str
    like: str  # the real model whose shape this is
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    tied: bool  # output projection shared with the token embeddings
    vocab: str  # the vocabulary-only GGUF whose tokenizer it uses
    rope_base: float

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


BPE, SPM = "ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf"
SHAPES = {
    "1b": Shape("random-1b", "Llama-3.2-1B", 128256, 2048, 16, 32, 8, 8192, True, BPE, 500000.0),
    "3b": Shape("random-3b", "Llama-3.2-3B", 128256, 3072, 28, 24, 8, 8192, True, BPE, 500000.0),
    "7b": Shape("random-7b", "Mistral-7B-v0.1", 32000, 4096, 32, 32, 8, 14336, False, SPM, 10000.0),
}


def tensor_shapes(s: Shape) -> list[tuple[str, tuple[int, ...]]]:
    """llama.cpp's tensors of a Llama model, as numpy shapes (rows = outputs)."""
    q, kv = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    out = [("token_embd.weight", (s.n_vocab, s.n_embd)), ("output_norm.weight", (s.n_embd,))]
    if not s.tied:
        out.append(("output.weight", (s.n_vocab, s.n_embd)))
    for i in range(s.n_layer):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (s.n_embd,)), (b + "attn_q.weight", (q, s.n_embd)),
                (b + "attn_k.weight", (kv, s.n_embd)), (b + "attn_v.weight", (kv, s.n_embd)),
                (b + "attn_output.weight", (s.n_embd, q)), (b + "ffn_norm.weight", (s.n_embd,)),
                (b + "ffn_gate.weight", (s.n_ff, s.n_embd)), (b + "ffn_up.weight", (s.n_ff, s.n_embd)),
                (b + "ffn_down.weight", (s.n_embd, s.n_ff))]
    return out


def n_params(s: Shape) -> int:
    return sum(int(np.prod(shape)) for _, shape in tensor_shapes(s))


def write_random_gguf(s: Shape, vocab: Path, out: Path, seed: int = 0) -> None:
    """An F16 GGUF of shape ``s`` with ``vocab``'s tokenizer and random weights (N(0, 0.02),
    norms 1), written one tensor at a time: memory stays at about the largest tensor."""
    import gguf

    reader = gguf.GGUFReader(vocab)
    n_tokens = len(reader.fields["tokenizer.ggml.tokens"].data)
    if n_tokens != s.n_vocab:
        raise SystemExit(f"{vocab.name} has {n_tokens} tokens, the {s.like} shape {s.n_vocab}")
    w = gguf.GGUFWriter(out, "llama")
    w.add_name(f"{s.name} (random weights, shaped like {s.like})")
    w.add_context_length(4096)
    w.add_embedding_length(s.n_embd)
    w.add_block_count(s.n_layer)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(s.rope_base)
    w.add_rope_dimension_count(s.head_dim)
    w.add_vocab_size(s.n_vocab)
    w.add_file_type(F16)
    for key, field in reader.fields.items():  # the tokenizer, as the vocabulary file has it
        if key.startswith("tokenizer."):
            sub = field.types[1] if len(field.types) > 1 else None
            w.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    if "tokenizer.ggml.add_bos_token" not in reader.fields:
        w.add_add_bos_token(True)  # as Llama 3's own GGUFs say
    shapes = tensor_shapes(s)
    for name, shape in shapes:
        dtype = np.float32 if len(shape) == 1 else np.float16
        w.add_tensor_info(name, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    pool = (rng.standard_normal(1 << 22, dtype=np.float32) * 0.02).astype(np.float16)  # tiled, shifted per tensor
    for name, shape in shapes:
        if len(shape) == 1:
            w.write_tensor_data(np.ones(shape, np.float32))
        else:
            w.write_tensor_data(np.resize(np.roll(pool, int(rng.integers(len(pool)))), shape))
    w.close()


def quantize(src: Path, dst: Path, threads: int) -> None:
    """llama.cpp's own quantizer (llama_model_quantize) to Q4_K_M."""
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = threads
    params.ftype = Q4_K_M
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize failed ({rc}) on {src}")


def random_model(s: Shape, threads: int, log=print) -> Path:
    """The Q4_K_M random-weight model of shape ``s``, built once into the user cache."""
    from llama_src import vocab_file

    folder = fetch.cache_dir() / "bench-models"
    out = folder / f"{s.name}-Q4_K_M.gguf"
    if out.is_file():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    f16, part = out.with_name(f"{s.name}-F16.gguf.part"), out.with_name(out.name + ".part")
    need = n_params(s) * 2 + n_params(s) * 0.6  # F16 + Q4_K_M (about 4.8 bits a weight) at once
    free = shutil.disk_usage(folder).free
    if need > free:
        raise SystemExit(f"building {s.name} needs about {need / 2**30:.1f} GiB on {folder}, {free / 2**30:.1f} GiB free")
    try:
        t0 = time.perf_counter()
        write_random_gguf(s, vocab_file(s.vocab, log=log), f16)
        log(f"{s.name}: F16 written ({f16.stat().st_size / 2**30:.1f} GiB, {time.perf_counter() - t0:.0f} s); quantizing")
        t0 = time.perf_counter()
        quantize(f16, part, threads)
        os.replace(part, out)
        log(f"{s.name}: Q4_K_M {out.stat().st_size / 2**30:.2f} GiB ({time.perf_counter() - t0:.0f} s)")
    finally:
        f16.unlink(missing_ok=True)
        part.unlink(missing_ok=True)
    return out


# -- measuring -----------------------------------------------------------------------------
def run_cmd(model: Path, threads: int, data_dir: str, *extra: str) -> list[str]:
    """``abricot-local run MODEL --tasks discotex`` with ``extra`` (the item selection, an engine, ...)."""
    return [sys.executable, "-m", "abricot_local", "run", str(model), "--tasks", "discotex", "--threads", str(threads),
            "--data-dir", data_dir, *extra]


def measure_run(model: Path, threads: int, data_dir: str, *extra: str) -> dict:
    """``abricot-local run`` in a child process: its wall and scoring seconds, peak RSS (the
    child's own ru_maxrss, from wait4), kernels, and each item's (id, pred, gold)."""
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t0 = time.perf_counter()
        proc = subprocess.Popen(run_cmd(model, threads, data_dir, *extra, "--out", out), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"run of {model.name} failed ({proc.returncode}): {err[-2000:]}")
        doc = json.loads((Path(out) / "results.json").read_text())
        samples = [json.loads(line) for line in (Path(out) / "samples-discotex.jsonl").read_text().splitlines()]
    task = doc["tasks"]["discotex"]
    return {"wall_s": wall, "score_s": task["seconds"], "items": task["n"], "peak_rss": usage.ru_maxrss * 1024,
            "threads": doc["provenance"]["threads"], "system_info": doc["provenance"]["system_info"],
            "preds": [(s["id"], s["pred"], s["gold"]) for s in samples],
            "multi_token": any(len(t) > 1 for s in samples for t in s["continuation_tokens"])}


def has_dry_run() -> bool:
    """Whether this CLI's ``run`` has ``--dry-run`` (issue 24, item 1)."""
    help_text = subprocess.run([sys.executable, "-m", "abricot_local", "run", "--help"], capture_output=True,
                               text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    return "--dry-run" in help_text


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(hours?|h|minutes?|min|m|seconds?|sec|s)\b", re.I)
_UNIT = {"h": 3600, "m": 60, "s": 1}


def parse_prediction(text: str) -> float | None:
    """Seconds predicted by ``run --dry-run``: a JSON document's first number under a key
    naming seconds, else the durations ("1 h 20 min", "95 s") on the first line that
    speaks of a prediction or estimate; None when there is none."""
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if doc is not None:
        stack = [doc]
        while stack:
            node = stack.pop(0)
            if isinstance(node, dict):
                for key, value in node.items():
                    if "second" in key and isinstance(value, (int, float)) and not isinstance(value, bool):
                        return float(value)
                    stack.append(value)
            elif isinstance(node, list):
                stack += node
        return None
    for line in text.splitlines():
        if re.search(r"predict|estimat|expect|would take|will take", line, re.I):
            parts = _DURATION.findall(line)
            if parts:
                return float(sum(float(n) * _UNIT[u[0].lower()] for n, u in parts))
    return None


def dry_run(model: Path, sample: int, threads: int, data_dir: str) -> float | None:
    res = subprocess.run(run_cmd(model, threads, data_dir, "--sample", str(sample), "--dry-run"), capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    return parse_prediction(res.stdout) or parse_prediction(res.stderr)


def facts(model: Path, items: list, threads: int, data_dir: str) -> dict:
    """What needs no scoring: tokens and decode calls of the items (prefix engine) and of a
    full run, and the tool's memory estimate (weights + KV cache, as ``run`` checks it)."""
    from throughput import engine_work

    from abricot_local.backends.llama_cpp import LlamaCppBackend, LlamaCppOptions

    opts = LlamaCppOptions(threads=threads)
    kv = LlamaCppBackend.preflight(model, opts)["kv_bytes"]
    vb = LlamaCppBackend(model, LlamaCppOptions(vocab_only=True))
    try:
        work = engine_work(vb, items, opts)
        full = {name: engine_work(vb, its, opts).tokens for name, its in full_items(data_dir).items()}
        arch = vb.metadata("general.architecture")
        n_vocab = vb.n_vocab
    finally:
        vb.close()
    return {"tokens": work.tokens, "decode_calls": work.decode_calls, "full_tokens": full, "n_vocab": n_vocab,
            "weights": model_bytes(model), "kv": kv, "arch": arch, "n_params": gguf_params(model)}


def gguf_params(model: Path) -> int:
    """Parameters of a GGUF (its tensors' elements), read with the gguf package."""
    import gguf

    return int(sum(int(t.n_elements) for t in gguf.GGUFReader(model).tensors))


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

    return [("Gemma 3 270M", Path(fetch.resolve_model("gemma-3-270m").path)),
            ("SmolLM2-135M", model_path("smollm2", Path(tempfile.gettempdir())))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1b,3b,7b", help="random-weight shapes to build and run: " + ",".join(SHAPES))
    ap.add_argument("--no-real", action="store_true", help="skip the two real models")
    ap.add_argument("--sample", type=int, default=12, help="DISCOTEX items (a seeded draw), the same for every model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "discotex"))
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
    predicting = has_dry_run()
    rows = []
    for label, path in models:
        f = facts(path, items, args.threads, args.data_dir)
        predicted = dry_run(path, args.sample, args.threads, args.data_dir) if predicting else None
        load = os.getloadavg()[0]
        m = measure_run(path, args.threads, args.data_dir, "--sample", str(args.sample))
        m.pop("preds")
        row = {"model": label, "file": path.name, **f, **m, "predicted_s": predicted, "load_avg": load,
               "tok_s": f["tokens"] / m["score_s"], "s_item": m["score_s"] / m["items"]}
        row["full_h"] = sum(f["full_tokens"].values()) / row["tok_s"] / 3600
        rows.append(row)
        print(f"{label}: {row['s_item']:.2f} s/item, {row['tok_s']:.0f} tok/s, peak RSS {m['peak_rss'] / 2**30:.2f} GiB",
              file=sys.stderr)
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": args.label or machine(),
           "cpu_count": os.cpu_count(), "threads": args.threads, "sample": args.sample,
           "dry_run": predicting, "rows": rows}
    table = format_table(doc)
    print(table)
    out = HERE / "results" / f"{doc['created'].replace(':', '')}-scale.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    if not args.no_readme:
        from throughput import update_readme

        update_readme(MARK, table, "## Scale: 1B, 3B and 7B shapes with random weights (`scale.py`)")
    print(f"\nsaved {out.relative_to(ROOT)}")


def machine() -> str:
    """CPU model and core count, as /proc/cpuinfo says."""
    try:
        name = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name"))
    except (OSError, StopIteration):
        name = "unknown CPU"
    return f"{name}, {os.cpu_count()} cores"


def gib(n: float) -> str:
    return f"{n / 2**30:.2f}"


def format_table(doc: dict) -> str:
    rows = doc["rows"]
    kernels = rows[0]["system_info"] if rows else ""
    pred = "predicted s (--dry-run)" if doc["dry_run"] else "predicted s"
    head = (f"scale: DISCOTEX, the same {doc['sample']} items (`--sample {doc['sample']}`) for every model, prefix engine, "
            f"{doc['threads']} threads, n_ctx 2048; {doc['machine']}; {doc['created'][:10]}; kernels: `{kernels}`. "
            f"Command: `nice -n 10 python bench/scale.py --sample {doc['sample']} --threads {doc['threads']}`\n\n")
    lines = [f"| model | params | Q4 file GiB | vocab | tokens/item | decode calls | prompt tok/s | s/item | load s "
             f"| peak RSS GiB | estimate GiB (weights + KV) | RSS / estimate | {pred} | measured s | load avg |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        est = r["weights"] + r["kv"]
        predicted = f"{r['predicted_s']:.0f}" if r["predicted_s"] is not None else (
            "n/a (no --dry-run yet)" if not doc["dry_run"] else "n/a (not parsed)")
        lines.append(f"| {r['model']} | {r['n_params'] / 1e9:.2f}B | {gib(r['weights'])} | {r['n_vocab']} "
                     f"| {r['tokens'] / r['items']:.0f} | {r['decode_calls']} | {r['tok_s']:.1f} | {r['s_item']:.2f} "
                     f"| {r['wall_s'] - r['score_s']:.1f} | {gib(r['peak_rss'])} | {gib(est)} "
                     f"| {r['peak_rss'] / est:.2f} | {predicted} | {r['wall_s']:.0f} | {r['load_avg']:.1f} |")
    lines += ["", "Projected full run (DISCOTEX 1600 items + ABRICOT 2 x 127, prefix engine, this model's tokenizer) "
              "at the prompt tok/s measured above:", "",
              "| model | DISCOTEX tokens | ABRICOT tokens | hours |", "|---|---|---|---|"]
    for r in rows:
        ft = r["full_tokens"]
        lines.append(f"| {r['model']} | {ft['discotex']} | {ft['abricot_abs'] + ft['abricot_inc']} | {r['full_h']:.1f} |")
    return head + "\n".join(lines)


if __name__ == "__main__":
    main()
