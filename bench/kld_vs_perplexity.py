"""abricot-local's streamed KLD beside `llama-perplexity --kl-divergence`, on the same tokens: one rung,
and ladders of two and three, against llama-perplexity's base pass plus its rung passes, in one run.

The text is the first ``--items`` DISCOTEX contexts (the prompts abricot-local scores), joined
by blank lines. llama-perplexity tokenizes it (BOS first), cuts it into ``-c`` token chunks, puts
BOS in each chunk's first cell, decodes each chunk from an empty cache and compares only the
second half: the rows at positions n_ctx/2 .. n_ctx-2 (each predicting the next token of the
chunk). Its first pass (reference model) stores those rows' log-probabilities in the base file
(16 bits an entry, over the 16 nats below each row's top); each rung's pass reads them.

abricot-local's side decodes the very tokens the base file records (read from its header), in the
same calls (one chunk of n_ctx tokens a call, output rows asked at positions n_ctx/2 .. n_ctx-2),
with the reference and the rungs loaded at once and driven in lockstep by the project's
:class:`abricot_local.backends.kld.LadderSession` over its llama.cpp sessions (LlamaSession), with
llama-perplexity's settings (threads, n_batch = n_ubatch = n_ctx, flash attention auto, no weight
repacking, full SWA cache): the reference decodes each chunk once for all the rungs, and each
call's rows are compared at once on ``--threads`` threads (its Reducer), then
:func:`abricot_local.analysis.kld.summarise`. Three runs: the first rung alone, the first two
rungs, every rung; each timed from loading the models to the last row (llama-perplexity's from
starting the process to its exit), in wall and in CPU seconds (llama-perplexity's process's user +
system; this process's, every thread). ``--repeat N``: N rounds of both sides in alternate order
(llama-perplexity first, then abricot-local first, ...), each run's fastest round reported: a
shared machine's load drifts. Nothing is written. In the last run, timed aside (not counted),
every row is also compared by the one-row :func:`abricot_local.backends.kld.kl_row` (the bulk
reduction's maximum difference from it) and by llama-perplexity's own formula (dequantized 16-bit
base, terms below -16 nats dropped) on the rung's rows from this same process: it isolates what the
base file's storage changes.

Beside them, unless ``--command-items 0``, the user's command itself (kld_command.py): finished runs of
the reference and each rung on the first ``--command-items`` DISCOTEX items are made first (not timed),
then `kld REF R1`, `kld REF R1 R2` and `kld REF R1..Rn` run as the command runs them (run/kld.py's
``kld_runs``: models found and hashed, loaded, the task's schedule with a row at every decoded token,
kld.json written into copies), each timed whole in every round, beside what `kld --dry-run` predicted.

    python bench/kld_vs_perplexity.py --perplexity BUILD/bin/llama-perplexity \\
        --ref rungs/gemma-3-270m-from-q4_k_m-f16.gguf \\
        --rung rungs/gemma-3-270m-from-q4_k_m-q8_0.gguf \\
        --rung rungs/gemma-3-270m-from-q4_k_m-q4_0.gguf \\
        --rung rungs/gemma-3-270m-from-q4_k_m-q2_k.gguf \\
        --data-dir data/discotex --items 12 --chunks 4 -c 512 --threads 2 --repeat 2 --command-items 12
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

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


def perplexity(a, model: str, text: Path, base: Path, kld: bool) -> tuple[float, float, str]:
    """One llama-perplexity pass: its wall seconds, its CPU seconds (user + system), its output."""
    cmd = [a.perplexity, "-m", model, "-f", str(text), "--kl-divergence-base", str(base), *common_flags(a)]
    if kld:
        cmd.append("--kl-divergence")
    c0 = _children_cpu()
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    out = res.stdout + res.stderr
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}):\n{out[-3000:]}")
    return secs, _children_cpu() - c0, out


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


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


class Last:
    """A session that keeps the rows of its last decode call (views, valid until its next one)."""

    def __init__(self, session):
        self.s, self.last = session, []

    def decode(self, entries):
        self.last = self.s.decode(entries)
        return self.last

    def __getattr__(self, name):
        return getattr(self.s, name)


@dataclass
class Side:
    rungs: list  # model paths
    seconds: float = 0.0  # loading the models to the last row compared
    cpu: float = 0.0  # this process's CPU seconds (every thread: llama.cpp's and the Reducer's) over the same
    load: float = 0.0
    reduce: float = 0.0  # comparing the rows (the Reducer), within seconds
    rows: list = field(default_factory=list)  # KlRows per rung
    by_kl_row: list = field(default_factory=list)  # per rung: kl_row's KL of every row (checked runs)
    by_formula: list = field(default_factory=list)  # per rung: llama-perplexity's formula's (KL, same top)


def abricot_side(a, ref: str, rungs: list, n_ctx: int, n_vocab: int, tokens: np.ndarray,
                 base_rows: np.ndarray | None = None) -> Side:
    """The rungs in lockstep with the reference; with ``base_rows``, every row also compared aside."""
    from abricot_local.backends.kld import KlRows, LadderSession, kl_row
    from abricot_local.backends.llama_cpp.options import LlamaCppOptions
    from abricot_local.backends.llama_cpp.session import LlamaSession

    opts = LlamaCppOptions(n_ctx=n_ctx, n_batch=n_ctx, threads=a.threads, flash_attn="auto", extra_bufts="off",
                           n_gpu_layers=0)
    side = Side(rungs, rows=[KlRows() for _ in rungs])
    c0, t0 = time.process_time(), time.perf_counter()
    s_ref = Last(LlamaSession(Path(ref), opts))
    s_rungs = [Last(LlamaSession(Path(r), opts)) for r in rungs]
    side.load = time.perf_counter() - t0
    ladder = LadderSession(s_ref, s_rungs, side.rows, threads=a.threads, every_token=False)
    compare = ladder.reducer.compare

    def timed(*args):
        t = time.perf_counter()
        try:
            return compare(*args)
        finally:
            side.reduce += time.perf_counter() - t

    ladder.reducer.compare = timed
    first = n_ctx // 2
    aside = aside_cpu = 0.0
    if base_rows is not None:
        side.by_kl_row, side.by_formula = [[] for _ in rungs], [[] for _ in rungs]
    try:
        for c, chunk in enumerate(tokens):
            toks = [int(t) for t in chunk]
            if s_ref.add_bos:
                toks[0] = s_ref.bos
            ladder.clear()
            ladder.decode([(0, pos, tok, first <= pos < n_ctx - 1) for pos, tok in enumerate(toks)])
            if base_rows is None:
                continue
            c1, t1 = time.process_time(), time.perf_counter()
            for k, rung in enumerate(s_rungs):
                for pos in range(first, n_ctx - 1):
                    side.by_kl_row[k].append(kl_row(s_ref.last[pos], rung.last[pos])[0])
                    side.by_formula[k].append(llama_formula(base_rows[c, pos - first], n_vocab, rung.last[pos]))
            aside += time.perf_counter() - t1  # not abricot-local's cost
            aside_cpu += time.process_time() - c1
    finally:
        ladder.close()
        for s in (s_ref, *s_rungs):
            s.close()
    side.seconds = time.perf_counter() - t0 - aside
    side.cpu = time.process_time() - c0 - aside_cpu
    return side


def name(path: str) -> str:
    m = re.search(r"-(f16|bf16|f32|q\w+)\.gguf$", Path(path).name, re.I)
    return m.group(1).upper() if m else Path(path).name


def stats_table(rung: str, lp: dict, st, st_formula, ours: np.ndarray, by_kl_row: np.ndarray,
                formula: np.ndarray) -> None:
    print(f"\n### {rung}\n")
    print("| statistic | llama-perplexity | abricot-local (ladder) | abs diff | llama formula, same rows |")
    print("|---|---|---|---|---|")
    for key in ("mean", "median", "p99", "p99_9", "max", "same_top"):
        mine, rep = getattr(st, key), getattr(st_formula, key)
        diff = (f"{round(abs(lp[key] - mine) * len(ours))} of {len(ours)} tokens" if key == "same_top"
                else f"{abs(lp[key] - mine):.2e}")  # llama-perplexity prints a percentage to 3 decimals
        print(f"| {key} | {lp[key]:.6f} | {mine:.6f} | {diff} | {rep:.6f} |")
    # llama-perplexity's "±" treats every token as independent: set beside abricot-local's per-token standard error
    # (KldStats.se_token), not beside kld's CI, which is over the items (the chunks here are no items)
    print(f"| mean's per-token standard error (every token independent) | {lp['mean_se']:.6f} | {st.se_token:.6f} "
          f"| {abs(lp['mean_se'] - st.se_token):.2e} | {st_formula.se_token:.6f} |")
    d = np.abs(ours - formula)
    print(f"\nper token, the ladder against llama-perplexity's formula on the stored base: max abs diff {d.max():.2e}, "
          f"mean {d.mean():.2e} (mean KL {ours.mean():.4f}); against kl_row one row at a time: max abs diff "
          f"{np.abs(ours - by_kl_row).max():.2e}, max relative {np.max(np.abs(ours - by_kl_row) / np.maximum(by_kl_row, 1e-300)):.1e}")


def main() -> None:
    from abricot_local.analysis.kld import summarise

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--perplexity", required=True, help="llama-perplexity built from llama-cpp-python's llama.cpp")
    p.add_argument("--ref", required=True)
    p.add_argument("--rung", action="append", required=True, help="a rung; the first is the one-rung run's")
    p.add_argument("--data-dir", required=True, help="the DISCOTEX release folder")
    p.add_argument("--items", type=int, default=12)
    p.add_argument("--chunks", type=int, default=4)
    p.add_argument("-c", "--ctx", type=int, default=512)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=1, help="rounds of both sides, in alternate order (ABBA...); "
                   "the tables give each run's fastest")
    p.add_argument("--command-items", type=int, default=12, help="DISCOTEX items of the runs `kld` itself measures "
                   "(0: the command is not run)")
    a = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="kld-bench-") as tmp:
        text, base = Path(tmp) / "discotex.txt", Path(tmp) / "base.kld"
        text.write_text(task_text(a.data_dir, a.items), encoding="utf-8")
        lp_rounds, lp_stats, ab_rounds = [], {}, []
        sizes = sorted({1, min(2, len(a.rung)), len(a.rung)})

        def lp_round():
            t = {"base": perplexity(a, a.ref, text, base, kld=False)[:2]}
            for rung in a.rung:
                *t[rung], out = perplexity(a, rung, text, base, kld=True)
                lp_stats.setdefault(rung, parse_stats(out))
            lp_rounds.append(t)

        lp_round()
        base_mb = base.stat().st_size / 1e6
        n_ctx, n_vocab, tokens, rows = read_base(base)
        same = own_tokens(a.ref, text)[:tokens.size] == tokens.ravel().tolist()
        print(f"abricot-local's tokenizer gives llama-perplexity's tokens: {'yes' if same else 'NO'}")
        print(f"text: first {a.items} DISCOTEX contexts, {text.stat().st_size} bytes; {len(tokens)} chunks of "
              f"{n_ctx} tokens, {len(tokens) * (n_ctx - 1 - n_ctx // 2)} scored tokens; vocabulary {n_vocab}; "
              f"{a.threads} threads; {a.repeat} round(s)")
        from kld_command import make_runs, run_command, table

        runs = make_runs(a, Path(tmp) / "runs") if a.command_items else []
        commands: dict = {}
        for r in range(a.repeat):  # llama-perplexity then abricot-local, then the other way round, ...
            if r % 2 == 0 and r > 0:
                lp_round()
            ab_rounds.append({n: abricot_side(a, a.ref, a.rung[:n], n_ctx, n_vocab, tokens,
                                              rows if r == 0 and n == len(a.rung) else None) for n in sizes})
            for n in sizes if runs else ():
                commands[n] = run_command(a, runs, n, Path(tmp), commands.get(n))
            if r % 2 == 1:
                lp_round()
        full = ab_rounds[0][len(a.rung)]
        for k, rung in enumerate(a.rung):
            ours = np.asarray(full.rows[k].kl)
            formula = np.asarray([f[0] for f in full.by_formula[k]])
            stats_table(f"{name(a.ref)} -> {name(rung)}", lp_stats[rung], summarise(full.rows[k].kl,
                        full.rows[k].same_top), summarise(formula, [f[1] for f in full.by_formula[k]]), ours,
                        np.asarray(full.by_kl_row[k]), formula)
        alike = all(rd[n].rows[k].kl == full.rows[k].kl and rd[n].rows[k].same_top == full.rows[k].same_top
                    for rd in ab_rounds for n in sizes for k in range(n))
        print(f"\neach rung's rows the same bits alone, in the ladder of two and of {len(a.rung)}, in every round: "
              f"{'yes' if alike else 'NO'}")
        timing_table(a, lp_rounds, ab_rounds, sizes)
        if commands:
            table(a, {key: tuple(min(t[key][i] for t in lp_rounds) for i in (0, 1)) for key in lp_rounds[0]},
                  commands, name)
        print(f"disk: llama-perplexity base file {base_mb:.1f} MB; abricot-local 0 MB (no logits file)")


def timing_table(a, lp_rounds: list, ab_rounds: list, sizes: list) -> None:
    """Each run's fastest round, wall and CPU seconds, both sides."""
    lp = {key: tuple(min(t[key][i] for t in lp_rounds) for i in (0, 1)) for key in lp_rounds[0]}
    print("\n| rungs | llama-perplexity: base + rung passes (s) | abricot-local (s) (load, rows compared) | ratio "
          "| CPU s: llama-perplexity | CPU s: abricot-local | ratio |")
    print("|---|---|---|---|---|---|---|")
    best = {}
    for n in sizes:
        rungs = a.rung[:n]
        wall, cpu = (min(getattr(rd[n], f) for rd in ab_rounds) for f in ("seconds", "cpu"))
        side = min((rd[n] for rd in ab_rounds), key=lambda s: s.seconds)
        best[n] = wall
        theirs = [lp["base"][i] + sum(lp[r][i] for r in rungs) for i in (0, 1)]
        parts = " + ".join(f"{lp[r][0]:.1f}" for r in rungs)
        print(f"| {', '.join(name(r) for r in rungs)} | {lp['base'][0]:.1f} + {parts} = {theirs[0]:.1f} | "
              f"{wall:.1f} ({side.load:.1f}, {side.reduce:.1f}) | {wall / theirs[0]:.2f}x | {theirs[1]:.1f} | "
              f"{cpu:.1f} | {cpu / theirs[1]:.2f}x |")
    if 2 in best:
        print(f"\nthe ladder of two against one rung: {best[2] / best[1]:.2f}x")


if __name__ == "__main__":
    main()
