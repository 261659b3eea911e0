"""How often the verdict's 90% interval for a task's own value holds that value: coverage, by simulation.

A published row is a number on a finite set of N items; a run scores n of them, drawn without replacement (the
nested `--sample` order), and the reproduction verdict reads a 90% interval for the set's own value. Each cell is a
population whose truth is known; each replication draws n of its N items and asks whether the interval holds the
truth. An interval that says 90% should hold it at least 90% of the time, and miss it at most 5% on each side
(a miss below: the interval lies wholly under the truth; above: wholly over it).

- One run's accuracy (the reproduction verdict): N items of which K = round(acc N) are right; a draw of n has k
  right (hypergeometric: numpy draws the count of right items among n drawn without replacement). Against K / N:
  Wilson's score interval with its variance scaled by the finite-population factor (N - n) / (N - 1) (metrics.wilson
  with stats.fpc: the verdict's interval before this bench) and the exact hypergeometric interval
  (stats.exact_set_ci). Beside the simulated coverage, its exact value (the hypergeometric probabilities summed over
  the k whose interval holds K / N).
- Two runs' paired accuracy (compare's and the ladder's equivalence verdict): N items of which B are right for the
  first run only and C for the second only (psi = (B + C) / N changed answers, D = (B - C) / N the set's
  difference); a draw of n has b and c of them (multivariate hypergeometric). Against D: Tango's score interval with
  the same factor (stats.paired_score_ci: the verdict's), and without it (items like these: whether the shortfall is
  Tango's own or the correction's).
- The paired verdict's interval on a small set (N = 127: ABRICOT's; analysis/paired_exact.py), computed, not
  simulated: the exact unconditional interval (every D whose two tails exceed 5%, the outcomes (b, c) ordered by
  Tango's statistic at D, their multivariate hypergeometric probabilities maximised over the changed answers B + C),
  every outcome's at once (:func:`exact_unconditional`: paired_exact's one outcome at a time is too slow for a
  table), its coverage summed over every outcome, and its expected width beside Tango + FPC's.
- The paired verdict's interval on a large set (N = 1,600: DISCOTEX's), computed the same way:
  paired_exact.paired_set_ci itself for each outcome (b, c) (the restricted exact interval up to MAX_CHANGED changed
  answers, Tango + FPC on the set's grid above; near N: coverage_near.py), every outcome more probable than 1e-10 in some cell (the largest mass left out is
  printed), n up to 80.

    python bench/coverage.py [--reps 20000] [--seed 1] [--no-readme]
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
from scipy import stats as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from abricot_local import metrics  # noqa: E402
from abricot_local.analysis import stats  # noqa: E402
from abricot_local.analysis.paired_exact import MAX_CHANGED, _log_comb, _tango_z, paired_set_ci  # noqa: E402

LEVEL = 0.90
TOL = 1e-12  # a bound this close to the truth holds it (float division on either side)
TOTALS = (127, 1600)
ACCURACIES = (0.05, 0.2, 0.5, 0.8)
PAIRS = ((0.05, 0.0), (0.2, 0.0), (0.2, -0.1), (0.5, -0.15))  # (psi: changed answers, D: the set's difference)


def sizes(total: int) -> tuple[int, ...]:
    return tuple(sorted({10, 20, 40, 80, total // 2, total}))


def wilson_fpc(k: int, n: int, total: int) -> tuple[float, float]:
    return metrics.wilson(k, n, level=LEVEL, fpc=stats.fpc(n, total))


def exact(k: int, n: int, total: int) -> tuple[float, float]:
    return stats.exact_set_ci(k, n, total, level=LEVEL)


def misses(lo: np.ndarray, hi: np.ndarray, truth: float) -> tuple[np.ndarray, np.ndarray]:
    """Per interval: whether it lies wholly below the truth, whether wholly above it."""
    return hi < truth - TOL, lo > truth + TOL


def share(hit: np.ndarray) -> tuple[float, float]:
    """The share of replications and its Monte Carlo standard error."""
    p = float(np.mean(hit))
    return p, math.sqrt(p * (1.0 - p) / len(hit))


def accuracy_cell(total: int, acc: float, n: int, reps: int, rng: np.random.Generator) -> dict:
    big_k = round(acc * total)
    truth = big_k / total
    ks = rng.hypergeometric(big_k, total - big_k, n, size=reps)
    pmf = st.hypergeom(total, big_k, n).pmf(np.arange(n + 1))
    out = {"N": total, "n": n, "acc": acc, "K": big_k}
    for name, f in (("wilson_fpc", wilson_fpc), ("exact", exact)):
        bounds = np.array([f(k, n, total) for k in range(n + 1)])
        below, above = misses(bounds[:, 0], bounds[:, 1], truth)
        out[name] = {"coverage": share(~(below | above)[ks]), "below": share(below[ks]), "above": share(above[ks]),
                     "exact_coverage": float(pmf[~(below | above)].sum())}
    return out


def pair_cell(total: int, psi: float, d: float, n: int, reps: int, rng: np.random.Generator) -> dict:
    b_pop, c_pop = round(total * (psi + d) / 2), round(total * (psi - d) / 2)
    truth = (b_pop - c_pop) / total
    draws = rng.multivariate_hypergeometric([b_pop, c_pop, total - b_pop - c_pop], n, size=reps)
    out = {"N": total, "n": n, "psi": psi, "D": truth, "B": b_pop, "C": c_pop}
    for name, factor in (("tango_fpc", stats.fpc(n, total)), ("tango", 1.0)):
        seen = {(b, c): stats.paired_score_ci(b, c, n, level=LEVEL, factor=factor)
                for b, c in {(int(b), int(c)) for b, c, _ in draws}}
        bounds = np.array([seen[int(b), int(c)] for b, c, _ in draws])
        below, above = misses(bounds[:, 0], bounds[:, 1], truth)
        out[name] = {"coverage": share(~(below | above)), "below": share(below), "above": share(above)}
    return out


def exact_unconditional(total: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every outcome (b, c) of n items drawn from ``total`` and its exact unconditional 90% interval of the set's
    D = (B - C) / N: the D (a multiple of 1 / N) whose tails P(z >= z_obs) and P(z <= z_obs), z Tango's statistic at
    D, both exceed 5% for some B and C with B - C = D N (the maximum over the changed answers), their hull."""
    bs, cs = np.meshgrid(np.arange(n + 1.0), np.arange(n + 1.0), indexing="ij")
    ob, oc = bs[bs + cs <= n], cs[bs + cs <= n]
    tail, outcomes = (1.0 - LEVEL) / 2.0, len(ob)
    lo, hi = np.full(outcomes, np.inf), np.full(outcomes, -np.inf)
    for d in range(-total, total + 1):
        big_b = np.arange(max(0, d), (total + d) // 2 + 1.0)
        big_c = big_b - d
        z = _tango_z(ob, oc, n, d / total)
        order = np.argsort(z, kind="stable")
        zs = z[order]
        p = np.exp(_log_comb(big_b, ob) + _log_comb(big_c, oc) + _log_comb(total - big_b - big_c, n - ob - oc)
                   - _log_comb([total], [n])[0, 0])[:, order]
        cum = np.cumsum(p, axis=1)
        first, last = np.searchsorted(zs, zs, side="left"), np.searchsorted(zs, zs, side="right") - 1
        upper = cum[:, -1:] - np.where(first > 0, cum[:, np.maximum(first - 1, 0)], 0.0)  # P(z' >= z_k)
        inside = np.empty(outcomes, bool)
        inside[order] = (upper.max(axis=0) > tail) & (cum[:, last].max(axis=0) > tail)
        lo[inside], hi[inside] = np.minimum(lo[inside], d / total), np.maximum(hi[inside], d / total)
    return ob.astype(int), oc.astype(int), lo, hi


def exact_cells(total: int) -> list[dict]:
    """PAIRS' cells of a set of ``total``: the coverage and expected width of the exact unconditional interval and of
    Tango + FPC, summed over every outcome with its probability (no simulation)."""
    out = []
    for n in (n for n in sizes(total) if n < total):
        ob, oc, lo, hi = exact_unconditional(total, n)
        factor = stats.fpc(n, total)
        tango = np.array([stats.paired_score_ci(int(b), int(c), n, level=LEVEL, factor=factor) for b, c in zip(ob, oc)])
        for psi, d in PAIRS:
            b_pop, c_pop = round(total * (psi + d) / 2), round(total * (psi - d) / 2)
            truth = (b_pop - c_pop) / total
            p = np.exp(_log_comb([b_pop], ob)[0] + _log_comb([c_pop], oc)[0]
                       + _log_comb([total - b_pop - c_pop], n - ob - oc)[0] - _log_comb([total], [n])[0, 0])
            cell = {"N": total, "n": n, "psi": psi, "D": truth, "B": b_pop, "C": c_pop}
            for name, (low, high) in (("exact", (lo, hi)), ("tango_fpc", (tango[:, 0], tango[:, 1]))):
                below, above = misses(low, high, truth)
                cell[name] = {"coverage": float(p[~(below | above)].sum()), "below": float(p[below].sum()),
                              "above": float(p[above].sum()), "width": float((p * (high - low)).sum())}
            out.append(cell)
    return out



def verdict_cells(total: int, ns: tuple[int, ...] = (10, 20, 40, 80)) -> list[dict]:
    """PAIRS' cells of a set of ``total``: the coverage and expected width of the verdict's own interval
    (paired_exact.paired_set_ci) and of Tango + FPC, summed over every outcome whose probability exceeds 1e-10 in some
    cell (``left``: the largest mass of a cell's outcomes left out)."""
    out = []
    for n in ns:
        bs, cs = np.meshgrid(np.arange(n + 1.0), np.arange(n + 1.0), indexing="ij")
        ob, oc = bs[bs + cs <= n], cs[bs + cs <= n]
        cells = []
        for psi, d in PAIRS:
            b_pop, c_pop = round(total * (psi + d) / 2), round(total * (psi - d) / 2)
            p = np.exp(_log_comb([b_pop], ob)[0] + _log_comb([c_pop], oc)[0]
                       + _log_comb([total - b_pop - c_pop], n - ob - oc)[0] - _log_comb([total], [n])[0, 0])
            cells.append(({"N": total, "n": n, "psi": psi, "D": (b_pop - c_pop) / total, "B": b_pop, "C": c_pop}, p))
        scored, kept = verdict_scored(cells, ob, oc, n, total, 1e-10)
        out += scored
        print(f"the verdict's interval, {n} of {total:,}: {kept} outcomes", file=sys.stderr)
    return out


def verdict_scored(cells: list, ob: np.ndarray, oc: np.ndarray, n: int, total: int, cut: float) -> tuple[list, int]:
    """``cells`` ((cell, p): a population and each outcome (ob, oc)'s probability under it) scored for the verdict's
    own interval (paired_set_ci) and Tango + FPC over the outcomes whose probability exceeds ``cut`` in some cell
    (``left``: a cell's mass of those left out): coverage, each side's miss and the expected width; and how many
    outcomes were kept. verdict_cells' and coverage_near.py's one scoring."""
    keep = np.max([p for _, p in cells], axis=0) > cut
    ob, oc = ob[keep], oc[keep]
    factor = stats.fpc(n, total)
    ours = np.array([paired_set_ci(int(b), int(c), n, total, LEVEL) for b, c in zip(ob, oc)])
    tango = np.array([stats.paired_score_ci(int(b), int(c), n, level=LEVEL, factor=factor) for b, c in zip(ob, oc)])
    out = []
    for cell, p in cells:
        left, p = float(p[~keep].sum()), p[keep]
        for name, (low, high) in (("exact", (ours[:, 0], ours[:, 1])), ("tango_fpc", (tango[:, 0], tango[:, 1]))):
            below, above = misses(low, high, cell["D"])
            cell[name] = {"coverage": float(p[~(below | above)].sum()), "below": float(p[below].sum()),
                          "above": float(p[above].sum()), "width": float((p * (high - low)).sum())}
        cell["left"] = left
        out.append(cell)
    return out, len(ob)

def pct(x: tuple[float, float]) -> str:
    return f"{100 * x[0]:.1f}% ± {100 * x[1]:.1f}"


def accuracy_table(cells: list[dict]) -> str:
    lines = ["| N | n | set accuracy (K) | Wilson + FPC: coverage | misses below | misses above | exact (P) | "
             "exact hypergeometric: coverage | misses below | misses above | exact (P) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        w, e = c["wilson_fpc"], c["exact"]
        lines.append(f"| {c['N']:,} | {c['n']:,} | {c['acc']:g} ({c['K']}) | " + " | ".join(
            f"{pct(r['coverage'])} | {pct(r['below'])} | {pct(r['above'])} | {100 * r['exact_coverage']:.1f}%"
            for r in (w, e)) + " |")
    return "\n".join(lines)


def pair_table(cells: list[dict]) -> str:
    lines = ["| N | n | changed answers psi (B, C) | set difference D | Tango + FPC: coverage | misses below | "
             "misses above | Tango, no correction: coverage |", "|---|---|---|---|---|---|---|---|"]
    for c in cells:
        t = c["tango_fpc"]
        lines.append(f"| {c['N']:,} | {c['n']:,} | {c['psi']:g} ({c['B']}, {c['C']}) | {c['D']:+.3f} | "
                     f"{pct(t['coverage'])} | {pct(t['below'])} | {pct(t['above'])} | {pct(c['tango']['coverage'])} |")
    return "\n".join(lines)


def exact_table(cells: list[dict], name: str = "exact unconditional") -> str:
    lines = [f"| N | n | changed answers psi (B, C) | set difference D | {name}: coverage | misses below | "
             "misses above | expected width | Tango + FPC: coverage | expected width | width, exact / Tango |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        e, t = c["exact"], c["tango_fpc"]
        lines.append(f"| {c['N']:,} | {c['n']:,} | {c['psi']:g} ({c['B']}, {c['C']}) | {c['D']:+.3f} | "
                     f"{100 * e['coverage']:.1f}% | {100 * e['below']:.1f}% | {100 * e['above']:.1f}% | "
                     f"{e['width']:.3f} | {100 * t['coverage']:.1f}% | {t['width']:.3f} | "
                     f"{e['width'] / t['width']:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    from throughput import simulation_args

    args = simulation_args(__doc__)
    started, rng, load = time.time(), np.random.default_rng(args.seed), os.getloadavg()
    accuracy = [accuracy_cell(t, a, n, args.reps, rng) for t in TOTALS for a in ACCURACIES for n in sizes(t)]
    print(f"one run's accuracy: {time.time() - started:.1f} s", file=sys.stderr)
    pairs = [pair_cell(t, psi, d, n, args.reps, rng) for t in TOTALS for psi, d in PAIRS for n in sizes(t)]
    exact_pairs = exact_cells(min(TOTALS))
    verdict_pairs = verdict_cells(max(TOTALS))
    head = (f"Measured {datetime.now(timezone.utc):%Y-%m-%d} by `python bench/coverage.py --reps {args.reps} --seed "
            f"{args.seed}` on {platform.machine()}, {os.cpu_count()} cores (load {load[0]:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end), "
            f"{time.time() - started:.0f} s; {args.reps:,} draws per cell (± one Monte Carlo standard error); "
            f"nominal {100 * LEVEL:g}%: coverage at least {100 * LEVEL:g}%, at most {50 * (1 - LEVEL):g}% missed on "
            "each side")
    text = (head + "\n\nOne run's accuracy, the set's own value K / N (the reproduction verdict; *exact (P)*: the "
            "coverage from the hypergeometric probabilities, no simulation):\n\n" + accuracy_table(accuracy) +
            "\n\nTwo runs' paired accuracy, the set's own difference D = (B - C) / N (compare's and the ladder's "
            "equivalence verdict):\n\n" + pair_table(pairs) +
            f"\n\nOn a set of {min(TOTALS)} (ABRICOT's): the exact unconditional interval (the verdict's up to 150 items) "
            "beside Tango + FPC, "
            "each coverage and expected width summed over every outcome with its probability (no simulation):\n\n"
            + exact_table(exact_pairs) +
            f"\n\nOn a set of {max(TOTALS):,} (DISCOTEX's): the verdict's interval (the restricted exact interval "
            f"while at most {MAX_CHANGED} answers changed, Tango + FPC on the set's grid above: near N, the table after "
            "this one) beside Tango + FPC, summed over every "
            "outcome more probable than 1e-10 in some cell (the mass left out: at most "
            f"{max(c['left'] for c in verdict_pairs):.0e} a cell), no simulation:\n\n"
            + exact_table(verdict_pairs, "the verdict's"))
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "reps": args.reps, "seed": args.seed,
           "level": LEVEL, "accuracy": accuracy, "pairs": pairs, "exact_pairs": exact_pairs,
           "verdict_pairs": verdict_pairs}
    from throughput import publish

    publish(doc, "coverage", text, None if args.no_readme else "coverage",
            "## Coverage of the verdicts' intervals for a task's own value (`coverage.py`)")


if __name__ == "__main__":
    main()
