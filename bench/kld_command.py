"""The user's command beside kld_vs_perplexity.py's lockstep sessions: `abricot-local kld REF RUN...` as the
command runs it (run/kld.py's ``kld_runs`` over finished run folders: the runs read, the models found again and
hashed, REF's items rebuilt, the reference and the pass's rungs loaded, the task's schedule with a row at every
decoded token, kld.json written), for the first rung alone, the first two and all of them, each timed whole
(wall and this process's CPU seconds), with its reference pass's own seconds and what `kld --dry-run`
predicted for it (run/kld_cost.py; "?" without a calibration of the models on this machine).

The runs are made first (not timed): ``abricot-local run MODEL --tasks discotex --limit ITEMS`` for the
reference and each rung, with the bench's threads, in a temporary folder; each kld writes into fresh copies.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Command:
    rungs: int
    seconds: float = float("inf")  # the whole command, fastest round
    cpu: float = float("inf")
    pass_seconds: float = float("inf")  # its reference pass (KldResult.seconds): loaded to last row
    predicted: float | None = None  # kld --dry-run's total
    calls: int = 0  # decode calls per model
    tokens: int = 0  # tokens (and rows) per model
    tasks: list = field(default_factory=list)  # per rung, its kld.json tasks (the first round's)


def make_runs(a, root: Path) -> list[Path]:
    """A finished run of the reference and of each rung on the first ``a.command_items`` DISCOTEX items."""
    out = []
    for k, model in enumerate([a.ref, *a.rung]):
        folder = root / f"{k}-{Path(model).stem}"
        cmd = [sys.executable, "-m", "abricot_local", "run", model, "--tasks", "discotex", "--data-dir", a.data_dir,
               "--limit", str(a.command_items), "--threads", str(a.threads), "--out", str(folder)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({res.returncode}):\n{(res.stdout + res.stderr)[-3000:]}")
        out.append(folder)
    return out


def run_command(a, runs: list[Path], n: int, scratch: Path, into: Command | None = None) -> Command:
    """`kld REF R1..Rn` on fresh copies of the runs, timed whole; the fastest round kept in ``into``."""
    from abricot_local.run.kld import kld_runs
    from abricot_local.run.kld_cost import kld_cost

    got = into or Command(n)
    work = scratch / f"kld-{n}"
    shutil.rmtree(work, ignore_errors=True)
    copies = [Path(shutil.copytree(r, work / r.name)) for r in runs[: n + 1]]
    values = {"threads": a.threads}
    if got.predicted is None:
        got.predicted = kld_cost(copies[0], copies[1:], backend_values=values).seconds
    c0, t0 = time.process_time(), time.perf_counter()
    results = kld_runs(copies[0], copies[1:], backend_values=values)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if wall < got.seconds:
        got.seconds, got.pass_seconds = wall, results[0].seconds
    got.cpu = min(got.cpu, cpu)
    got.calls = results[0].decode_calls
    got.tokens = sum(s.n_tokens for s in results[0].tasks.values())
    tasks = [{t: s.to_dict() for t, s in r.tasks.items()} for r in results]
    if not got.tasks:
        got.tasks = tasks
    elif got.tasks != tasks:
        print(f"NOTE: kld with {n} rung(s): another round gave other statistics")
    shutil.rmtree(work, ignore_errors=True)
    return got


def table(a, lp: dict, commands: dict, name) -> None:
    """The command's rows: its time whole and its pass's, the prediction, against llama-perplexity's passes
    (on its own text: per model-token decoded, the command's tokens being the task's schedule)."""
    lp_tokens = a.chunks * a.ctx  # tokens each llama-perplexity pass decodes
    print(f"\n`abricot-local kld` itself (the first {a.command_items} DISCOTEX items, a row at every token of their "
          "schedule), fastest round:\n")
    print("| rungs | tokens a model | decode calls a model | command (s) | its pass (s) | predicted by --dry-run (s) "
          "| CPU s | ms a model-token | llama-perplexity: ms a model-token |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, c in sorted(commands.items()):
        rungs = a.rung[:n]
        theirs = lp["base"][0] + sum(lp[r][0] for r in rungs)
        pred = "?" if c.predicted is None else f"{c.predicted:.1f}"
        print(f"| {', '.join(name(r) for r in rungs)} | {c.tokens:,} | {c.calls} | {c.seconds:.1f} | "
              f"{c.pass_seconds:.1f} | {pred} | {c.cpu:.1f} | {1e3 * c.seconds / (c.tokens * (n + 1)):.1f} | "
              f"{1e3 * theirs / (lp_tokens * (n + 1)):.1f} |")
    if 1 in commands and 2 in commands:
        print(f"\n`kld REF R1 R2` against `kld REF R1`: {commands[2].seconds / commands[1].seconds:.2f}x "
              f"(their passes: {commands[2].pass_seconds / commands[1].pass_seconds:.2f}x)")
    top = max(commands)
    alike = all(commands[n].tasks[k] == commands[top].tasks[k] for n in commands for k in range(n))
    print(f"each rung's kld.json statistics the same alone and in every ladder: {'yes' if alike else 'NO'}")
