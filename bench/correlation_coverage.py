"""How often a correlation's 90% interval for a task's own value (analysis/correlation_ci.py) holds it, and how often
the fixed-n published verdict built on it is wrong with the published value on the margin: by simulation.

ABRICOT's metric is a Pearson r over the task's N = 127 items; a run scores n of them, drawn without replacement (the
nested `--sample` order), and the verdict reads correlation_ci's interval (published.method 5: Fisher's z with the
jackknife's spread, floored by normal theory, narrowed by the finite-population correction, its centre corrected for
the jackknife's bias and z's skewness drawn without replacement, Student's t; guarded: no interval below 10 items off
a vector's most common value, nor where r is +-1 with an item left out). Each population is a pair of 1-5 vectors over
the 127 items whose r (the truth) is known; each replication draws a new order and reads the first n, as
`run --sample n` would.

- coverage: the share of the intervals read that hold the truth; a miss below: the interval wholly under it, above:
  wholly over it (shares of every replication: the guard's `cannot tell` is no miss). A 90% interval should miss at
  most 5% on each side;
- the verdict (reproduction.judge, with the interval the tool records beside it) with the published value on the
  margin, run - published = +M exactly: every settled verdict is wrong: `reproduced` needs a miss below (and an
  interval under 2 M wide), `differs` a miss above (run - published > M said) or one below by 2 M (< -M said); each
  side allowed 5% (a one-sided test's level at the 90% interval's bound), so together up to 10%.

Populations: gold ratings 1-5 (15/25/30/20/10%); a model's ratings from a discretised normal pair (r = 0.63, as
bench/sequential.py's); independent ratings (r about 0: the fake backend's); near-constant models answering 1 with 20
(bench/sequential.py's), 30 and 45 of the 127 answers 2, the 2s drawn more often on high gold; and high r: gold rated
as ABRICOT's 127 rows are (7/27/9/41/43 of 1-5), the model's rating the gold's but on 10, 20, 30, 40 or 55 of them,
one off (r 0.97 to 0.85).

Candidate methods side by side (`--method`, default `shipped`, the library's; `all`: every one on the same draws, the
first table the shipped one's, then each method's misses; or a comma list): `2`, published.method 2's (Fisher's z +- z x the bootstrap's
spread floored by 1/sqrt(n-3), narrowed); `bias`, its centre less Fisher's bias r/(2(n-1)); `fpb`, a finite-population
bootstrap (each resample n drawn without replacement from the n items completed to N: each repeated floor(N/n) times,
the rest drawn anew per resample), its basic interval on z; `3`, method 2's spread with the centre less the bias
r/(2(n-1)) x (N-n)/(N-1) and less a Cornish-Fisher shift for z's skewness drawn without replacement (the items'
empirical influence skew scaled by (N-2n)/(N-2), plus the bootstrap's z skew scaled by sqrt((N-n)/(N-1)), the linear
part removed), Student's t quantile on n-1 degrees of freedom: published.method 3's (reproduction.METHOD 3-4), the one
the jackknife replaced (near r = 1 a few resamples with r = 1 made its moments).

`--like`: instead, items like these (reproduction.judge's second line): n items drawn with replacement from a
population of 200,000 (the truth its r; the same gold shares and errors), the 90% interval like_interval gives
(correlation_ci.jackknife_ci, no correction) against the percentile bootstrap the verdict read before
(metrics.interval at 90%, the run's recorded CI's construction).

    python bench/correlation_coverage.py [--reps 20000] [--seed 1] [--no-readme] [--like]
        [--method shipped|2|bias|fpb|3|all|A,B]
"""

from __future__ import annotations

import argparse
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
from abricot_local.analysis import reproduction, stats  # noqa: E402
from abricot_local.analysis.correlation_ci import correlation_ci, like_interval  # noqa: E402

LEVEL = 0.90
TOTAL = 127
MARGIN = 0.05
SIZES = (20, 30, 40, 80, 120, 126)
ABRICOT_LIKE = (7, 27, 9, 41, 43)  # gold ratings 1-5 of 127, as ABRICOT's rows are
OFF = (10, 20, 30, 40, 55)  # of 127 answers one off the gold's


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
    for k, (model, high) in zip(OFF, high_r(TOTAL, np.random.default_rng(20261205))):
        out.append((f"high r: {k} of 127 answers one off the gold's", model, high))
    return out


def high_r(size: int, rng) -> list[tuple[np.ndarray, np.ndarray]]:
    """(model, gold) over ``size`` items for each of OFF: gold 1-5 in ABRICOT's shares, the model's the gold's but
    on k of every 127 items, one off (up or down at random; 2 at gold 1, 4 at 5): r 0.97 to 0.85 over the 127."""
    shares = np.array(ABRICOT_LIKE, dtype=float) / sum(ABRICOT_LIKE)
    out = []
    for k in OFF:
        gold = (rng.choice(5, size, p=shares) + 1).astype(float)
        model, idx = gold.copy(), rng.choice(size, round(k * size / TOTAL), replace=False)
        step = rng.choice([-1.0, 1.0], len(idx))
        model[idx] = np.where(gold[idx] == 1, 2.0, np.where(gold[idx] == 5, 4.0, gold[idx] + step))
        out.append((model, gold))
    return out


def _z(r: float) -> float:
    return math.atanh(max(-1 + 1e-12, min(1 - 1e-12, r)))


def _spread(a: np.ndarray, b: np.ndarray, n: int, seed: int) -> tuple[float, float]:
    """Method 2's bootstrap (its draws): the standard deviation of z over the resamples, floored by 1/sqrt(n-3), and
    z's skewness over them."""
    idx = np.random.default_rng(seed).integers(0, n, size=(metrics.N_BOOT, n))
    r = metrics.ROW_STATS["pearson"](a[idx], b[idx])
    z = np.arctanh(np.clip(r[~np.isnan(r)], -1 + 1e-12, 1 - 1e-12))
    d = z - math.fsum(z) / len(z)
    m2 = math.fsum(d * d) / len(z)
    skew = math.fsum(d ** 3) / len(z) / m2 ** 1.5 if m2 > 0 else 0.0
    return max(math.sqrt(m2 * len(z) / (len(z) - 1)), 1 / math.sqrt(n - 3)), skew


def _normal(a, b, n, lvl, seed, *, bias=0.0, skew_t=False):
    """Fisher's z +- a quantile x method 2's spread, narrowed, its centre less ``bias`` x r/(2(n-1)) (skew_t: the
    candidate `3`, published.method 3's)."""
    r, f = metrics.pearson(a, b), stats.fpc(n, TOTAL)
    se, zskew = _spread(a, b, n, seed)
    s, centre = se * math.sqrt(f), _z(r) - bias * r / (2 * (n - 1))
    q = metrics.z_of(lvl)
    if skew_t:
        from scipy.special import stdtrit

        q = float(stdtrit(n - 1, 1 - (1 - lvl) / 2))
        xs, ys = (a - a.mean()) / a.std(), (b - b.mean()) / b.std()
        psi = xs * ys - r * (xs * xs + ys * ys) / 2  # each item's empirical influence on r
        m2 = math.fsum(psi * psi) / n
        lin = math.fsum(psi ** 3) / n / m2 ** 1.5 / math.sqrt(n) if m2 > 0 else 0.0
        g3 = (TOTAL - 2 * n) / (TOTAL - 2) / math.sqrt(f)  # the linear part's skewness, drawn without replacement
        gamma = lin * (g3 - math.sqrt(f)) + zskew * math.sqrt(f)
        centre = _z(r) - r / (2 * (n - 1)) * f - s * gamma * (q * q - 1) / 6
    return math.tanh(centre - q * s), math.tanh(centre + q * s)


def _fpb(a, b, n, lvl, seed):
    """The finite-population bootstrap's basic interval on z."""
    rng, (k, rest) = np.random.default_rng(seed), divmod(TOTAL, n)
    extra = np.argsort(rng.random((metrics.N_BOOT, n)), axis=1)[:, :rest]
    pop = np.concatenate([np.broadcast_to(np.tile(np.arange(n), k), (metrics.N_BOOT, k * n)), extra], axis=1)
    idx = np.take_along_axis(pop, np.argsort(rng.random((metrics.N_BOOT, TOTAL)), axis=1)[:, :n], axis=1)
    r = np.sort(metrics.ROW_STATS["pearson"](a[idx], b[idx]))
    r = r[~np.isnan(r)]
    lo, hi = (_z(float(r[min(len(r) - 1, int(p * len(r)))])) for p in ((1 - lvl) / 2, (1 + lvl) / 2))
    z = 2 * _z(metrics.pearson(a, b))
    return math.tanh(z - hi), math.tanh(z - lo)


CANDIDATES = {"2": lambda a, b, n, lvl, seed: _normal(a, b, n, lvl, seed),
              "bias": lambda a, b, n, lvl, seed: _normal(a, b, n, lvl, seed, bias=1.0),
              "fpb": _fpb,
              "3": lambda a, b, n, lvl, seed: _normal(a, b, n, lvl, seed, skew_t=True)}


def cell(x: np.ndarray, y: np.ndarray, n: int, reps: int, seed: int, methods: tuple[str, ...] = ("shipped",)) -> dict:
    """One population at n items, for each method: the interval's reads and misses (and its mean width), and the
    verdict's wrong claims on the margin."""
    truth = metrics.pearson(x, y)
    rng = np.random.default_rng(seed)
    t = {m: dict(read=0, below=0, above=0, width=0.0, reproduced=0, over=0, under=0) for m in methods}
    for r in range(reps):
        order = rng.permutation(TOTAL)[:n]
        a, b = x[order], y[order]
        value, shipped, why = correlation_ci("pearson", [a, b], n, TOTAL, LEVEL, seed + r)
        like = like_interval("pearson", a, b, seed=seed + r, level=LEVEL)
        for m in methods:
            ci = shipped if m == "shipped" or shipped is None else CANDIDATES[m](a, b, n, LEVEL, seed + r)
            c = t[m]
            if ci is not None:
                c["read"] += 1
                c["below"] += ci[1] < truth
                c["above"] += ci[0] > truth
                c["width"] += ci[1] - ci[0]
            v = reproduction.judge(value, tuple(like), truth - MARGIN, MARGIN, n=n, total=TOTAL, within=ci,
                                   correlation=True, why=why)
            c["reproduced"] += v.kind == reproduction.REPRODUCED
            c["over"] += v.kind == reproduction.DIFFERS and v.ci90[0] > 0  # run - published > M said: a miss above
            c["under"] += v.kind == reproduction.DIFFERS and v.ci90[1] < 0  # < -M said: a miss below by over 2 M
    out = {}
    for m, c in t.items():
        read = c["read"]
        out[m] = dict(truth=truth, n=n, reps=reps, read=read / reps, width=c["width"] / read if read else None,
                      coverage=(read - c["below"] - c["above"]) / read if read else None,
                      **{k: c[k] / reps for k in ("below", "above", "reproduced", "over", "under")})
    return out


def compare(rows: list[tuple[str, dict]], methods: tuple[str, ...]) -> str:
    """Each method's misses below / above (± one Monte Carlo standard error) and its mean width, cell by cell."""
    lines = ["| population | n | " + " | ".join(f"`{m}`: below / above (width)" for m in methods) + " |",
             "|---|---|" + "---|" * len(methods)]
    for name, cs in rows:
        def one(c: dict) -> str:
            se = 100 * math.sqrt(0.05 * 0.95 / c["reps"])
            w = "-" if c["width"] is None else f"{c['width']:.3f}"
            flag = "**" if max(c["below"], c["above"]) * 100 > 5 + 2 * se else ""
            return f"{flag}{100 * c['below']:.1f} / {100 * c['above']:.1f}{flag} ({w})"
        lines.append(f"| {name} | {cs[methods[0]]['n']} | " + " | ".join(one(cs[m]) for m in methods) + " |")
    return "\n".join(lines)


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


def like_cells(reps: int, seed: int) -> list[dict]:
    """Items like these: each high-r population's errors and the discretised normal pair grown to 200,000 items, n
    drawn with replacement; the 90% interval of like_interval and of the percentile bootstrap (metrics.interval)."""
    rng = np.random.default_rng(seed)
    big = 200_000
    pops = [(f"high r: {k} of 127 one off", m, g) for k, (m, g) in zip(OFF, high_r(big, rng))]
    g = (rng.choice(5, big, p=[0.15, 0.25, 0.30, 0.20, 0.10]) + 1).astype(float)
    latent = (g - g.mean()) / g.std() * 0.55 + rng.standard_normal(big) * math.sqrt(1 - 0.55 ** 2)
    pops.append(("a discretised normal pair", (np.digitize(latent, np.quantile(latent, [0.1, 0.35, 0.7, 0.9]))
                                               + 1).astype(float), g))
    out = []
    for name, x, y in pops:
        truth = metrics.pearson(x, y)
        for n in (20, 40, 80):
            t = {m: dict(read=0, below=0, above=0) for m in ("shipped", "percentile")}
            for r in range(reps):
                o = rng.integers(0, big, n)
                a, b = x[o], y[o]
                if not metrics.interval_read("pearson", a, b):
                    continue
                for m, ci in (("shipped", like_interval("pearson", a, b, seed=seed + r, level=LEVEL)),
                              ("percentile", metrics.interval("pearson", a, b, seed=seed + r, level=LEVEL))):
                    if not all(map(math.isfinite, ci)):
                        continue
                    c = t[m]
                    c["read"] += 1
                    c["below"] += ci[1] < truth
                    c["above"] += ci[0] > truth
            for m, c in t.items():
                out.append(dict(population=name, truth=truth, n=n, method=m, reps=reps, **c))
            print(f"{name}, n = {n}", file=sys.stderr)
    return out


def like_table(cells: list[dict]) -> str:
    lines = ["| population | r | n | `like_interval` (jackknife): coverage, misses below / above | percentile "
             "bootstrap (before) |", "|---|---|---|---|---|"]
    for k in range(0, len(cells), 2):
        row = []
        for c in cells[k:k + 2]:
            m, read = c, max(c["read"], 1)
            row.append(f"{100 * (read - m['below'] - m['above']) / read:.1f}%: {100 * m['below'] / read:.1f} / "
                       f"{100 * m['above'] / read:.1f} ({m['read']} read)")
        c = cells[k]
        lines.append(f"| {c['population']} | {c['truth']:+.3f} | {c['n']} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=20000, help="replications per cell")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-readme", action="store_true", help="print only; leave bench/README.md as it is")
    ap.add_argument("--like", action="store_true", help="items like these: like_interval against the percentile")
    ap.add_argument("--method", default="shipped", help="shipped, 2, bias, fpb, 3, all, or a comma list")
    args = ap.parse_args()
    methods = ("shipped", *CANDIDATES) if args.method == "all" else tuple(args.method.split(","))
    if any(m not in ("shipped", *CANDIDATES) for m in methods):
        ap.error(f"--method: one of shipped, {', '.join(CANDIDATES)}, all, or a comma list of them")
    started, every, load = time.time(), [], os.getloadavg()
    if args.like:
        cells = like_cells(args.reps, args.seed)
        text = (f"Measured {datetime.now(timezone.utc):%Y-%m-%d} by `python bench/correlation_coverage.py --like "
                f"--reps {args.reps} --seed {args.seed}` on {platform.machine()}, {os.cpu_count()} cores, "
                f"{time.time() - started:.0f} s; {args.reps:,} draws per cell (one Monte Carlo standard error about "
                "0.7 points on a 5% miss at 1,000); nominal 90%: at most 5% missed on each side\n\n"
                + like_table(cells))
        doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "reps": args.reps,
               "seed": args.seed, "like": True, "cells": cells}
        from throughput import publish

        publish(doc, "correlation_like_coverage", text, None if args.no_readme else "correlation_like_coverage",
                "## A correlation's interval for a task's own value (`correlation_coverage.py`)")
        return
    for k, (name, x, y) in enumerate(populations()):
        for j, n in enumerate(SIZES):
            t = time.time()
            every.append((name, cell(x, y, n, args.reps, args.seed + 100_000 * (len(SIZES) * k + j), methods)))
            print(f"{name}, n = {n}: {time.time() - t:.1f} s", file=sys.stderr)
    rows = [(name, cs[methods[0]]) for name, cs in every]
    how = "" if args.method == "shipped" else f" --method {args.method}"
    head = (f"Measured {datetime.now(timezone.utc):%Y-%m-%d} by `python bench/correlation_coverage.py --reps "
            f"{args.reps} --seed {args.seed}{how}` on {platform.machine()}, {os.cpu_count()} cores (load {load[0]:.1f} at "
            f"the start, {os.getloadavg()[0]:.1f} at the end), {time.time() - started:.0f} s; {args.reps:,} draws per "
            "cell (± one Monte Carlo standard error); N = 127, margin 0.05, nominal 90%: at most 5% missed on each "
            f"side; the first table method `{methods[0]}`'s")
    text = head + "\n\n" + table(rows)
    if len(methods) > 1:
        text += ("\n\nEach method's misses below / above the truth, in % (bold: over 5% + 2 Monte Carlo standard "
                 "errors), and its mean width where read:\n\n" + compare(every, methods))
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "reps": args.reps, "seed": args.seed,
           "method": args.method,
           "cells": [{"population": name, "method": m, **c} for name, cs in every for m, c in cs.items()]}
    from throughput import publish

    publish(doc, "correlation_coverage", text, None if args.no_readme else "correlation_coverage",
            "## A correlation's interval for a task's own value (`correlation_coverage.py`)")


if __name__ == "__main__":
    main()
