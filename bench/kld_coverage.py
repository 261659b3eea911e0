"""How often the KLD's 95% CI over the items (analysis/kld.item_interval) holds the true mean, by simulation; and
llama-perplexity's per-token interval (1.96 x se_token) beside it.

Each draw: m items of 130-389 tokens (uniform), each item its own KL level (0.01 x lognormal(0, sigma)), its tokens
exponential around it; the truth is the mean level (0.01 exp(sigma^2 / 2)). Per cell: `shipped`, the library's
interval (ratio of sums, delta method, the se never below the per-token one, t on m - 1 degrees of freedom, log
scale); `unfloored`, the same without the floor (the interval before 2026-12-06); `narrow`, the share of draws whose
unfloored interval is narrower than the per-token one, and how often those held the truth; `per-token`, 1.96
per-token standard errors either side. A miss below: the interval wholly under the truth.

    python bench/kld_coverage.py [--reps 2000] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from abricot_local.analysis.kld import Z95, item_interval  # noqa: E402


def cell(rng, m: int, sigma: float, reps: int) -> dict:
    truth = 0.01 * math.exp(sigma ** 2 / 2)
    got = {"shipped": 0, "below": 0, "unfloored": 0, "narrow": 0, "narrow_held": 0, "per_token": 0}
    for _ in range(reps):
        sizes = rng.integers(130, 390, size=m)
        levels = np.exp(rng.normal(0.0, sigma, size=m)) * 0.01
        x = rng.exponential(size=int(sizes.sum())) * np.repeat(levels, sizes)
        ends = np.cumsum(sizes)
        sums = [math.fsum(x[a:b].tolist()) for a, b in zip(ends - sizes, ends)]
        counts = sizes.tolist()
        se = float(x.std(ddof=1)) / math.sqrt(x.size)
        lo, hi = item_interval(sums, counts, se_token=se)
        got["shipped"] += lo <= truth <= hi
        got["below"] += hi < truth
        ulo, uhi = item_interval(sums, counts)
        held = ulo <= truth <= uhi
        got["unfloored"] += held
        if uhi - ulo < 2 * Z95 * se:
            got["narrow"] += 1
            got["narrow_held"] += held
        got["per_token"] += abs(float(x.mean()) - truth) <= Z95 * se
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    t0 = time.time()
    print(f"{a.reps:,} draws a cell, seed {a.seed}; nominal 95%\n")
    print("| sigma | items | shipped | misses below | unfloored | narrower than per-token (held) | per-token |")
    print("|---|---|---|---|---|---|---|")
    for sigma in (0.1, 0.25, 0.5, 1.0):
        for m in (2, 3, 4, 5, 8, 10, 20, 40):
            g = cell(rng, m, sigma, a.reps)
            n = a.reps
            held = f"{g['narrow_held'] / g['narrow']:.0%}" if g["narrow"] else "-"
            print(f"| {sigma} | {m} | {g['shipped'] / n:.1%} | {g['below'] / n:.1%} | {g['unfloored'] / n:.1%} | "
                  f"{g['narrow'] / n:.1%} ({held}) | {g['per_token'] / n:.1%} |", flush=True)
    print(f"\n{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
