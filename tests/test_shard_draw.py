"""--shard K/N is a simple random draw of a task's items (the interval's finite-population correction assumes
one): the items at ranks K-1, K-1+N, ... of a seeded order, not every N-th item in release order."""

from __future__ import annotations

import numpy as np
import pytest

from abricot_local.errors import ResultsError, UsageError
from abricot_local.run.merge import unsharded
from abricot_local.run.request import Shard
from abricot_local.tasks import make_task
from abricot_local.tasks.base import TaskOptions
from abricot_local.tasks.selection import drawn, prepare
from conftest import FIXTURE


def _task(**kw):
    return make_task("abricot_abs", TaskOptions(data=(("abricot", str(FIXTURE)),), **kw))


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
    with pytest.raises(UsageError, match="shard 19/20 holds no item"):
        prepare([_task()], None, None, Shard(19, 20))


@pytest.mark.parametrize("count", [1, 2, 5, 11, 30])
@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_the_shards_are_disjoint_cover_every_item_and_differ_by_one_at_most(count, n):
    for seed in (0, 1234, 99):
        places = [Shard(k, n).places(count, seed) for k in range(1, n + 1)]
        assert sorted(sum(places, [])) == list(range(count))
        assert all(p == sorted(p) for p in places)
        assert max(map(len, places)) - min(map(len, places)) <= 1


def test_each_item_lands_in_a_shard_with_probability_one_in_n():
    count, n, seeds = 20, 4, range(2000)  # fixed seeds: the counts below are the same on every run
    hits = np.zeros(count)
    means = []
    for seed in seeds:
        places = Shard(1, n).places(count, seed)
        hits[places] += 1
        means.append(np.mean(places))  # the mean release position: a sorted attribute of the items
    expected = len(seeds) / n  # 500; a binomial's sd is 19.4: 125 is 6.4 sd (every N-th: 0 or 2000)
    assert np.all(np.abs(hits - expected) < 125), hits
    assert abs(np.mean(means) - (count - 1) / 2) < 0.3  # sd 0.05 over the seeds; every N-th gives 8.0, not 9.5


def test_a_shard_of_a_sample_is_a_draw_of_the_task_items():
    """Each of 20 items is in shard 1/3 of --sample 11 with probability 4/20. (Dealing the shard with the
    sample's own stream, [seed, 101], ties it to the sample: chi-square 64 here, not about 19.)"""
    count, sample, seeds = 20, 11, range(20000)
    hits = np.zeros(count)
    for seed in seeds:
        hits[Shard(1, 3).take(drawn(range(count), sample, seed), seed)] += 1
    expected = len(seeds) * 4 / count
    chi2 = float(np.sum((hits - expected) ** 2 / expected))
    assert chi2 < 40, (chi2, hits)  # 19 degrees of freedom: 15.4 with these seeds


def test_merge_places_each_shard_item_and_refuses_a_part_of_another_size():
    ids = [f"i{k}" for k in range(11)]
    parts = [(Shard(k, 3), Shard(k, 3).take(ids, 5)) for k in (1, 2, 3)]
    assert unsharded("t", parts, 5) == ids
    assert unsharded("t", parts, 6) != ids  # another seed deals them otherwise
    short = [parts[0], (parts[1][0], parts[1][1][:-2]), parts[2]]
    with pytest.raises(ResultsError, match=r"shard 1/3 holds 4 item\(s\) where its part of the 9 the shards hold is 3"):
        unsharded("t", short, 5)
