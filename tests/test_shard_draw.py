"""--shard K/N is a simple random draw of a task's items (the interval's finite-population correction assumes
one): the items at ranks K-1, K-1+N, ... of the task's nested order (tasks.selection.dealt: the one seeded
permutation of all its items whose first n are --sample n's), not every N-th item in release order; and shard
K of --sample n lies inside shard K of every larger sample (a grown shard keeps every item it scored)."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from abricot_local.errors import ResultsError, UsageError
from abricot_local.run.merge import unsharded
from abricot_local.run.request import Shard
from abricot_local.tasks import make_task
from abricot_local.tasks.base import TaskOptions
from abricot_local.tasks.selection import dealt, kept, prepare, sample_order
from conftest import FIXTURE

SEEDS = range(8000)  # fixed seeds: every count below is the same on every run (nothing to flake)


def _task(**kw):
    return make_task("abricot_abs", TaskOptions(data=(("abricot", str(FIXTURE)),), **kw))


def part(available, seed, shard, *, limit=None, sample=None) -> list[int]:
    """The places in the task's data (release order) of shard ``shard``'s items."""
    positions = kept(available, seed, limit, sample)
    return [positions[i] for i in shard.places(dealt(positions, available, seed))]


def chi2(counts: Counter, cells: list) -> float:
    expected = sum(counts.values()) / len(cells)
    assert set(counts) <= set(cells)
    return sum((counts.get(c, 0) - expected) ** 2 / expected for c in cells)


def test_a_shard_of_ordered_data_is_not_every_nth_item_and_the_shards_cover_it():
    items = _task().items()  # released in source order (opensubtitles / wikihow), as the real files are grouped
    ids = [it.id for it in items]
    parts = [[it.id for it in prepare([_task()], None, None, Shard(k, 3))[0].items] for k in (1, 2, 3)]
    assert parts[0] != ids[0::3]  # a seeded draw, not the release order's every third item
    assert all(p == sorted(p, key=ids.index) for p in parts)  # each kept in release order
    assert sorted(sum(parts, [])) == sorted(ids) and max(map(len, parts)) - min(map(len, parts)) <= 1
    seven = [it.id for it in prepare([_task(seed=7)], None, None, Shard(1, 3))[0].items]
    assert seven != parts[0]  # the task's seed draws it
    sampled = prepare([_task()], None, 11, Shard(2, 3))[0].items  # a shard of --sample 11's items
    assert {it.id for it in sampled} < {it.id for it in prepare([_task()], None, 11)[0].items}
    assert [it.id for it in prepare([_task()], 5, None, Shard(1, 2))[0].items] != ids[0:5:2]
    assert {it.id for it in prepare([_task()], 5, None, Shard(1, 2))[0].items} < set(ids[:5])  # --limit's first 5
    run = prepare([_task()], None, 11, Shard(2, 3))[0]
    assert [ids[p] for p in run.positions] == [it.id for it in run.items]  # each item's place in the data
    with pytest.raises(UsageError, match="shard 19/20 holds no item"):
        prepare([_task()], None, None, Shard(19, 20))


def test_the_shards_deal_the_nested_order():
    """Shard K of the whole task is ranks K-1, K-1+N, ... of --sample's one permutation; of --sample n, those
    of its first n ranks."""
    for seed in (0, 1234):
        order = sample_order(30, seed)
        assert part(30, seed, Shard(2, 3)) == sorted(order[1::3])
        assert part(30, seed, Shard(2, 3), sample=13) == sorted(order[:13][1::3])
        first = [p for p in order if p < 8]  # --limit 8: the same order restricted to the first 8
        assert part(30, seed, Shard(1, 3), limit=8) == sorted(first[0::3])


@pytest.mark.parametrize("available", [1, 2, 5, 11, 30])
@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_the_shards_are_disjoint_cover_every_item_and_differ_by_one_at_most(available, n):
    for seed, limit, sample in itertools.product((0, 1234, 99), (None, 1, 4), (None, 1, 3, 40)):
        if limit is not None and sample is not None:
            continue  # refused together
        positions = kept(available, seed, limit, sample)
        places = [part(available, seed, Shard(k, n), limit=limit, sample=sample) for k in range(1, n + 1)]
        assert sorted(sum(places, [])) == list(positions)
        assert all(p == sorted(p) for p in places)
        assert max(map(len, places)) - min(map(len, places)) <= 1


@pytest.mark.parametrize("available", [5, 11, 30])
@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_a_shard_of_a_sample_lies_inside_that_shard_of_every_larger_sample(available, n):
    for seed in (0, 1234, 99):
        for k in range(1, n + 1):
            parts = [set(part(available, seed, Shard(k, n), sample=m)) for m in range(1, available + 2)]
            assert all(a <= b for a, b in zip(parts, parts[1:])), (seed, k)
            assert parts[-1] == set(part(available, seed, Shard(k, n)))  # a sample of every item: the whole task's


def test_a_grown_shard_of_the_task_keeps_its_items():
    for k in (1, 2, 3):
        small, large = ({it.id for it in prepare([_task()], None, m, Shard(k, 3))[0].items} for m in (9, 17))
        assert small < large and len(large) - len(small) >= 2


@pytest.mark.parametrize("what, limit, sample, size", [
    ("the whole task", None, None, 3),  # shard 1/2 of 6 items: 3 of them, each of the 20 sets 1/20
    ("--sample 4", None, 4, 2),  # shard 1/2 of --sample 4: 2 of the 6 items, each of the 15 pairs 1/15
    ("--limit 4", 4, None, 2),  # shard 1/2 of --limit 4: 2 of the first 4, each of the 6 pairs 1/6
])
def test_a_shard_is_a_simple_random_draw(what, limit, sample, size):
    """Every set of the shard's size is equally likely (chi-square of the set counts over 8000 seeds; the
    bound is the 1e-6 tail of its degrees of freedom: 56, 47, 35)."""
    available = 6
    counts = Counter(tuple(part(available, seed, Shard(1, 2), limit=limit, sample=sample)) for seed in SEEDS)
    cells = list(itertools.combinations(range(limit or available), size))
    bound = {20: 56, 15: 47, 6: 35}[len(cells)]
    assert chi2(counts, cells) < bound, (what, counts)  # 21.5, 13.3, 5.4 with these seeds


def test_a_shard_of_a_sample_is_not_tied_to_the_sample_stream():
    """The shard takes ranks of the same permutation the sample is the first n of; a fresh permutation of the n
    drawn items from the same stream, [seed, 101], would tie the shard to the sample: some pairs far likelier."""
    available, n = 6, 4
    ours, tied = Counter(), Counter()
    for seed in SEEDS:
        positions = kept(available, seed, sample=n)
        ours[tuple(part(available, seed, Shard(1, 2), sample=n))] += 1
        tied[tuple(positions[i] for i in Shard(1, 2).places(sample_order(n, seed)))] += 1
    cells = list(itertools.combinations(range(available), 2))
    assert chi2(ours, cells) < 47  # 13.3
    assert chi2(tied, cells) > 200  # 307: the check above could fail, and does for the tied deal


def test_each_item_lands_in_a_shard_with_probability_one_in_n():
    count, n = 20, 4
    hits = np.zeros(count)
    means = []
    for seed in range(2000):
        places = part(count, seed, Shard(1, n))
        hits[places] += 1
        means.append(np.mean(places))  # the mean release position: a sorted attribute of the items
    expected = 2000 / n  # 500; a binomial's sd is 19.4: 125 is 6.4 sd (every N-th: 0 or 2000)
    assert np.all(np.abs(hits - expected) < 125), hits
    assert abs(np.mean(means) - (count - 1) / 2) < 0.3  # sd 0.05 over the seeds; every N-th gives 8.0, not 9.5


def test_a_shard_of_a_sample_is_a_draw_of_the_task_items():
    """Each of 20 items is in shard 1/3 of --sample 11 with probability 4/20 (chi-square 14.5 with these seeds; a
    fresh permutation of the 11 from the sample's own stream is far from it: the test above)."""
    count, sample = 20, 11
    hits = np.zeros(count)
    for seed in SEEDS:
        hits[part(count, seed, Shard(1, 3), sample=sample)] += 1
    expected = len(SEEDS) * 4 / count
    chi = float(np.sum((hits - expected) ** 2 / expected))
    assert chi < 50, (chi, hits)  # 19 degrees of freedom (1e-6 tail: 56): 14.5 with these seeds


def test_merge_places_each_shard_item_and_refuses_a_part_of_another_size():
    ids = [f"i{k}" for k in range(30)]
    for limit, sample in ((None, None), (None, 11), (11, None)):
        positions = kept(30, 5, limit, sample)
        whole = [ids[p] for p in positions]
        parts = [(Shard(k, 3), [ids[p] for p in part(30, 5, Shard(k, 3), limit=limit, sample=sample)])
                 for k in (1, 2, 3)]
        assert unsharded("t", parts, 30, 5, limit=limit, sample=sample) == whole
        if limit is None:
            assert unsharded("t", parts, 30, 6, limit=limit, sample=sample) != whole  # another seed: otherwise
    parts = [(Shard(k, 3), [ids[p] for p in part(30, 5, Shard(k, 3), sample=11)]) for k in (1, 2, 3)]
    short = [parts[0], (parts[1][0], parts[1][1][:-1]), (parts[2][0], parts[2][1] + ["extra"])]
    with pytest.raises(ResultsError, match=r"shard 2/3 holds 3 item\(s\) where its part of the 11 the shards hold "
                                           r"is 4"):
        unsharded("t", short, 30, 5, sample=11)
    with pytest.raises(ResultsError, match=r"the shards hold 10 item\(s\) where the run keeps 11 of the 30"):
        unsharded("t", [parts[0], (parts[1][0], parts[1][1][:-1]), parts[2]], 30, 5, sample=11)
