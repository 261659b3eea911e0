"""compare's "about N items would settle it" for an accuracy is the least n at which the verdict's own interval rule
settles the margin with the answers changing at the rates seen (equivalence._settle): with no answer changed on 12,
20 or 45 of ABRICOT's 127 items it said "about 91 of the task's 127 items" and "about 308 items like these" at every
size (McNemar's 80%-power sample size at its floor, psi = d), where the set's own exact interval with none changed
lies inside +-0.02 from 80 items and Tango's for items like these, z^2 / (n + z^2) < 0.02, from 133. The figures are
found by search over n with the very function the verdict reads (paired_exact.paired_set_ci for the task's items,
stats.paired_score_ci for items like these); the intervals and verdicts themselves are as they were."""

from __future__ import annotations

import math
import shutil
from types import SimpleNamespace as NS

import pytest
from click.testing import CliRunner

from abricot_local.analysis import equivalence as eq
from abricot_local.analysis import stats
from abricot_local.analysis.paired_exact import paired_set_ci
from abricot_local.cli import cli

Z2 = stats.z_of(0.90) ** 2  # 2.706: Tango's bound with none changed is z^2 / (n + z^2)


def row(b: int, c: int, n: int) -> NS:
    """compare's MetricComparison of an accuracy, duck-typed: b right for ``x`` only, c for ``y`` only, of n."""
    return NS(a="x", b="y", task="t", metric="accuracy", stat="accuracy", n=n, diff=(b - c) / n,
              ci90=(math.nan, math.nan), note="", detail=(("a_only", b), ("b_only", c), ("changed", b + c)))


def at_rates(b: int, c: int, n: int, size: int) -> tuple[int, int]:
    """The changed answers of ``size`` items at the rates seen, each rounded to whole items (c capped at the rest)."""
    bb = math.floor(b * size / n + 0.5)
    return bb, min(math.floor(c * size / n + 0.5), size - bb)


def own_settles(b: int, c: int, n: int, size: int, total: int, margin: float, sign: float) -> bool:
    """The rule, written here: the counts at the rates seen, the set's interval of other - reference (sign: which run
    is the other) against the margin."""
    bb, cc = at_rates(b, c, n, size)
    lo, hi = paired_set_ci(bb, cc, size, total)
    lo, hi = (lo, hi) if sign > 0 else (-hi, -lo)
    return eq.classify(sign * (bb - cc) / size, (lo, hi), margin) != eq.UNSETTLED


def like_settles(b: int, c: int, n: int, size: int, margin: float, sign: float) -> bool:
    lo, hi = stats.paired_score_ci(b * size / n, c * size / n, size, level=0.90)
    lo, hi = (lo, hi) if sign > 0 else (-hi, -lo)
    return eq.classify(sign * (b - c) / n, (lo, hi), margin) != eq.UNSETTLED


@pytest.mark.parametrize("n", [12, 20, 45])
def test_no_answer_changed_of_abricot_s_127_the_figure_is_where_the_rule_s_own_interval_settles(n):
    e = eq.verdict_of(row(0, 0, n), "x", "y", 0.02, 127)
    assert e.kind == e.like_kind == eq.UNSETTLED and e.ci90 == paired_set_ci(0, 0, n, 127)  # the interval as it was
    assert e.like_ci90 == stats.paired_score_ci(0, 0, n, level=0.90)
    lo, hi = paired_set_ci(0, 0, 80, 127)
    assert -0.02 < lo and hi < 0.02 and paired_set_ci(0, 0, 79, 127)[1] > 0.02  # the set's interval settles at 80
    assert e.items == 80 and "about 80 of the task's 127 items would settle it at this discordance" in e.line, e.line
    assert Z2 / (133 + Z2) < 0.02 < Z2 / (132 + Z2)  # Tango's for items like these: from 133, more than the task holds
    assert e.like_items == 133 and "this task cannot settle 0.02 (about 133 items would; it holds 127)" in e.lines[1]
    assert "91 of the task's" not in e.line and "308" not in e.lines[1]  # the power formula's floor, at any n


def test_discotex_s_example_12_of_1600_unchanged_settles_where_the_exact_interval_does():
    """docs/compare.md's example: 143 of the task's 1,600 (it said 259), 133 like these (it said 308)."""
    e = eq.verdict_of(row(0, 0, 12), "x", "y", 0.02, 1600)
    assert e.ci90 == paired_set_ci(0, 0, 12, 1600) and e.kind == eq.UNSETTLED
    assert own_settles(0, 0, 12, 143, 1600, 0.02, 1) and not own_settles(0, 0, 12, 142, 1600, 0.02, 1)
    assert (e.items, e.like_items) == (143, 133)
    assert "about 143 of the task's 1,600 items would settle it" in e.line
    assert "about 133 items like these would settle it" in e.lines[1]


CASES = [(0, 0, 6), (1, 0, 6), (0, 1, 8), (2, 1, 10), (1, 3, 12), (3, 3, 6), (0, 2, 20), (4, 1, 20), (5, 5, 10)]


@pytest.mark.parametrize("total", [30, 40])
def test_the_figure_is_where_the_rule_settles_found_by_scanning_every_n(total):
    """Every n from the one compared to the task's N scanned with the rule (both directions of the pair, several
    margins): the figure settles and the n before it does not; where the scan settles from its first on (with no
    answer changed always; with few changed the rounding to whole items can settle an n and not the next) it is that
    first n, else between it and the n from which every n settles. Items like these: the first n of Tango's at the
    rates seen (no rounding: its intervals nest as n grows)."""
    for b, c, n in CASES:
        for margin in (0.02, 0.1):
            for other, ref, sign in (("x", "y", 1.0), ("y", "x", -1.0)):
                e = eq.verdict_of(row(b, c, n), other, ref, margin, total)
                lo, hi = paired_set_ci(b, c, n, total)
                assert e.ci90 == ((lo, hi) if sign > 0 else (-hi + 0.0, -lo + 0.0))  # the interval as it was
                if e.kind != eq.UNSETTLED:
                    assert e.items is None
                    continue
                scan = [own_settles(b, c, n, size, total, margin, sign) for size in range(n + 1, total + 1)]
                if True not in scan:  # at N the difference is exact: settled unless on the margin
                    assert e.items == stats.MAX_ITEMS and (b - c) / n == -sign * margin, (b, c, n, margin, sign)
                    continue
                first = n + 1 + scan.index(True)
                stable = n + 1 + min(k for k in range(len(scan)) if all(scan[k:]))
                assert first <= e.items <= stable and scan[e.items - n - 1], (b, c, n, margin, sign, e.items)
                assert e.items == n + 1 or not scan[e.items - n - 2]
                if b == c == 0 or first == stable:
                    assert e.items == first == stable, (b, c, n, margin, sign)
                if e.like_kind == eq.UNSETTLED:
                    k = e.like_items
                    assert like_settles(b, c, n, k, margin, sign) and not like_settles(b, c, n, k - 1, margin, sign)
                    assert not any(like_settles(b, c, n, size, margin, sign) for size in range(n + 1, min(k, 300)))


def test_the_figure_moves_with_the_rates_seen_and_is_gone_once_settled():
    """At no change the figure is where the interval with none changed settles, whatever n was compared (it is a
    property of the task and the margin); with answers changed it follows their rate; at that n it is settled."""
    a, b = eq.verdict_of(row(1, 0, 12), "x", "y", 0.02, 1600), eq.verdict_of(row(1, 0, 40), "x", "y", 0.02, 1600)
    assert a.kind == b.kind == eq.UNSETTLED and a.items != b.items and a.like_items != b.like_items
    assert eq.verdict_of(row(0, 0, 100), "x", "y", 0.02, 1600).items == 143
    settled = eq.verdict_of(row(0, 0, 143), "x", "y", 0.02, 1600)
    assert settled.kind == eq.EQUIVALENT and settled.items is None
    worse = eq.verdict_of(row(0, 3, 40), "x", "y", 0.02, 1600)  # -0.075 at this rate: settles as worse
    assert worse.kind == eq.UNSETTLED and own_settles(0, 3, 40, worse.items, 1600, 0.02, 1)
    assert eq.verdict_of(row(*at_rates(0, 3, 40, worse.items), worse.items), "x", "y", 0.02, 1600).kind == eq.WORSE
    on = eq.verdict_of(row(0, 1, 50), "x", "y", 0.02, 1600)  # -0.02: on the margin, no number of items settles it
    assert on.items == on.like_items == stats.MAX_ITEMS and "no number of items settles it" in on.line


def test_compare_on_abricot_says_the_rule_s_figure(tmp_path, abricot_file, monkeypatch):
    """The reviewer's repro: two fake runs of 12 ABRICOT items, no answer changed, compared."""
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--protocol", "paper",
                                 "--data", f"abricot={abricot_file}", "--n-ctx", "8192", "--sample", "12", "--out",
                                 str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    r = CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "about 80 of the task's 127 items would settle it at this discordance" in flat
    assert "this task cannot settle 0.02 (about 133 items would; it holds 127)" in flat
