"""Keeps the sequential rule honest (analysis/sequential.py): how often it reaches a wrong verdict, and the items it
spends, against peeking at 90% at every look and against a fixed-n run of the same power.

Each scenario is a population of N items with a known truth, the task's own value (a published row: run - published;
a rung: other - reference), scored in a random order (the nested sample order: the first n items a simple random
sample of the N, without replacement). Each replication draws a new order (and, for populations resampled from
real samples, a new population), then replays:

- the shipped rule: looks 20, 40, 80, ... and N, look k at 1 - 0.1 x 2^-k, stop at the first look where the verdict
  is settled (analysis/sequential.py, as `run --until-settled` will call it);
- the same looks read at 90% every time (peeking without spending: the rule users make by hand today);
- a fixed-n run: the verdict the tool gives a `--sample n` run of the first n items, by its own functions (fixed():
  a published row's, baselines.evidence and check_run, reproduction.judge on the exact hypergeometric interval of an
  accuracy or correlation_ci's of a correlation; a rung's, compare.compare_metric and equivalence.verdict_of,
  paired_exact's interval), for n on a grid; "same power": the smallest n whose verdict is settled and right at
  least as often as the shipped rule's.

A verdict is wrong when it is settled before N and its claim is false of the truth (reproduced or equivalent: the
difference within the margin; differs: beyond it; better: above +M; not worse: above -M; worse: below -M). At N the
verdict is the set's own value. With the truth on the margin every settled verdict before N is wrong: the worst case,
where a fixed-n 90% verdict is wrong up to 10% of the time.

    python bench/sequential.py --reps 1000 [--abricot RUN_FOLDER] [--no-readme]

RUN_FOLDER: a run of abricot_abs@calamita (and abricot_inc@calamita) on the real release, whose 127 samples are the
population of the real Pearson scenarios (their order resampled). DISCOTEX's real samples are the committed reference
runs (tests/reference/: Gemma 3 270M and SmolLM2-135M, 40 items each), resampled into populations of 1,600.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from abricot_local import metrics  # noqa: E402
from abricot_local.analysis import baselines, compare, equivalence, reproduction  # noqa: E402
from abricot_local.analysis import sequential as sq  # noqa: E402
from abricot_local.record import TaskEntry  # noqa: E402
from abricot_local.tasks.base import MetricInput, Reference  # noqa: E402

TOL = 1e-9  # a difference this close to the margin counts as on it
VALUE = {"accuracy": metrics.accuracy, "pearson": metrics.pearson, "spearman": metrics.spearman}  # a run's metric


@dataclass(frozen=True)
class Scenario:
    verdict: str  # what is judged
    source: str  # where the outcomes come from
    truth: str  # what is true of the population
    total: int
    draw: Callable[[np.random.Generator], tuple[sq.Question, list[np.ndarray], float]]  # question, vectors, d
    on_margin: bool = False


def holds(kind: str, d: float, m: float) -> bool:
    """Whether a settled verdict's claim is true of the difference ``d`` at margin ``m``."""
    return {reproduction.REPRODUCED: abs(d) < m - TOL, equivalence.EQUIVALENT: abs(d) < m - TOL,
            reproduction.DIFFERS: abs(d) > m + TOL, equivalence.BETTER: d > m + TOL,
            equivalence.NOT_WORSE: d > -m + TOL, equivalence.WORSE: d < -m - TOL,
            reproduction.UNSETTLEABLE: abs(abs(d) - m) <= TOL}[kind]


def shipped(q: sq.Question, v: list[np.ndarray], total: int, spend: bool, seed: int) -> tuple[str, int]:
    """The sequential rule replayed over one order: its last verdict and the items it scored."""
    s = sq.start(total, [q], spend=spend, seed=seed)
    while not s.stopped:
        n = s.next_look
        s = sq.look(s, n, {q.name: [x[:n] for x in v]})
    return s.latest[0].verdict, s.n


class _Task:
    """The little of a task that baselines.evidence reads: one CI metric's inputs over the items given (indices into
    the order scored), its margin, its seed (the correlations' bootstrap)."""

    def __init__(self, q: sq.Question, v: list[np.ndarray], seed: int):
        self.q, self.v, self.options = q, v, SimpleNamespace(seed=seed)

    def metric_inputs(self, items: list[int]) -> tuple[MetricInput, ...]:
        return (MetricInput(self.q.stat, self.q.stat, self.v[0][items], self.v[1][items]),)

    def margin(self, name: str) -> float:
        return self.q.margin


def fixed(q: sq.Question, v: list[np.ndarray], total: int, n: int, seed: int) -> str:
    """The verdict the tool gives a fixed-n run of the first n items (a ``--sample n`` run), by its own functions: a
    published row's, baselines.evidence then baselines.check_run (reproduction.judge on the exact hypergeometric
    interval of an accuracy, correlation_ci's of a correlation); a rung's, compare.compare_metric then
    equivalence.verdict_of (compare's verdict: paired_exact.paired_set_ci of an accuracy)."""
    if q.paired:
        ia, ib = (MetricInput(q.stat, q.stat, v[i][:n], v[i + 1][:n]) for i in (0, 2))
        m = compare.compare_metric("task", "other", "reference", ia, ib, seed=seed, n_boot=metrics.N_BOOT)
        return equivalence.verdict_of(m, "other", "reference", q.margin, total).kind
    items = list(range(n))
    ev = baselines.evidence(_Task(q, v, seed), items, total)
    value = VALUE[q.stat](v[0][:n], v[1][:n])
    ref = Reference("bench", "model", "task", q.stat, q.published)
    c = baselines.check_run(ref, {"task": TaskEntry(metrics={q.stat: value}, n=n)}, {"task": ev}, q.margin)
    return c.verdict.kind


def replay(sc: Scenario, reps: int, seed: int, grid: list[int]) -> dict:
    rng = np.random.default_rng(seed)
    out = {"shipped": [], "peeking": [], "fixed": {n: [] for n in grid}}
    for r in range(reps):
        q, v, d = sc.draw(rng)
        for rule, spend in (("shipped", True), ("peeking", False)):
            kind, n = shipped(q, v, sc.total, spend, seed + r)
            out[rule].append((outcome(kind, n, sc.total, d, q.margin), n))
        for n in grid:
            out["fixed"][n].append(outcome(fixed(q, v, sc.total, n, seed + r), n, sc.total, d, q.margin))
    return out


def outcome(kind: str, n: int, total: int, d: float, m: float) -> str:
    """'wrong', 'right' (settled and true, or exact) or 'open'."""
    if n >= total:
        return "right"
    if kind not in sq.SETTLED:
        return "open"
    return "right" if holds(kind, d, m) else "wrong"


def rate(xs: list[str], what: str) -> tuple[float, float]:
    p = sum(x == what for x in xs) / len(xs)
    return p, math.sqrt(p * (1 - p) / len(xs))


def summarise(sc: Scenario, res: dict, reps: int) -> list[dict]:
    rows = []
    for rule in ("shipped", "peeking"):
        kinds, items = [o for o, _ in res[rule]], np.array([n for _, n in res[rule]], dtype=float)
        rows.append(dict(rule=rule, wrong=rate(kinds, "wrong"), right=rate(kinds, "right"),
                         items=(float(items.mean()), float(items.std(ddof=1) / math.sqrt(reps)))))
    target = rows[0]["right"][0]
    same = next((n for n, xs in res["fixed"].items() if rate(xs, "right")[0] >= target), sc.total)
    xs = res["fixed"].get(same, ["right"] * reps)
    rows.append(dict(rule=f"fixed n = {same}", wrong=rate(xs, "wrong"), right=rate(xs, "right"),
                     items=(float(same), 0.0)))
    return rows


# -- populations -------------------------------------------------------------------------------------------------
def read_samples(path: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return (np.array([r["pred"] for r in rows]), np.array([r["gold"] for r in rows]), [r["id"] for r in rows])


def discotex_scenarios(total: int = 1600, margin: float = 0.02) -> list[Scenario]:
    gp, gg, gid = read_samples(ROOT / "tests/reference/gemma-3-270m/samples-discotex.jsonl")
    sp, sg, sid = read_samples(ROOT / "tests/reference/smollm2-135m/samples-discotex.jsonl")
    assert gid == sid, "the two reference runs scored other items"
    source = "real DISCOTEX samples (tests/reference, 40 items) resampled to 1,600"

    def one_run(offset: float):
        def draw(rng):
            pick = rng.integers(0, len(gp), total)
            x, y = gp[pick], gg[pick]
            truth = float(np.mean(x == y))
            q = sq.Question("row", "accuracy", margin, truth - offset, baselines.rounding(truth - offset))
            return q, [x, y], offset
        return draw

    def pair(rng):
        pick = rng.integers(0, len(gp), total)
        v = [sp[pick], sg[pick], gp[pick], gg[pick]]  # SmolLM2 as the rung, Gemma as its reference
        d = float(np.mean(v[0] == v[1]) - np.mean(v[2] == v[3]))
        return sq.Question("pair", "accuracy", margin), v, d

    def synthetic_pair(psi: float, d: float):
        """A rung whose correctness differs from its reference's on a share ``psi`` of the items, other - reference
        exactly ``d`` over the set."""
        b, c = round(total * (psi + d) / 2), round(total * (psi - d) / 2)

        def draw(rng):
            ref = rng.permutation(np.r_[np.ones(round(0.6 * total), int), np.zeros(total - round(0.6 * total), int)])
            other = ref.copy()
            ones, zeros = np.flatnonzero(ref == 1), np.flatnonzero(ref == 0)
            other[rng.choice(zeros, b, replace=False)] = 1  # the rung alone right
            other[rng.choice(ones, c, replace=False)] = 0  # the reference alone right
            gold = np.ones(total, int)
            return sq.Question("pair", "accuracy", margin), [other, gold, ref, gold], (b - c) / total
        return draw

    acc = f"one run's accuracy vs a published row, margin {margin:g}"
    pairs = f"a rung vs its reference, paired accuracy, margin {margin:g}"
    return [
        Scenario(acc, source, "on the margin (run - published = +0.02)", total, one_run(margin), on_margin=True),
        Scenario(acc, source, "reproduced (run = published)", total, one_run(0.0)),
        Scenario(acc, source, "differs (run - published = -0.10)", total, one_run(-0.10)),
        Scenario(pairs, "synthetic: 10% of answers change", "on the margin (-0.02)", total,
                 synthetic_pair(0.10, -margin), on_margin=True),
        Scenario(pairs, "synthetic: 5% of answers change", "equivalent (0)", total, synthetic_pair(0.05, 0.0)),
        Scenario(pairs, "synthetic: 50% of answers change (a Q2_K)", "worse (-0.15)", total,
                 synthetic_pair(0.50, -0.15)),
        Scenario(pairs, "real DISCOTEX pairs: SmolLM2-135M vs Gemma 3 270M, resampled",
                 "about +0.025 (each population its own)", total, pair),
    ]


def pearson_scenarios(abricot: Path | None, margin: float = 0.05, total: int = 127,
                      off: tuple[int, ...] = (20,)) -> list[Scenario]:
    """The Pearson scenarios: synthetic 1-5 ratings, a near-constant model on the margin per count in ``off`` (its
    answers off the commonest; each drawn from the same generator state, so 20 is the same model whatever ``off``
    holds), then the real ABRICOT runs in ``abricot``."""
    name = f"one run's Pearson vs a published row, margin {margin:g}"

    def rows(x: np.ndarray, y: np.ndarray, offset: float):
        truth = metrics.pearson(x, y)

        def draw(rng):
            order = rng.permutation(len(x))
            q = sq.Question("row", "pearson", margin, truth - offset, baselines.rounding(truth - offset))
            return q, [x[order], y[order]], offset
        return draw

    out = []
    rng = np.random.default_rng(20260501)
    gold = rng.choice(5, total, p=[0.15, 0.25, 0.30, 0.20, 0.10]) + 1
    latent = (gold - gold.mean()) / gold.std() * 0.55 + rng.standard_normal(total) * math.sqrt(1 - 0.55 ** 2)
    pred = np.digitize(latent, np.quantile(latent, [0.1, 0.35, 0.7, 0.9])) + 1
    src = f"synthetic: 1-5 ratings, r = {metrics.pearson(pred, gold):.2f} over the 127, order resampled"
    out += [Scenario(name, src, "on the margin (+0.05)", total, rows(pred, gold, margin), on_margin=True),
            Scenario(name, src, "reproduced (run = published)", total, rows(pred, gold, 0.0)),
            Scenario(name, src, "differs (0.3 below the published)", total, rows(pred, gold, -0.3))]
    state = rng.bit_generator.state
    for k in off:
        rng.bit_generator.state = state
        rare = np.ones(total)
        rare[rng.choice(total, k, replace=False, p=np.exp(gold / 2.0) / np.exp(gold / 2.0).sum())] = 2.0
        src = (f"synthetic: a near-constant model, {k} of 127 answers off its commonest, r = "
               f"{metrics.pearson(rare, gold):.2f}, order resampled")
        out += [Scenario(name, src, "on the margin (+0.05)", total, rows(rare, gold, margin), on_margin=True)]
    for key in ("abricot_abs@calamita", "abricot_inc@calamita"):
        path = abricot / f"samples-{key}.jsonl" if abricot else None
        if path is None or not path.exists():
            continue
        p, g, _ = read_samples(path)
        x, y = p.astype(float) + 1, g.astype(float) + 1
        src = f"real: Gemma 3 270M's {len(x)} samples of {key}, r = {metrics.pearson(x, y):.3f}, order resampled"
        out += [Scenario(name, src, "on the margin (+0.05)", len(x), rows(x, y, margin), on_margin=True),
                Scenario(name, src, "differs (0.3 below the published)", len(x), rows(x, y, -0.3))]
    return out


def grid_for(total: int) -> list[int]:
    step = 10 if total <= 200 else 40
    return [*range(step, total, step), total]


def table(results: list[tuple[Scenario, list[dict]]]) -> str:
    """One line per scenario: the shipped rule, peeking at 90%, and the fixed-n run that settles as often."""
    def pct(x: tuple[float, float]) -> str:
        return f"{100 * x[0]:.1f}% ± {100 * x[1]:.1f}"

    lines = ["| verdict | outcomes | truth | shipped: wrong | shipped: settled right | shipped: mean items | "
             "peeking at 90%: wrong | peeking: mean items | fixed n, as often settled right |",
             "|---|---|---|---|---|---|---|---|---|"]
    for sc, (ship, peek, fix) in results:
        items = [f"{r['items'][0]:.0f} ± {r['items'][1]:.0f}" for r in (ship, peek)]
        right = "-" if sc.on_margin else pct(ship["right"])
        fixed = "-" if sc.on_margin else f"{fix['rule'].removeprefix('fixed n = ')} ({pct(fix['right'])})"
        lines.append(f"| {sc.verdict} | {sc.source} | {sc.truth} | {pct(ship['wrong'])} | {right} | {items[0]} | "
                     f"{pct(peek['wrong'])} | {items[1]} | {fixed} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1000, help="replications per scenario")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--abricot", type=Path, default=None, help="a run folder holding abricot_*@calamita samples")
    ap.add_argument("--no-readme", action="store_true", help="print only; leave bench/README.md as it is")
    ap.add_argument("--near-constant", default=None, metavar="K,K,...",
                    help="only the near-constant model on the margin, once per count of answers off its commonest "
                         "(each with the seed the full run gives its row, SEED + 10000), printed; nothing written")
    args = ap.parse_args()
    if args.near_constant:
        near_constant(args)
        return
    started, results, load = time.time(), [], os.getloadavg()
    for k, sc in enumerate(discotex_scenarios() + pearson_scenarios(args.abricot)):
        t = time.time()
        res = replay(sc, args.reps, args.seed + 1000 * k, [] if sc.on_margin else grid_for(sc.total))
        results.append((sc, summarise(sc, res, args.reps)))
        print(f"{sc.verdict} | {sc.truth}: {time.time() - t:.1f} s", file=sys.stderr)
    head = (f"Measured {datetime.now(timezone.utc):%Y-%m-%d} by `python bench/sequential.py --reps {args.reps}"
            f"{' --abricot RUN' if args.abricot else ''}` on {platform.machine()}, {os.cpu_count()} cores (load "
            f"{load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end), {time.time() - started:.0f} s; "
            f"{args.reps} replications per scenario (± one Monte Carlo "
            "standard error); the shipped rule at looks 20, 40, 80, ... and N, look k at 1 - 0.1 x 2^-k")
    text = head + "\n\n" + table(results)
    doc = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "reps": args.reps,
           "results": [{"verdict": sc.verdict, "source": sc.source, "truth": sc.truth, "rows": rows}
                       for sc, rows in results]}
    from throughput import publish

    publish(doc, "sequential", text, None if args.no_readme else "sequential",
            "## Stopping when it is settled (`sequential.py`)")


def near_constant(args) -> None:
    """``--near-constant``: the near-constant rows alone (docs/protocols.md's guard figure), printed."""
    ks = tuple(int(k) for k in args.near_constant.split(","))
    full = len(pearson_scenarios(None)) - 1 + len(discotex_scenarios())  # the row's index in the full run
    scs = [sc for sc in pearson_scenarios(None, off=ks) if "near-constant" in sc.source]
    started, rows = time.time(), []
    for k, sc in zip(ks, scs):
        t = time.time()
        rows.append((sc, summarise(sc, replay(sc, args.reps, args.seed + 1000 * full, []), args.reps)))
        print(f"{k} off the commonest: {time.time() - t:.1f} s", file=sys.stderr)
    print(f"`python bench/sequential.py --reps {args.reps} --seed {args.seed} --near-constant {args.near_constant}`, "
          f"{platform.machine()}, {os.cpu_count()} cores, {time.time() - started:.0f} s\n\n{table(rows)}")


if __name__ == "__main__":
    main()
