"""llama.cpp's own multiple-choice scorer against `abricot-local run`: the same DISCOTEX items,
the same model and threads, one run of this script.

    nice -n 10 python bench/perplexity_mc.py --models gemma,smollm2 --sample 40 --threads 2

`llama-perplexity` is built from the llama.cpp source of the installed llama-cpp-python
version (its sdist from PyPI, verified; llama_src.py), with the portable wheel's CPU kernels,
into the user cache. The items are written in its `--multiple-choice` input format
(tools/perplexity/perplexity.cpp; :func:`write_mc`): the question is the item's context, the
answers its continuations without their leading space (llama-perplexity scores
``question + " " + answer``, tokenized whole with BOS, as abricot-local's label mapping does).

What each side computes: llama-perplexity puts each item's 5 answers on 5 sequences of one
batch sharing the common prefix, decodes every answer token (the last included: its own
TODO), and picks the answer with the highest *mean* log-prob per answer token;
abricot-local's prefix engine decodes the task's shared instructions once for all items,
then one trunk per item, and sums the answer tokens' log-probs. With one token per answer
(DISCOTEX's letters in these vocabularies: the script checks) mean and sum pick alike.

Kernels (`--kernels`): `plain` (the default) runs both on llama.cpp's plain CPU kernels
(`--extra-bufts off`, abricot-local's default, and llama-perplexity `--no-repack`), `repacked`
both on repacked weights (`--extra-bufts on`, llama-perplexity's default), `defaults` each
side's own default: the first two compare the scorers on the same arithmetic.

llama-perplexity prints only a running accuracy, so which answer it picked is known where it
was right (the gold) or where only ours was (another); for the items both got wrong, a second,
untimed run over 3 copies of each whose labels are the bits of the answer's index tells
(:func:`bit_tasks`). Timed: its configurations (-c, -np, -b) once each, then its best and our
exact engines interleaved (ours, theirs, ours, ...) for --rounds rounds: the best round and
the median, and the ratio within each round. Each model's figures are saved as soon as it is
done (bench/results/); ``--from-json`` renders saved runs again.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import struct
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from abricot_local.tasks.selection import prepare  # noqa: E402
from abricot_local.tasks import make_task  # noqa: E402
from abricot_local.tasks.base import TaskOptions  # noqa: E402

MARK = "perplexity-mc"
# (label, -c, -np, -b): -np is the sequences of one batch (5 per DISCOTEX item), the context
# llama-perplexity allocates is -c x -np, -b caps the tokens of one llama_decode call
CONFIGS = (("-c 512 -np 5", 512, 5, 2048), ("-c 512 -np 10", 512, 10, 2048), ("-c 256 -np 20", 256, 20, 2048),
           ("-c 512 -np 20 -b 512", 512, 20, 512))
ENGINES = ("prefix", "single")

# -- the --multiple-choice file (perplexity.cpp: multiple_choice_task::deserialize) -----------


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<I", len(raw)) + raw


def _answers(answers: list[str], labels: list[int]) -> bytes:
    return struct.pack("<I", len(answers)) + b"".join(map(_string, answers)) + struct.pack(f"<{len(labels)}i", *labels)


def write_mc(path: Path, tasks: list[tuple[str, list[str], list[int]]]) -> None:
    """llama-perplexity's binary multiple-choice file: uint32 task count, uint32 byte offset of
    each task, then per task the question (uint32 length + UTF-8), mc1 (uint32 count, the
    answers as strings, int32 labels: 1 = correct) and an empty mc2 (uint32 0)."""
    bodies = [_string(q) + _answers(a, lab) + struct.pack("<I", 0) for q, a, lab in tasks]
    offset = 4 + 4 * len(bodies)
    positions = []
    for body in bodies:
        positions.append(offset)
        offset += len(body)
    path.write_bytes(struct.pack(f"<I{len(bodies)}I", len(bodies), *positions) + b"".join(bodies))


def read_mc(path: Path) -> list[tuple[str, list[str], list[int], list[str], list[int]]]:
    """The tasks of a multiple-choice file, read as perplexity.cpp reads them (a check of
    :func:`write_mc`): (question, mc1 answers, mc1 labels, mc2 answers, mc2 labels)."""
    data = path.read_bytes()
    at = 0

    def u32() -> int:
        nonlocal at
        (v,) = struct.unpack_from("<I", data, at)
        at += 4
        return v

    def string() -> str:
        nonlocal at
        n = u32()
        if at + n > len(data):
            raise ValueError("truncated string")
        s = data[at : at + n].decode("utf-8")
        at += n
        return s

    def answers() -> tuple[list[str], list[int]]:
        nonlocal at
        n = u32()
        if n > 100:
            raise ValueError("more than 100 answers")
        strs = [string() for _ in range(n)]
        labels = list(struct.unpack_from(f"<{n}i", data, at))
        at += 4 * n
        return strs, labels

    try:
        n_task = u32()
        positions = [u32() for _ in range(n_task)]
        out = []
        for pos in positions:
            if pos != at:
                raise ValueError(f"task offset {pos}, found the task at {at}")
            q = string()
            out.append((q, *answers(), *answers()))
    except struct.error as exc:
        raise ValueError(f"truncated file: {exc}") from None
    if at != len(data):
        raise ValueError(f"{len(data) - at} bytes after the last task")
    return out


def answers_of(item) -> list[str]:
    """An item's continuations as llama-perplexity answers (it adds the one space itself)."""
    if not all(c.startswith(" ") and not c.startswith("  ") for c in item.continuations):
        raise SystemExit(f"item {item.id}: continuations must start with exactly one space to be written as "
                         "llama-perplexity answers (question + ' ' + answer)")
    return [c[1:] for c in item.continuations]


def gold_tasks(items) -> list[tuple[str, list[str], list[int]]]:
    return [(it.context, answers_of(it), [int(k == it.gold) for k in range(len(it.continuations))]) for it in items]


def n_bits(n_answers: int) -> int:
    return max(1, math.ceil(math.log2(n_answers)))


def bit_tasks(items) -> list[tuple[str, list[str], list[int]]]:
    """Each item n_bits times; copy b labels answer j correct when bit b of j is set, so the
    copies' correct/wrong flags spell the index of the answer llama-perplexity picked."""
    out = []
    for it in items:
        n = len(it.continuations)
        out += [(it.context, answers_of(it), [(j >> b) & 1 for j in range(n)]) for b in range(n_bits(n))]
    return out


def picked_from_bits(correct: list[bool], n_answers: list[int]) -> list[int]:
    """The answer index of each item from the flags of its :func:`bit_tasks` copies."""
    out, at = [], 0
    for n in n_answers:
        k = n_bits(n)
        out.append(sum(int(flag) << b for b, flag in enumerate(correct[at : at + k])))
        at += k
    return out


# -- llama-perplexity's log -----------------------------------------------------------------
_ROW = re.compile(r"^(\d+)\t(\d+\.\d+)$", re.M)
_PERF = re.compile(r"llama_perf_context_print:\s+(load time|prompt eval time|eval time|total time)\s+=\s+([\d.]+) ms"
                   r"(?: /\s+(\d+) (?:tokens|runs))?")
_STAMP = r"(\d+)\.(\d\d)\.(\d{3})\.(\d{3}) I "  # common/log.cpp's timestamp: minutes.seconds.ms.us


def _stamp(text: str, what: str) -> float | None:
    m = re.search(_STAMP + re.escape(what), text)
    return None if m is None else int(m[1]) * 60 + int(m[2]) + int(m[3]) / 1e3 + int(m[4]) / 1e6


def parse_log(text: str) -> dict:
    """Per-task correctness (from the running accuracy rows "n<TAB>acc"), the scoring time
    (log timestamps from "calculating ... score" to "Final result": after loading and
    tokenizing), the perf counters (ms, tokens; printed with -lv 4) and the kernels."""
    correct, prev = [], 0
    for n, acc in _ROW.findall(text):
        hits = round(float(acc) * int(n) / 100)
        correct.append(hits > prev)
        prev = hits
    perf = {name: (float(ms), int(n) if n else None) for name, ms, n in _PERF.findall(text)}
    info = next((ln.split("system_info:", 1)[1].strip() for ln in text.splitlines() if "system_info:" in ln), "")
    start, end = _stamp(text, "multiple_choice_score : calculating"), _stamp(text, "Final result")
    score = end - start if start is not None and end is not None else None
    return {"correct": correct, "perf": perf, "system_info": info, "score_s": score}


def plan(token_counts: list[tuple[int, list[int]]], n_ctx: int, max_seq: int, n_batch: int) -> tuple[int, int]:
    """(tokens decoded, llama_decode calls) of multiple_choice_score's loop: tasks packed into
    one batch while their tokens fit n_ctx and their answers max_seq sequences; each batch
    decoded in n_batch-token calls. ``token_counts``: per task (common prefix, answer lengths
    beyond it)."""
    tokens = calls = 0
    i = 0
    while i < len(token_counts):
        cur = seqs = 0
        j = i
        while j < len(token_counts):
            common, tails = token_counts[j]
            need = common + sum(tails)
            if cur + need > n_ctx or seqs + len(tails) > max_seq:
                break
            cur, seqs, j = cur + need, seqs + len(tails), j + 1
        if j == i:
            raise SystemExit(f"task {i} does not fit -c x -np")
        tokens += cur
        calls += math.ceil(cur / n_batch)
        i = j
    return tokens, calls


def task_tokens(backend, items) -> list[tuple[int, list[int]]]:
    """Per item, as llama-perplexity tokenizes it: the common prefix of question + " " + answer
    (BOS first) over the answers, and each answer's tokens beyond it."""
    out = []
    for it in items:
        seqs = [backend.tokenize(it.context + " " + a) for a in answers_of(it)]
        common = 0
        while all(len(s) > common for s in seqs) and len({s[common] for s in seqs}) == 1:
            common += 1
        out.append((common, [len(s) - common for s in seqs]))
    return out


KERNELS = {  # --kernels: (abricot-local's flags, llama-perplexity's flags)
    "defaults": ((), ()),  # each side's default: ours plain (--extra-bufts off), llama-perplexity repacked
    "plain": (("--extra-bufts", "off"), ("--no-repack",)),  # the same plain kernels on both sides
    "repacked": (("--extra-bufts", "on"), ()),  # the same repacked weights on both sides
}


def run_theirs(exe: Path, model: Path, mc: Path, cfg: tuple, threads: int, extra: tuple = ()) -> dict:
    """One llama-perplexity run: wall, scoring seconds (its log), CPU seconds of the scoring
    (from its "calculating" line), tokens and decode ms (its perf print), each task's correctness."""
    from child import run_child

    _, c, np_, b = cfg
    cmd = [str(exe), "-m", str(model), "-bf", str(mc), "--multiple-choice", "-c", str(c), "-np", str(np_),
           "-b", str(b), "-t", str(threads), "-tb", str(threads), "-lv", "4", "--log-timestamps", "--log-prefix",
           *extra]
    res = run_child(cmd, lambda err: "multiple_choice_score : calculating" in err)
    if res.returncode != 0:
        raise SystemExit(f"llama-perplexity failed ({res.returncode}): {res.stderr[-2000:]}")
    log = parse_log(res.stdout + "\n" + res.stderr)
    perf = log["perf"]
    if log["score_s"] is None or "prompt eval time" not in perf or len(log["correct"]) != n_tasks(mc):
        raise SystemExit(f"llama-perplexity's log was not as expected (timestamps, perf, one row per task): "
                         f"{res.stderr[-1500:]}")
    # prompt eval: every scoring decode (batches of many tokens); "eval" holds only the warm-up run
    return {"wall_s": res.wall_s, "cpu_s": res.cpu_s, "score_cpu_s": res.cpu_after_start_s,
            "decode_ms": perf["prompt eval time"][0], "tokens": perf["prompt eval time"][1], **log}


def n_tasks(mc: Path) -> int:
    with open(mc, "rb") as fh:
        return struct.unpack("<I", fh.read(4))[0]


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def compare_model(label: str, model: Path, items, exe: Path, files: dict, args) -> dict:
    """One model: llama-perplexity's configurations, then its best and our exact engines
    interleaved for --rounds rounds, then which answers it picked (untimed)."""
    from scale import measure_run
    from throughput import engine_work, open_llama

    from abricot_local.backends.llama_cpp.backend import LlamaCppOptions

    vb = open_llama(model, vocab_only=True)
    try:
        counts = task_tokens(vb, items)
        ours_work = {e: engine_work(vb, items, LlamaCppOptions(engine=e, threads=args.threads)) for e in args.engines}
    finally:
        vb.close()
    ours_flags, theirs_flags = KERNELS[args.kernels]
    configs = []
    for cfg in [c for c in CONFIGS if not args.config or c[0] in args.config]:
        tokens, calls = plan(counts, cfg[1] * cfg[2], cfg[2], min(cfg[3], cfg[1] * cfg[2]))
        r = run_theirs(exe, model, files["gold"], cfg, args.threads, theirs_flags)
        configs.append({"config": cfg[0], "cfg": cfg, "plan_tokens": tokens, "calls": calls, **r})
        log(f"{label}: llama-perplexity {cfg[0]}: {r['score_s']:.1f} s scoring ({r['score_cpu_s']:.1f} CPU s), "
            f"{r['wall_s']:.1f} s wall")
    best = min(configs, key=lambda r: r["score_cpu_s"])  # CPU seconds: less disturbed by other jobs than wall
    select = ("--sample", str(args.sample))
    runs: dict[str, list[dict]] = {"theirs": [], **{e: [] for e in args.engines}}
    for k in range(args.rounds):  # interleaved: the machine's load falls on both sides alike
        for engine in args.engines:
            runs[engine].append(measure_run(model, args.threads, args.data_dir, *select, "--engine", engine, *ours_flags))
            runs["theirs"].append(run_theirs(exe, model, files["gold"], best["cfg"], args.threads, theirs_flags))
            log(f"{label}: round {k + 1}: {engine} {runs[engine][-1]['score_s']:.1f} s "
                f"({runs[engine][-1]['score_cpu_s']:.1f} CPU s), llama-perplexity {runs['theirs'][-1]['score_s']:.1f} s "
                f"({runs['theirs'][-1]['score_cpu_s']:.1f} CPU s)")
    their_ok = runs["theirs"][0]["correct"]
    ours = runs["prefix"][0]
    our_pick = [p for _, p, _ in ours["preds"]]
    our_ok = [p == g for _, p, g in ours["preds"]]
    # its pick: the gold answer where it was right; another than ours where only ours was right;
    # asked (bits copies, untimed) where both were wrong
    their_pick = [it.gold if ok else None for it, ok in zip(items, their_ok)]
    wrong = [k for k, (a, b) in enumerate(zip(our_ok, their_ok)) if not a and not b]
    if wrong:
        bits = files["gold"].with_name("bits.bin")
        write_mc(bits, bit_tasks([items[k] for k in wrong]))
        flags = run_theirs(exe, model, bits, best["cfg"], args.threads, theirs_flags)["correct"]
        for k, pick in zip(wrong, picked_from_bits(flags, [len(items[k].continuations) for k in wrong])):
            their_pick[k] = pick
    return {
        "model": label, "file": model.name, "items": len(items), "best": best["config"], "kernels": args.kernels,
        "configs": [{k: v for k, v in r.items() if k not in ("cfg", "correct", "perf")} for r in configs],
        "theirs": {"score_s": median(runs["theirs"], "score_s"), "wall_s": median(runs["theirs"], "wall_s"),
                   "tokens": runs["theirs"][0]["tokens"], "plan_tokens": best["plan_tokens"], "calls": best["calls"],
                   "decode_ms": median(runs["theirs"], "decode_ms"), "right": sum(their_ok),
                   "system_info": runs["theirs"][0]["system_info"]},
        **{e: {"score_s": median(runs[e], "score_s"), "wall_s": median(runs[e], "wall_s"),
               "tokens": ours_work[e].tokens, "calls": ours_work[e].decode_calls,
               "right": sum(p == g for _, p, g in runs[e][0]["preds"]), "system_info": runs[e][0]["system_info"],
               "same_as_prefix": [p for _, p, _ in runs[e][0]["preds"]] == our_pick} for e in args.engines},
        "engines": list(args.engines),
        "rounds": {k: [round(r["score_s"], 2) for r in v] for k, v in runs.items()},
        "rounds_cpu": {k: [round(r["score_cpu_s"], 2) for r in v] for k, v in runs.items()},
        "same_answer": sum(a == b for a, b in zip(our_pick, their_pick)),
        "same_correctness": sum(a == b for a, b in zip(our_ok, their_ok)),
        "both_right": sum(a and b for a, b in zip(our_ok, their_ok)),
        "multi_token_answers": ours["multi_token"] or any(len(set(t)) > 1 or t[0] != 1 for _, t in counts),
    }


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> None:
    import llama_src
    from scale import default_data_dir, machine, real_models

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gemma,smollm2", help="gemma, smollm2 (the test extra's models)")
    ap.add_argument("--sample", type=int, default=40, help="DISCOTEX items: `run --sample N`'s seeded draw")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved timed rounds (ours, theirs, ...)")
    ap.add_argument("--engines", type=lambda v: tuple(v.split(",")), default=ENGINES, help="ours, each round")
    ap.add_argument("--config", action="append", choices=[c[0] for c in CONFIGS],
                    help="only this llama-perplexity configuration (repeatable; default: all)")
    ap.add_argument("--data-dir", default=default_data_dir(), help="the DISCOTEX release (default: %(default)s)")
    ap.add_argument("--kernels", choices=tuple(KERNELS), default="plain",
                    help="plain: --extra-bufts off and llama-perplexity --no-repack (the same kernels, the default); "
                         "repacked: --extra-bufts on and its default; defaults: each side's own default")
    ap.add_argument("--label", default="", help="machine name for the table")
    ap.add_argument("--no-readme", action="store_true", help="do not update bench/README.md")
    ap.add_argument("--from-json", type=Path, nargs="+", help="only render the table of saved runs (bench/results/"
                    "...json; the rows of several joined)")
    args = ap.parse_args()
    if args.from_json:
        docs = [json.loads(p.read_text()) for p in args.from_json]
        commands = " ; ".join(dict.fromkeys(d.get("command", "") for d in docs))
        return publish({**docs[0], "command": commands, "rows": [r for d in docs for r in d["rows"]]}, args)

    exe = llama_src.build_tool("llama-perplexity", log=log)
    task = make_task("discotex", TaskOptions(data_dir=args.data_dir, allow_download=False))
    items = list(prepare([task], None, sample=args.sample)[0].items)
    known = dict(zip(("gemma", "smollm2"), real_models()))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files = {"gold": Path(tmp) / "gold.bin"}
        write_mc(files["gold"], gold_tasks(items))
        doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": args.label or machine(),
               "threads": args.threads, "sample": args.sample, "rounds": args.rounds,
               "command": "nice -n 10 python bench/perplexity_mc.py " + " ".join(sys.argv[1:]),
               "llama_cpp_python": llama_src.installed_version(), "cmake_flags": " ".join(llama_src.CPU_FLAGS),
               "rows": rows}
        out = HERE / "results" / f"{doc['created'].replace(':', '')}-perplexity-mc.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        for name in args.models.split(","):
            label, path = known[name]
            rows.append(compare_model(label, path, items, exe, files, args))
            out.write_text(json.dumps(doc, indent=1))  # after each model: a long run keeps what it measured
    print(f"saved {out.relative_to(ROOT)}", file=sys.stderr)
    publish(doc, args)


def publish(doc: dict, args) -> None:
    table = format_table(doc)
    print(table)
    if not args.no_readme:
        from throughput import update_readme

        update_readme(MARK, table, "## llama.cpp's own multiple-choice scorer (`perplexity_mc.py`)")


def timing(row: dict, key: str = "rounds") -> dict:
    """Per side: the best (least disturbed: other jobs only add time) and the median scoring
    seconds over the rounds (``key``: "rounds" wall, "rounds_cpu" CPU); per engine of ours, the
    paired ratios llama-perplexity / ours of each round (its run right after ours)."""
    rounds = row[key]
    out = {side: {"best": min(v), "median": statistics.median(v)} for side, v in rounds.items()}
    engines = row.get("engines", ENGINES)
    for k, engine in enumerate(engines):
        out[engine]["paired"] = [t / o for t, o in zip(rounds["theirs"][k :: len(engines)], rounds[engine])]
    return out


def format_table(doc: dict) -> str:
    rows = doc["rows"]
    head = (f"perplexity-mc: DISCOTEX, the same {doc['sample']} items (`--sample {doc['sample']}`), {doc['threads']} "
            f"threads on both sides; {doc['machine']}; {doc['created'][:10]}; llama-cpp-python "
            f"{doc['llama_cpp_python']} (abricot-local) and llama-perplexity built from its sdist ({doc['cmake_flags']}). "
            f"Builds: abricot-local `{rows[0]['prefix']['system_info'] if rows else ''}`; llama-perplexity "
            f"`{rows[0]['theirs']['system_info'].split('| ', 1)[-1] if rows else ''}`; the kernels each row ran, after "
            "its model: *plain* (abricot-local `--extra-bufts off`, llama-perplexity `--no-repack`), *repacked* (`--extra-bufts "
            f"on`, its default), *defaults* (each side's own: plain for abricot-local, repacked for llama-perplexity). {doc['rounds']} interleaved "
            "rounds (ours, llama-perplexity, ours, llama-perplexity): scoring s is the best round (other jobs only add "
            "time) and the median; CPU s: the process's CPU seconds while scoring (less sensitive to other jobs); "
            f"*paired* is llama-perplexity's time over ours in each round (its run right after ours). Command: `{doc.get('command') or 'nice -n 10 python bench/perplexity_mc.py'}`\n\n")
    lines = ["| model | scorer | tokens evaluated | decode calls | scoring s: best (median) | items/s | CPU s: best "
             "(median) | wall s (with load) | right | vs llama-perplexity: s, CPU s | paired (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        tm, cpu = timing(r), timing(r, "rounds_cpu")
        sides = [("theirs", f"llama-perplexity `{r['best']}` (its best)")] + [(e, f"abricot-local run, {e}") for e in r.get("engines", ENGINES)]
        for key, name in sides:
            s, t, c = r[key], tm[key], cpu[key]
            paired = ", ".join(f"{x:.2f}x" for x in t.get("paired", [])) or "-"
            lines.append(f"| {r['model']} ({r.get('kernels', 'defaults')}) | {name} | {s['tokens']} | {s['calls']} | {t['best']:.1f} ({t['median']:.1f}) "
                         f"| {r['items'] / t['best']:.2f} | {c['best']:.1f} ({c['median']:.1f}) | {s['wall_s']:.1f} "
                         f"| {s['right']}/{r['items']} | {tm['theirs']['best'] / t['best']:.2f}x, "
                         f"{cpu['theirs']['best'] / c['best']:.2f}x | {paired} |")
    lines += ["", "| model | same answer | same correctness | right in both | answers of one token |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} ({r.get('kernels', 'defaults')}) | {r['same_answer']}/{r['items']} | {r['same_correctness']}/{r['items']} "
                     f"| {r['both_right']} | {'no' if r['multi_token_answers'] else 'yes'} |")
    lines += ["", "llama-perplexity's configurations (one run each, before the rounds; the best: least CPU seconds; "
              "tokens: its own count, decode calls: its loop replayed):", "",
              "| model | config | tokens | decode calls | scoring s | CPU s | wall s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        for c in r["configs"]:
            lines.append(f"| {r['model']} ({r.get('kernels', 'defaults')}) | `{c['config']}` | {c['tokens']} | {c['calls']} | {c['score_s']:.1f} "
                         f"| {c['score_cpu_s']:.1f} | {c['wall_s']:.1f} |")
    return head + "\n".join(lines)


if __name__ == "__main__":
    main()
