"""The exact interval of a task's own paired difference: what compare's equivalence verdict and the --until-settled
rule read for an accuracy, where Tango's score interval narrowed by the finite-population factor holds the set's
difference as little as 84.5% of the time at 90% on 127 items, 87.9% on 1,600 (bench/coverage.py).

Two runs over n items drawn without replacement from a task's N: b right for the first only, c for the second only.
The set's own difference is D = (B - C) / N, B and C the task's counts. :func:`exact_paired_set_ci` keeps every D (a
multiple of 1 / N) at which neither tail of the observed outcome is below 5%: the outcomes (b', c') ordered by Tango's
score statistic at D (stats._tango_z), their probabilities the multivariate hypergeometric's, each tail maximised
over every B and C with B - C = D N (the changed answers B + C are not known). Whatever B and C are, the interval
holds D with probability 90% or more, by construction; on 127 items it is 1.03-1.21x as wide as Tango's with the
correction (bench/README.md, "Coverage"). Its cost grows as N^2 n^2 (0.05 s at 40 of 127 items, 0.7 s at 126,
1.3 s at 149 of 150 on 2 cores), hence the bound :data:`MAX_TOTAL`.

On a larger task (DISCOTEX's 1,600) :func:`restricted_paired_set_ci` makes the same test with Berger and Boos's
restriction (1994): the maximum over the changed answers S = B + C taken over an exact confidence set for S at
1 - gamma only (from b + c, hypergeometric; gamma = 1/50 of a tail), gamma added to each tail; the outcomes whose
probability is below 1e-12 for every S of that set left out, their mass added too; D searched from Tango's bounds
(bisection, then the next :data:`GUARD` values past each bound checked). The guarantee is the same (at least 90%).
It is read while the changed answers b + c are at most :data:`MAX_CHANGED` (where Tango's falls short: its
asymptotics need changed answers, bench/README.md; up to about 1 s an interval at 100 items with 40 changed, 2 busy
cores), and near N:
up to :data:`MAX_CHANGED_NEAR` changed answers while the items not seen hold few of them, (b + c)(N - n) / n at most
:data:`MAX_UNSEEN` (the set's D then rests on the few changed answers not seen, and Tango's with the correction held
it as little as 76.6% of the time at 90%: 45 changed, 1,590 of 1,600 items; bench/coverage_near.py; the law of S
built only over the counts that can be: S from b + c to b + c + N - n; each D decided from the outcomes within a
window of each row's (:func:`_windowed`: bounds on both tails, the mass outside the window counted), the few within
:data:`MARGIN` of a tail summed over every outcome as always: the same intervals, bit for bit, 7-16x faster where
summing every outcome took 0.1 s or more, 0.01-0.02 s an interval there on 2 busy cores). Elsewhere Tango's with
the correction, its bounds taken outward to the set's grid of multiples of 1 / N (:func:`tango_set_ci`: as it was,
89.1% at 1,500 of 1,600 with 600 changed). :func:`paired_set_ci` picks the interval."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import gammaln

from abricot_local.analysis import stats

MAX_TOTAL = 150  # the largest task whose paired interval is the full construction (above it: the restricted one)
MAX_CHANGED = 40  # above MAX_TOTAL: the restricted construction up to this many changed answers, then Tango's
MAX_CHANGED_NEAR = 200  # ... and up to this many near N, where the items not seen hold few changed answers:
MAX_UNSEEN = 30  # (b + c)(N - n) / n at most this (their expected number among the N - n items not seen)
GUARD = 8  # the restricted construction's search: this many D past each bound found checked
NEGLIGIBLE = 1e-12  # an outcome this improbable under every S of the confidence set is left out (its mass added)
MARGIN = 1e-6  # a tail bounded this far from its line or more decides a D; nearer, every outcome of every row summed
WINDOW = 7.0  # ... bounded from the outcomes within this many standard deviations of b' and c' (and the mass left)
SUMMED = 20_000  # ... but up to about this many (rows times outcomes) every outcome summed (the quicker there)


@lru_cache(maxsize=4096)  # a pure function of its counts: --until-settled's looks and its planning ask again
def paired_set_ci(b: int, c: int, n: int, total: int, level: float = 0.90) -> tuple[float, float]:
    """The ``level`` interval of a task's own paired difference (b and c of n items of its ``total``): exact up to
    :data:`MAX_TOTAL` items (:func:`exact_paired_set_ci`), above it with up to :data:`MAX_CHANGED` changed answers
    (:func:`restricted_paired_set_ci`), and near N with up to :data:`MAX_CHANGED_NEAR` while (b + c)(N - n) / n is at
    most :data:`MAX_UNSEEN`, else Tango's narrowed by the finite-population factor on the set's grid
    (:func:`tango_set_ci`)."""
    if total <= MAX_TOTAL:
        return exact_paired_set_ci(b, c, n, total, level)
    if b + c <= MAX_CHANGED or (b + c <= MAX_CHANGED_NEAR and (b + c) * (total - n) <= MAX_UNSEEN * n):
        return restricted_paired_set_ci(b, c, n, total, level)
    return tango_set_ci(b, c, n, total, level)


def tango_set_ci(b: int, c: int, n: int, total: int, level: float = 0.90) -> tuple[float, float]:
    """Tango's score interval narrowed by the finite-population factor (stats.paired_score_ci with stats.fpc), each
    bound taken outward to the next multiple of 1 / ``total`` (the set's D is one: a bound within 1e-6 / N of one is
    kept); the bounds are scalar math (the same bits on every x86 CPU)."""
    lo, hi = stats.paired_score_ci(b, c, n, level=level, factor=stats.fpc(n, total))
    if lo != lo or total <= 1:  # NaN: no item
        return (lo, hi)
    return (max(-1.0, math.floor(lo * total + 1e-6) / total), min(1.0, math.ceil(hi * total - 1e-6) / total))


def _without_search(b: int, c: int, n: int, total: int) -> tuple[float, float] | None:
    """(NaN, NaN) with no item, the point at n = N (the set's own value), else None: an interval to search for.
    Counts that cannot be are a ValueError."""
    if n <= 0 or total < n:
        return (float("nan"), float("nan"))
    if min(b, c) < 0 or b + c > n:
        raise ValueError(f"{b} and {c} changed answers of {n} items")
    if n == total:
        return ((b - c) / total, (b - c) / total)
    return None


def exact_paired_set_ci(b: int, c: int, n: int, total: int, level: float = 0.90) -> tuple[float, float]:
    """The exact ``level`` interval of the set's D = (B - C) / N (``total`` = N) from ``b`` and ``c`` of ``n`` items
    drawn from it (see the module's text); (NaN, NaN) with no item, the point at n = N."""
    known = _without_search(b, c, n, total)
    if known is not None:
        return known
    tail = (1.0 - level) / 2.0
    grid_b, grid_c = np.meshgrid(np.arange(n + 1.0), np.arange(n + 1.0), indexing="ij")
    inside = grid_b + grid_c <= n
    ob, oc = grid_b[inside], grid_c[inside]  # every outcome
    seen = int(np.flatnonzero((ob == b) & (oc == c))[0])
    counts = np.arange(total + 1)
    log_b, log_c = _log_comb(counts, ob), _log_comb(counts, oc)  # log C(B, b') and C(C, c'), every count and outcome
    log_r = _log_comb(counts, n - ob - oc) - _log_comb(np.array([total]), np.array([n]))[0, 0]
    line = math.log(tail) - 1e-6  # k terms each at most e^u, u + log k below this: their sum, however made, below tail

    def is_held(d: int) -> bool:
        first, last = max(0, d), (total + d) // 2  # B runs on, C = B - D with it, R = N - B - C down in steps of 2
        if last < first:
            return False
        z = _tango_z(ob, oc, n, d / total)
        upper, lower = z >= z[seen], z <= z[seen]
        r_first, r_last = total - 2 * first + d, total - 2 * last + d
        log_p = log_b[first:last + 1] + log_c[first - d:last - d + 1]
        log_p += log_r[r_first:r_last - 1 if r_last else None:-2]
        widest = log_p.max(axis=0)  # each outcome's largest log-probability over the rows
        for mask in (upper, lower):  # a tail bounded below its line fails in every row, as its sum below would
            k = int(mask.sum())
            if k and widest[mask].max() + math.log(k) < line:
                return False
        p = np.exp(log_p, out=log_p)
        return bool((p @ _ones(upper)).max() > tail and (p @ _ones(lower)).max() > tail)

    # the interval's bounds: the first D held from each end (those between them are not asked)
    low = next((d for d in range(-total, total + 1) if is_held(d)), None)
    held = [] if low is None else [low, next(d for d in range(total, low - 1, -1) if d == low or is_held(d))]
    return (min(held) / total, max(held) / total)


def restricted_paired_set_ci(b: int, c: int, n: int, total: int, level: float = 0.90,
                             scan: bool = False) -> tuple[float, float]:
    """The exact ``level`` interval of D = (B - C) / N as :func:`exact_paired_set_ci` makes it, each tail maximised over
    a 1 - gamma confidence set of the changed answers S = B + C only, gamma added (Berger and Boos); see the module's
    text. ``scan``: every D the confidence set allows tested (the search's check), not only those near its bounds."""
    known = _without_search(b, c, n, total)
    if known is not None:
        return known
    tail = (1.0 - level) / 2.0
    gamma = tail / 50.0
    s = b + c
    # log k! at k + n + 1; inf at k < 0 (an outcome count larger than its class: probability 0)
    fact = np.concatenate([np.full(n + 1, np.inf), gammaln(np.arange(total + 1.0) + 1.0)])

    def log_choose(a: np.ndarray, k: np.ndarray) -> np.ndarray:  # log C(a, k), -inf where k > a
        return fact[a + n + 1] - fact[k + n + 1] - fact[a - k + n + 1]

    whole = log_choose(np.array(total), np.array(n))
    unseen = total - n  # S runs from s to s + unseen, s' from S - unseen to S: the rest of the law is 0
    row0, col0 = s, max(0, s - unseen)
    counts = np.arange(row0, min(total, s + unseen) + 1)[:, None]
    drawn = np.arange(col0, min(n, s + unseen) + 1)[None, :]
    law = np.exp(log_choose(counts, drawn) + log_choose(total - counts, n - drawn) - whole)  # P(s' | S): S rows
    at_least, at_most = np.cumsum(law[:, ::-1], axis=1)[:, ::-1], np.cumsum(law, axis=1)
    kept = np.flatnonzero((at_least[:, s - col0] > gamma / 2) & (at_most[:, s - col0] > gamma / 2))
    s_lo, s_hi = row0 + int(kept[0]), row0 + int(kept[-1])  # the changed answers' confidence set (an interval)
    first = col0 + int(np.flatnonzero(at_most[s_lo - row0] >= NEGLIGIBLE)[0])
    last = col0 + int(np.flatnonzero(at_least[s_hi - row0] >= NEGLIGIBLE)[-1])
    grid_b, grid_c = np.meshgrid(np.arange(last + 1), np.arange(last + 1), indexing="ij")
    inside = (grid_b + grid_c <= last) & (grid_b + grid_c >= first)
    ob, oc = grid_b[inside], grid_c[inside]  # the outcomes not negligible under every S of the set
    seen = int(np.flatnonzero((ob == b) & (oc == c))[0])

    slack = gamma + 2 * NEGLIGIBLE
    tested: dict[int, bool] = {}
    tables: list[np.ndarray] = []
    scores: dict[int, np.ndarray] = {}

    def falling(big_b: np.ndarray, big_c: np.ndarray, rest: np.ndarray) -> list[np.ndarray]:
        """log B! / (B - b')!, C! / (C - c')! and R! / (R - r')! / C(N, n) b'! c'! r'! (R = rest), by row."""
        drawn = n - ob - oc
        last = _less(fact, rest + n + 1, drawn)  # then less b'!, c'!, r'! and C(N, n), in that order
        for term in (fact[ob + n + 1], fact[oc + n + 1], fact[drawn + n + 1], whole):
            last -= term
        return [_less(fact, big_b + n + 1, ob), _less(fact, big_c + n + 1, oc), last]

    def summed(d: int, first_s: int, rows: int, ahead: list[int]) -> bool:  # every outcome of every row, as always
        first_b, at_r = (first_s + d) // 2, first_s - s_lo
        if tables or 8 * rows > s_hi or (s_hi + 1) * len(ob) <= 10 * SUMMED:  # every count's once (S from s_lo)
            if not tables:
                counts = np.arange(s_hi + 1)[:, None]
                tables.extend(falling(counts, counts, total - counts[s_lo:]))
            falling_b, falling_c, falling_r = tables
            log_p = (falling_b[first_b:first_b + rows] + falling_c[first_b - d:first_b - d + rows]
                     + falling_r[at_r:at_r + 2 * rows:2])
        else:
            big_b = np.arange(first_b, first_b + rows)[:, None]
            falling_b, falling_c, falling_r = falling(big_b, big_b - d, total - (2 * big_b - d))
            log_p = falling_b + falling_c + falling_r
        if d not in scores:  # Tango's z of every outcome, at this D and the next ones asked (GUARD at a time)
            batch = [d] + [e for e in ahead if e not in tested][:GUARD - 1]
            scores.update(zip(batch, _tango_z(ob[None, :], oc[None, :], n, np.array(batch, float)[:, None] / total)))
        z = scores.pop(d)
        p = np.exp(log_p, out=log_p)
        return (p @ _ones(z >= z[seen])).max() + slack > tail and (p @ _ones(z <= z[seen])).max() + slack > tail

    def held(ds) -> list[bool]:  # whether each D (times N) is held
        asked = list(dict.fromkeys(ds))
        for at, d in enumerate(asked):
            if d in tested:
                continue
            first_s = max(s_lo, abs(d))  # S = B + C from the set, B - C = D: B, C and S run on in steps of 1, 1, 2
            first_s += (first_s - d) % 2
            rows = max(0, (s_hi - first_s) // 2 + 1)
            big_b = np.arange((first_s + d) // 2, (first_s + d) // 2 + rows)
            known = False if not rows else None if (rows + 4) * len(ob) <= SUMMED else \
                _windowed(fact, whole, (b, c), n, total, d, big_b, (first, last, len(ob)), tail - slack)
            tested[d] = bool(summed(d, first_s, rows, asked[at + 1:at + 4 * GUARD]) if known is None else known)
            scores.pop(d, None)
        return [tested[d] for d in ds]

    if scan:
        every = range(-s_hi, s_hi + 1)
        found = [d for d, h in zip(every, held(every)) if h]
        return (min(found) / total, max(found) / total)
    tango = stats.paired_score_ci(b, c, n, level=level, factor=stats.fpc(n, total))
    point = round((b - c) * total / n)
    return (_bound(held, point, round(tango[0] * total), -1, s_hi) / total,
            _bound(held, point, round(tango[1] * total), 1, s_hi) / total)


def _bound(held, point: int, start: int, step: int, limit: int) -> int:
    """The last D (times N) held going from ``point`` in the direction ``step`` (-1, 1), within +-``limit``: found
    from ``start`` (Tango's bound) by doubling steps and bisection, then :data:`GUARD` values past it tested (one
    batch); one of those held, the search goes on from it. ``point`` not held: every D from it to the limit tested.
    ``held``: a list of D -> whether each is held."""
    def one(d: int) -> bool:
        return held([d])[0]

    if not one(point):
        every = range(point, step * (limit + 1), step)
        found = [d for d, h in zip(every, held(every)) if h]
        return found[-1] if found else point
    start = max(-limit, min(limit, start))
    start = start if (start - point) * step > 0 else point
    inner, outer = (start, None) if one(start) else (point, start)
    width = 1
    while outer is None:  # outward until a D not held, or the limit
        nxt = inner + step * width
        if abs(nxt) > limit:
            outer = step * (limit + 1)
        elif one(nxt):
            inner, width = nxt, width * 2
        else:
            outer = nxt
    while abs(outer - inner) > 1:
        mid = (inner + outer) // 2
        inner, outer = (mid, outer) if one(mid) else (inner, mid)
    guard = [d for d in range(inner + step, inner + step * (GUARD + 1), step) if abs(d) <= limit]
    past = [d for d, h in zip(guard, held(guard)) if h]
    return _bound(held, past[-1], past[-1], step, limit) if past else inner


def _windowed(fact, whole, seen: tuple[int, int], n: int, total: int, d: int, big_b: np.ndarray,
              band: tuple[int, int, int], line: float) -> bool | None:
    """Whether D = ``d`` is held, from each row's (B = ``big_b``, C = B - d) outcomes within a window only: each tail's
    mass there is at most its own, the mass outside the window (1 - the window's) at most added to it. True where
    some row's upper and some row's lower tail pass ``line`` by :data:`MARGIN`, False where every row's upper or
    every row's lower tail falls short of it by MARGIN (the decision :func:`restricted_paired_set_ci` makes summing
    every outcome: MARGIN is far above the rounding of either sum), else None: the sum over every outcome decides;
    None too where the window is not under half the outcomes of the band (``band``: first, last b' + c', outcomes).
    The window: each row's b' and c' within :data:`WINDOW` standard deviations of their means, one for every row."""
    big_c = big_b - d
    lo_hi = []
    for count in (big_b, big_c):  # b' (c') of n from count of N: hypergeometric
        mean, sd = n * count / total, np.sqrt(n * count / total * (1 - count / total) * (total - n) / max(1, total - 1))
        lo_hi.append((max(0, math.floor((mean - WINDOW * sd).min()) - 1),
                      min(n, band[1], int(count.max()), math.ceil((mean + WINDOW * sd).max()) + 1)))
    (lo_b, hi_b), (lo_c, hi_c) = lo_hi
    if hi_b < lo_b or hi_c < lo_c or 2 * (hi_b - lo_b + 1) * (hi_c - lo_c + 1) > band[2]:
        return None
    wb, wc = np.arange(lo_b, hi_b + 1), np.arange(lo_c, hi_c + 1)
    drawn = np.arange(lo_b + lo_c, hi_b + hi_c + 1)  # b' + c'
    rest = np.maximum(n - drawn, 0)
    big_r = (total - big_b - big_c)[:, None]
    log_b = fact[big_b[:, None] + n + 1] - fact[wb + n + 1] - fact[big_b[:, None] - wb + n + 1]
    log_c = fact[big_c[:, None] + n + 1] - fact[wc + n + 1] - fact[big_c[:, None] - wc + n + 1]
    log_r = np.where(drawn <= n, fact[big_r + n + 1] - fact[rest + n + 1] - fact[big_r - rest + n + 1] - whole, -np.inf)
    at = np.arange(len(wb))[:, None] + np.arange(len(wc))[None, :]
    p = np.exp(log_b[:, :, None] + log_c[:, None, :] + log_r[:, at]).reshape(len(big_b), -1)
    delta = np.array([[d]], float) / total  # the masks as the full sum has them: Tango's z at each outcome
    z = _tango_z(wb[:, None], wc[None, :], n, delta)
    z_seen = _tango_z(np.array([[seen[0]]]), np.array([[seen[1]]]), n, delta)[0, 0]
    inside = (wb[:, None] + wc[None, :] >= band[0]) & (wb[:, None] + wc[None, :] <= band[1])
    masks = np.stack([(inside & (z >= z_seen)).ravel(), (inside & (z <= z_seen)).ravel(),
                      np.ones(inside.size, bool)], axis=1).astype(float)
    tails = p @ masks
    outside = np.maximum(0.0, 1.0 - tails[:, 2])
    if (tails[:, :2].max(axis=0) > line + MARGIN).all():
        return True
    if ((tails[:, :2] + outside[:, None]).max(axis=0) < line - MARGIN).any():
        return False
    return None


def _less(fact: np.ndarray, at: np.ndarray, k: np.ndarray) -> np.ndarray:
    """fact[at] - fact[at - k] for each row's ``at`` (a column) and every outcome's ``k``: each difference made once
    per row and value of k (a few dozen), then spread over the outcomes holding it (thousands); the same floats."""
    return np.take(fact[at] - fact[at - np.arange(int(k.max()) + 1)], k, axis=1)


def _ones(mask: np.ndarray) -> np.ndarray:
    """A mask as the 1.0 and 0.0 that ``p @ mask`` multiplies by (the same product, made without casting it there)."""
    return mask.astype(np.float64)


def _log_comb(a: np.ndarray, k: np.ndarray) -> np.ndarray:
    """log C(a, k) for each count ``a`` (rows) and outcome count ``k`` (columns); -inf where k > a."""
    a, k = np.broadcast_arrays(np.asarray(a, dtype=float)[:, None], np.asarray(k, dtype=float)[None, :])
    ok = k <= a
    rest = np.where(ok, a - k, 0.0)
    return np.where(ok, gammaln(a + 1.0) - gammaln(np.where(ok, k, 0.0) + 1.0) - gammaln(rest + 1.0), -np.inf)


def _tango_z(ob: np.ndarray, oc: np.ndarray, n: int, delta: float) -> np.ndarray:
    """stats._tango_z of every outcome (b, c) at once."""
    big_b = -ob - oc + (2 * n - ob + oc) * delta
    big_c = -oc * delta * (1.0 - delta)
    q = (np.sqrt(np.maximum(0.0, big_b * big_b - 8.0 * n * big_c)) - big_b) / (4.0 * n)
    var, num = n * (2.0 * q + delta * (1.0 - delta)), ob - oc - n * delta
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, num / np.sqrt(np.where(var > 0, var, 1.0)), np.sign(num) * np.inf)
    return np.where((var <= 0) & (num == 0), 0.0, z)
