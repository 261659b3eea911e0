"""How often a correlation's 90% interval for a task's own value (analysis/correlation_ci.py) holds it, and how often
the fixed-n published verdict built on it is wrong with the published value on the margin: by simulation.

ABRICOT's metric is a Pearson r over the task's N = 127 items; a run scores n of them, drawn without replacement (the
nested `--sample` order), and the verdict reads correlation_ci's interval (Fisher's z with the bootstrap's spread,
floored by normal theory, narrowed by the finite-population correction, guarded: no interval below 10 items off a
vector's most common value). Each population is a pair of 1-5 vectors over the 127 items whose r (the truth) is known;
each replication draws a new order and reads the first n, as `run --sample n` would.

- coverage: the share of the intervals read that hold the truth; a miss below: the interval wholly under it, above:
  wholly over it (shares of every replication: the guard's `cannot tell` is no miss). A 90% interval should miss at
  most 5% on each side;
- the verdict (reproduction.judge, with the interval the tool records beside it) with the published value on the
  margin, run - published = +M exactly: every settled verdict is wrong: `reproduced` needs a miss below (and an
  interval under 2 M wide), `differs` a miss above (run - published > M said) or one below by 2 M (< -M said); each
  side allowed 5% (a one-sided test's level at the 90% interval's bound), so together up to 10%.

Populations: gold ratings 1-5 (15/25/30/20/10%); a model's ratings from a discretised normal pair (r = 0.63, as
bench/sequential.py's); independent ratings (r about 0: the fake backend's); near-constant models answering 1 with 20
(bench/sequential.py's), 30 and 45 of the 127 answers 2, the 2s drawn more often on high gold.

    python bench/correlation_coverage.py [--reps 20000] [--seed 1] [--no-readme]
"""

from __future__ import annotations

import math
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from abricot_local import metrics  # noqa: E402
from abricot_local.analysis import reproduction  # noqa: E402
from abricot_local.analysis.correlation_ci import correlation_ci  # noqa: E402

LEVEL = 0.90
TOTAL = 127
MARGIN = 0.05
SIZES = (20, 40, 80)


def populations() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, model's ratings, gold ratings) over the 127 items; the first two as bench/sequential.py draws them."""
    rng = np.random.default_rng(20260501)
    gold = (rng.choice(5, TOTAL, p=[0.15, 0.25, 0.30, 0.20, 0.10]) + 1).astype(float)
    latent = (gold - gold.mean()) / gold.std() * 0.55 + rng.standard_normal(TOTAL) * math.sqrt(1 - 0.55 ** 2)
    pred = (np.digitize(latent, np.quantile(latent, [0.1, 0.35, 0.7, 0.9])) + 1).astype(float)
    out = [("1-5 ratings, a discretised normal pair", pred, gold)]
    tilt = np.exp(gold / 2.0) / np.exp(gold / 2.0).sum()
    rare = np.ones(TOTAL)
    rare[rng.choice(TOTAL, 20, replace=False, p=tilt)] = 2.0
    out.append(("near-constant: 20 of 127 answers off the commonest", rare, gold))
    for k in (30, 45):
        x = np.ones(TOTAL)
        x[rng.choice(TOTAL, k, replace=False, p=tilt)] = 2.0
        out.append((f"near-constant: {k} of 127 answers off the commonest", x, gold))
    out.append(("independent 1-5 ratings", (rng.choice(5, TOTAL) + 1).astype(float), gold))
    return out


def cell(x: np.ndarray, y: np.ndarray, n: int, reps: int, seed: int) -> dict:
    """One population at n items: the interval's reads and misses, and the verdict's wrong claims on the margin."""
    truth = metrics.pearson(x, y)
    rng = np.random.default_rng(seed)
    read = below = above = reproduced = over = under = 0
    for r in range(reps):
        order = rng.permutation(TOTAL)[:n]
        a, b = x[order], y[order]
        value, ci, why = correlation_ci("pearson", [a, b], n, TOTAL, LEVEL, seed + r)
        if ci is not None:
            read += 1
            below += ci[1] < truth
            above += ci[0] > truth
        like = metrics.interval("pearson", a, b, seed=seed + r, level=LEVEL)
        v = reproduction.judge(value, tuple(like), truth - MARGIN, MARGIN, n=n, total=TOTAL, within=ci,
                               correlation=True, why=why)
        reproduced += v.kind == reproduction.REPRODUCED
        over += v.kind == reproduction.DIFFERS and v.ci90[0] > 0  # run - published > M said: a miss above
        under += v.kind == reproduction.DIFFERS and v.ci90[1] < 0  # < -M said: a miss below by more than 2 M
    return dict(truth=truth, n=n, reps=reps, read=read / reps, coverage=(read - below - above) / read if read else None,
                below=below / reps, above=above / reps, reproduced=reproduced / reps, over=over / reps, under=under / reps)


def table(rows: list[tuple[str, dict]]) -> str:
    def pct(p: float | None, reps: int) -> str:
        return "-" if p is None else f"{100 * p:.1f}% ± {100 * math.sqrt(p * (1 - p) / reps):.1f}"

    lines = ["| population | r over the 127 | n | interval read | coverage (of those read) | misses below | "
             "misses above | verdict on the margin: wrong `reproduced` | wrong `differs` (above) | wrong `differs` "
             "(below) | wrong, together |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, c in rows:
        k, read = c["reps"], round(c["read"] * c["reps"])
        cov = "-" if c["coverage"] is None else pct(c["coverage"], read)
        lines.append(f"| {name} | {c['truth']:+.3f} | {c['n']} | {100 * c['read']:.0f}% | {cov} | {pct(c['below'], k)} "
                     f"| {pct(c['above'], k)} | {pct(c['reproduced'], k)} | {pct(c['over'], k)} | {pct(c['under'], k)} | "
                     f"{pct(c['reproduced'] + c['over'] + c['under'], k)} |")
    return "\n".join(lines)


def main() -> None:
    from throughput import simulation_args

    args = simulation_args(__doc__)
    started, rows, load = time.time(), [], os.getloadavg()
    for k, (name, x, y) in enumerate(populations()):
        for j, n in enumerate(SIZES):
            t = time.time()
            rows.append((name, cell(x, y, n, args.reps, args.seed + 100_000 * (len(SIZES) * k + j))))
            print(f"{name}, n = {n}: {time.time() - t:.1f} s", file=sys.stderr)
    head = (f"Measured {datetime.now(timezone.utc):%Y-%m-%d} by `python bench/correlation_coverage.py --reps "
            f"{args.reps} --seed {args.seed}` on {platform.machine()}, {os.cpu_count()} cores (load {load[0]:.1f} at "
            f"the start, {os.getloadavg()[0]:.1f} at the end), {time.time() - started:.0f} s; {args.reps:,} draws per "
            "cell (± one Monte Carlo standard error); N = 127, margin 0.05, nominal 90%: at most 5% missed on each "
            "side")
    text = head + "\n\n" + table(rows)
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "reps": args.reps, "seed": args.seed,
           "cells": [{"population": name, **c} for name, c in rows]}
    from throughput import publish

    publish(doc, "correlation_coverage", text, None if args.no_readme else "correlation_coverage",
            "## A correlation's interval for a task's own value (`correlation_coverage.py`)")


if __name__ == "__main__":
    main()
