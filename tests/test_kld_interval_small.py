"""The KLD's CI over few items, and what its tokens are: an se over the items below the per-token one is the noise of
a variance read on m - 1 degrees of freedom, so the interval is never narrower than t(m-1) per-token errors
(analysis/kld.item_interval); each item counts whole, its cached prefix's rows in every item that reads it
(backends/kld.LadderSession.credit), so a task's statistics do not depend on the items' order or on --limit."""

from __future__ import annotations

import math

import pytest

from abricot_local.analysis.kld import item_interval, summarise, t975
from abricot_local.backends.fake import FakeBackend
from abricot_local.backends.kld import KlRows, LadderBackend
from abricot_local.backends.options import ScoringOptions
from abricot_local.core import Request
from abricot_local.run.execute import scored


def test_items_that_happen_to_agree_get_no_interval_narrower_than_the_per_token_one():
    """3 items whose KL sums are exactly proportional to their sizes: the spread over the items is 0 (2 degrees of
    freedom say nothing more), the tokens vary: the interval is t(2) per-token errors either side on the log
    scale, wider than llama-perplexity's 1.96."""
    x = [0.1, 0.3, 0.2, 0.2, 0.05, 0.35, 0.4, 0.0, 0.25, 0.15]
    ends = [4, 6, 10]  # sums 0.8, 0.4, 0.8 over 4, 2, 4 tokens: 0.2 a token each
    s = summarise(x, [True] * len(x), 3, ends)
    assert s.mean == pytest.approx(0.2) and s.se_token > 0
    half = t975(2) * s.se_token / s.mean
    assert s.ci95 == pytest.approx((s.mean * math.exp(-half), s.mean * math.exp(half)), rel=1e-12)
    assert s.ci95[1] - s.ci95[0] > 2 * 1.959963984540054 * s.se_token


def test_an_se_over_the_items_above_the_floor_is_kept_to_the_bit():
    sums, counts = [0.5, 2.0, 0.9], [10, 12, 9]
    r = math.fsum(sums) / sum(counts)
    e2 = math.fsum((a - r * n) ** 2 for a, n in zip(sums, counts))
    from abricot_local.core import exact_exp

    half = t975(2) * math.sqrt(3 / 2 * e2) / sum(counts) / r
    assert item_interval(sums, counts, se_token=1e-4) == (r * exact_exp(-half), r * exact_exp(half))
    assert item_interval(sums, counts) == item_interval(sums, counts, se_token=1e-4)


A = "Istruzioni: leggi il testo e rispondi con una parola sola, per favore.\n\n"
B = "Altre istruzioni, diverse e un poco piu lunghe di quelle di prima.\n\n"


def _units(requests: list[Request]) -> list[tuple[int, float]]:
    """Each unit's (token count, KL sum), as run/kld.py marks a task's items."""
    opts = ScoringOptions(engine="prefix")
    rows = KlRows()
    ladder = LadderBackend(FakeBackend("a", opts), [FakeBackend("b", ScoringOptions(engine="prefix", seed=9))],
                           opts, [rows])
    try:
        for _ in scored(requests, ladder):
            rows.mark()
    finally:
        ladder.close()
    starts = [0, *rows.ends[:-1]]
    return [(b - a, math.fsum(rows.kl[a:b])) for a, b in zip(starts, rows.ends)]


def test_each_item_counts_whole_whatever_the_items_before_it():
    """An item's rows are those it has scored alone (its shared prefix's included, decoded once for the items that
    share it), so the items in another order, or fewer of them (--limit), give each item the same unit."""
    items = [Request(f"{pre}il gatto {'nero ' * i}dorme sul divano", (" si", " no"), label=f"i{i}")
             for i, pre in enumerate([A, A, B, A, B])]
    alone = [_units([r])[0] for r in items]
    together = _units(items)
    order = sorted(range(len(items)), key=lambda k: items[k].prefix)  # the loop's order: by prefix, then as given
    assert together == [alone[k] for k in order]
    backwards = _units(items[::-1])
    assert sorted(backwards) == sorted(together)
    s1 = summarise(*_flat(together, len(items)))
    s2 = summarise(*_flat(backwards, len(items)))
    assert (s1.n_tokens, s1.ci95) == (s2.n_tokens, s2.ci95)


def _flat(units: list[tuple[int, float]], m: int):
    """Values whose per-unit sums and counts are ``units`` (for the CI: its units' sums and counts alone)."""
    kl, ends = [], []
    for n, total in sorted(units):
        kl += [total / n] * n
        ends.append(len(kl))
    return kl, [True] * len(kl), m, ends
