"""abricot-local's streamed KLD beside `llama-perplexity --kl-divergence`, on the same tokens.

The text is the first ``--items`` DISCOTEX contexts (the prompts abricot-local scores), joined
by blank lines. llama-perplexity tokenizes it (BOS first), cuts it into ``-c`` token chunks, puts
BOS in each chunk's first cell, decodes each chunk from an empty cache and compares only the
second half: the rows at positions n_ctx/2 .. n_ctx-2 (each predicting the next token of the
chunk). Its first pass (reference model) stores those rows' log-probabilities in the base file
(16 bits an entry, over the 16 nats below each row's top); its second pass (the rung) reads them.

abricot-local's side decodes the very tokens the base file records (read from its header), in the
same calls (one chunk of n_ctx tokens a call, output rows asked at positions >= n_ctx/2, as
llama-perplexity asks), with both models loaded at once through the project's llama.cpp session
(LlamaSession) with llama-perplexity's settings (threads, n_batch = n_ubatch = n_ctx, flash
attention auto, no weight repacking, full SWA cache), and reduces each pair of rows with the
project's own :func:`abricot_local.backends.kld.kl_row` (float64, every vocabulary entry), then
:func:`abricot_local.analysis.kld.summarise`. Nothing is written. A third column applies
llama-perplexity's own formula (dequantized 16-bit base, terms below -16 nats dropped) to the
rung's rows from this same process: it isolates what the base file's storage changes.

    python bench/kld_vs_perplexity.py --perplexity BUILD/bin/llama-perplexity \\
        --ref rungs/gemma-3-270m-from-q4_k_m-f16.gguf \\
        --rung rungs/gemma-3-270m-from-q4_k_m-q8_0.gguf \\
        --rung rungs/gemma-3-270m-from-q4_k_m-q2_k.gguf \\
        --data-dir data/discotex --items 12 --chunks 4 -c 512 --threads 2
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STATS = {  # llama-perplexity's "KL divergence statistics" lines -> our keys
    "mean": r"Mean\s+KLD:\s+([-\d.]+)\s+±\s+([-\d.]+)",
    "max": r"Maximum KLD:\s+([-\d.]+)",
    "p99_9": r"99\.9%\s+KLD:\s+([-\d.]+)",
    "p99": r"99\.0%\s+KLD:\s+([-\d.]+)",
    "median": r"Median\s+KLD:\s+([-\d.]+)",
    "same_top": r"Same top p:\s+([-\d.]+)\s+±",
}


def task_text(data_dir: str, items: int) -> str:
    from abricot_local.tasks import make_task
    from abricot_local.tasks.base import TaskOptions

    task = make_task("discotex", TaskOptions(data_dir=data_dir))
    return "\n\n".join(it.context for it in task.items()[:items]) + "\n"


def common_flags(a) -> list[str]:
    return ["-c", str(a.ctx), "-b", str(a.ctx), "-ub", str(a.ctx), "-t", str(a.threads), "--chunks", str(a.chunks),
            "-fa", "auto", "--no-repack", "--swa-full", "-ngl", "0"]


def perplexity(a, model: str, text: Path, base: Path, kld: bool) -> tuple[float, str]:
    cmd = [a.perplexity, "-m", model, "-f", str(text), "--kl-divergence-base", str(base), *common_flags(a)]
    if kld:
        cmd.append("--kl-divergence")
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    out = res.stdout + res.stderr
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}):\n{out[-3000:]}")
    return secs, out


def parse_stats(out: str) -> dict:
    got = {}
    for key, pat in STATS.items():
        m = re.search(pat, out)
        if not m:
            sys.exit(f"llama-perplexity printed no {key!r} line:\n{out[-3000:]}")
        got[key] = float(m.group(1))
        if key == "mean":
            got["mean_se"] = float(m.group(2))
    got["same_top"] /= 100
    return got


def read_base(path: Path):
    """The base file: '_logits_', n_ctx, n_vocab, n_chunk, the tokens, then per chunk the 16-bit rows."""
    with open(path, "rb") as f:
        assert f.read(8) == b"_logits_", f"{path} is no llama-perplexity base file"
        n_ctx, n_vocab, n_chunk = (int(x) for x in np.frombuffer(f.read(12), dtype=np.int32))
        tokens = np.frombuffer(f.read(4 * n_ctx * n_chunk), dtype=np.int32).copy()
        nv = 2 * ((n_vocab + 1) // 2) + 4
        rows = np.fromfile(f, dtype=np.uint16).reshape(n_chunk, n_ctx - 1 - n_ctx // 2, nv)
    return n_ctx, n_vocab, tokens.reshape(n_chunk, n_ctx), rows


def llama_formula(stored: np.ndarray, n_vocab: int, rung_row: np.ndarray) -> tuple[float, bool]:
    """llama-perplexity's own per-token KL (tools/perplexity/perplexity.cpp, log_softmax with a base row)."""
    scale, min_lp = np.frombuffer(stored[:4].tobytes(), dtype=np.float32)
    plb = scale * stored[4:4 + n_vocab].astype(np.float32) + min_lp
    q = rung_row.astype(np.float32)
    mx = q.max()
    lse = mx + np.float32(np.log(np.exp((q - mx).astype(np.float64)).sum()))
    keep = plb > -16.0
    kl = float(np.sum(np.exp(plb[keep].astype(np.float64)) * (plb[keep] - q[keep] + lse)))
    return kl, int(np.argmax(q)) == int(np.argmax(plb))


def own_tokens(model: str, text: Path) -> list[int]:
    from abricot_local.backends.llama_cpp.options import LlamaCppOptions
    from abricot_local.backends.llama_cpp.session import LlamaSession

    s = LlamaSession(Path(model), LlamaCppOptions(vocab_only=True))
    try:
        return s.tokenize(text.read_text(encoding="utf-8"))
    finally:
        s.close()


def abricot_side(a, ref: str, rung: str, n_ctx: int, n_vocab: int, tokens: np.ndarray, rows: np.ndarray):
    from abricot_local.analysis.kld import summarise
    from abricot_local.backends.kld import kl_row
    from abricot_local.backends.llama_cpp.options import LlamaCppOptions
    from abricot_local.backends.llama_cpp.session import LlamaSession

    opts = LlamaCppOptions(n_ctx=n_ctx, n_batch=n_ctx, threads=a.threads, flash_attn="auto", extra_bufts="off",
                           n_gpu_layers=0)
    t0 = time.perf_counter()
    s_ref, s_rung = LlamaSession(Path(ref), opts), LlamaSession(Path(rung), opts)
    first = n_ctx // 2
    ours, same, theirs, same_l = [], [], [], []
    aside = 0.0
    try:
        for c, chunk in enumerate(tokens):
            toks = [int(t) for t in chunk]
            if s_ref.add_bos:
                toks[0] = s_ref.bos
            entries = [(0, pos, tok, pos >= first) for pos, tok in enumerate(toks)]
            s_ref.clear()
            s_rung.clear()
            x = s_ref.decode(entries)  # views of each model's own logits buffer, valid until its next decode
            y = s_rung.decode(entries)
            for pos in range(first, n_ctx - 1):
                kl, s = kl_row(x[pos], y[pos], label="bench", position=pos)
                ours.append(kl)
                same.append(s)
                t1 = time.perf_counter()
                kl2, s2 = llama_formula(rows[c, pos - first], n_vocab, np.asarray(y[pos]))
                aside += time.perf_counter() - t1  # the replica is not abricot-local's cost
                theirs.append(kl2)
                same_l.append(s2)
    finally:
        s_ref.close()
        s_rung.close()
    secs = time.perf_counter() - t0 - aside
    return secs, summarise(ours, same), summarise(theirs, same_l), np.asarray(ours), np.asarray(theirs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--perplexity", required=True, help="llama-perplexity built from llama-cpp-python's llama.cpp")
    p.add_argument("--ref", required=True)
    p.add_argument("--rung", action="append", required=True)
    p.add_argument("--data-dir", required=True, help="the DISCOTEX release folder")
    p.add_argument("--items", type=int, default=12)
    p.add_argument("--chunks", type=int, default=4)
    p.add_argument("-c", "--ctx", type=int, default=512)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="kld-bench-") as tmp:
        text, base = Path(tmp) / "discotex.txt", Path(tmp) / "base.kld"
        text.write_text(task_text(a.data_dir, a.items), encoding="utf-8")
        t_base, _ = perplexity(a, a.ref, text, base, kld=False)
        base_mb = base.stat().st_size / 1e6
        n_ctx, n_vocab, tokens, rows = read_base(base)
        same = own_tokens(a.ref, text) [:tokens.size] == tokens.ravel().tolist()
        print(f"abricot-local's tokenizer gives llama-perplexity's tokens: {'yes' if same else 'NO'}")
        print(f"text: first {a.items} DISCOTEX contexts, {text.stat().st_size} bytes; {len(tokens)} chunks of "
              f"{n_ctx} tokens, {len(tokens) * (n_ctx - 1 - n_ctx // 2)} scored tokens; vocabulary {n_vocab}")
        print(f"llama-perplexity base pass ({Path(a.ref).name}): {t_base:.1f} s, base file {base_mb:.1f} MB")
        for rung in a.rung:
            t_kld, out = perplexity(a, rung, text, base, kld=True)
            lp = parse_stats(out)
            t_ab, st, st_l, ours, theirs = abricot_side(a, a.ref, rung, n_ctx, n_vocab, tokens, rows)
            print(f"\n### {Path(a.ref).name} -> {Path(rung).name}\n")
            print("| statistic | llama-perplexity | abricot-local kl_row | llama formula, same rows "
                  "| abs diff lp vs ours |")
            print("|---|---|---|---|---|")
            for key, ours_v, rep_v in (("mean", st.mean, st_l.mean), ("median", st.median, st_l.median),
                                       ("p99", st.p99, st_l.p99), ("p99_9", st.p99_9, st_l.p99_9),
                                       ("max", st.max, st_l.max), ("same_top", st.same_top, st_l.same_top)):
                print(f"| {key} | {lp[key]:.6f} | {ours_v:.6f} | {rep_v:.6f} | {abs(lp[key] - ours_v):.2e} |")
            se = (st.ci95[1] - st.mean) / 1.959963984540054
            print(f"| mean's standard error | {lp['mean_se']:.6f} | {se:.6f} | | |")
            d = np.abs(ours - theirs)
            print(f"\nper token, kl_row vs llama formula on the stored base: max abs diff {d.max():.2e}, "
                  f"mean abs diff {d.mean():.2e} (mean KL {ours.mean():.4f})")
            print(f"time: llama-perplexity {t_base:.1f} s base pass + {t_kld:.1f} s KLD pass = {t_base + t_kld:.1f} s; "
                  f"abricot-local streamed (both models loaded, one pass) {t_ab:.1f} s; ratio "
                  f"{(t_base + t_kld) / t_ab:.2f}x")
            print(f"disk: llama-perplexity base file {base_mb:.1f} MB; abricot-local 0 MB (no logits file)")


if __name__ == "__main__":
    main()
