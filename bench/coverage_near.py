"""The paired verdict's interval near N on DISCOTEX's 1,600 items: how often it holds the set's own difference.

A quant against its F16 changes a few percent of the answers, and a run that scores most of the task reads the
paired interval with n near N: there the set's difference rests on the few changed answers among the N - n items not
seen, and Tango's interval narrowed by the finite-population factor (the verdict's with more than 40 changed answers
until this table) held it as little as 84% of the time at 90%. Each cell is a population of N items, B right for the
first run only and C for the second only; its coverage is summed over every outcome (b, c) of n items more probable
than NEAR_CUT in some cell of that n (multivariate hypergeometric; the largest mass left out printed), no simulation:
paired_exact.paired_set_ci itself (the verdict's) beside Tango + FPC as it was.

    python bench/coverage_near.py [--no-readme]      # about 7 min on the 2 busy cores below (2 processes)
"""

from __future__ import annotations

import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from coverage import LEVEL, exact_table, verdict_scored  # noqa: E402

from abricot_local.analysis.paired_exact import MAX_CHANGED, MAX_CHANGED_NEAR, MAX_UNSEEN, _log_comb  # noqa: E402

TOTAL = 1600
NEAR = ((23, 22), (45, 45), (60, 30), (100, 100), (300, 300))  # (B, C): 45 to 600 changed answers
SIZES = (1400, 1500, 1200, 1550, 800, 1590)  # the slowest first (two processes)
NEAR_CUT = 1e-7


def cells_at(n: int) -> list[dict]:
    """NEAR's cells at ``n`` of TOTAL: the verdict's interval and Tango + FPC, coverage and expected width."""
    started = time.time()
    bs, cs = np.meshgrid(np.arange(n + 1.0), np.arange(n + 1.0), indexing="ij")
    ob, oc = bs[bs + cs <= n], cs[bs + cs <= n]
    cells = []
    for b_pop, c_pop in NEAR:
        p = np.exp(_log_comb([b_pop], ob)[0] + _log_comb([c_pop], oc)[0]
                   + _log_comb([TOTAL - b_pop - c_pop], n - ob - oc)[0] - _log_comb([TOTAL], [n])[0, 0])
        cells.append(({"N": TOTAL, "n": n, "psi": round((b_pop + c_pop) / TOTAL, 4), "D": (b_pop - c_pop) / TOTAL,
                       "B": b_pop, "C": c_pop}, p))
    out, kept = verdict_scored(cells, ob, oc, n, TOTAL, NEAR_CUT)
    print(f"{n} of {TOTAL:,}: {kept} outcomes, {time.time() - started:.0f} s", file=sys.stderr, flush=True)
    return out


def main() -> None:
    started, load = time.time(), os.getloadavg()
    with ProcessPoolExecutor(max_workers=2) as pool:
        found = [c for cells in pool.map(cells_at, SIZES) for c in cells]
    found.sort(key=lambda c: (c["B"] + c["C"], -c["D"], c["n"]))
    head = (f"Measured {datetime.now(timezone.utc):%Y-%m-%d} by `python bench/coverage_near.py` on "
            f"{platform.machine()}, {os.cpu_count()} cores (load {load[0]:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end), {time.time() - started:.0f} s; on a set of {TOTAL:,}: the "
            f"verdict's interval (the restricted exact one while at most {MAX_CHANGED} answers changed, or at most "
            f"{MAX_CHANGED_NEAR} with (b + c)(N - n) / n at most {MAX_UNSEEN}; else Tango + FPC on the set's grid) "
            "beside Tango + FPC as it was, summed over every outcome more probable than "
            f"{NEAR_CUT:g} in some cell of its n (the mass left out: at most {max(c['left'] for c in found):.0e} a "
            "cell), no simulation")
    text = head + "\n\n" + exact_table(found, "the verdict's")
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "level": LEVEL, "cut": NEAR_CUT,
           "cells": found}
    from throughput import publish

    publish(doc, "coverage_near", text, None if "--no-readme" in sys.argv else "coverage_near",
            "## Coverage of the verdicts' intervals for a task's own value (`coverage.py`)")


if __name__ == "__main__":
    main()
