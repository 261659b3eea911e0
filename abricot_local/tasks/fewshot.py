"""lm-evaluation-harness's default few-shot sampler, draw for draw.

What "3-shot" means in a number published with lm-eval (``--num_fewshot K``, the default
``ContextSampler``, ``fewshot_random_seed`` 1234): one ``random.Random(seed)`` per task, and
for each evaluated item, in the data's order, ``rnd.sample(pool, n)`` with

- ``n = K + 1`` when the pool is the evaluated split itself: the item is removed from the
  draw if it was drawn, and the first K that remain are its shots;
- ``n = K`` when the pool is another split (a train split): the K drawn are the shots
  (lm-eval also drops a pool document equal to the item; ``same`` says which are).

So every item has its own shots, and the draw for item k depends on the draws for items
0..k-1: draws are made for every item of the data in order, then selected (``--sample``,
``--limit``, ``--shard``, order and resume never change an item's shots).

``random.sample`` picks by index from the population's length alone, so sampling
``range(len(pool))`` gives the indices lm-eval's sample of the documents would.
"""

from __future__ import annotations

import random
from typing import Callable

from abricot_local.errors import TaskError, opt

LM_EVAL_SEED = 1234  # lm-eval's default fewshot_random_seed (simple_evaluate, the CLI)


def lm_eval_draws(n_items: int, pool_size: int, shots: int, *, seed: int = LM_EVAL_SEED,
                  same_split: bool,
                  same: Callable[[int, int], bool] | None = None) -> list[tuple[int, ...]]:
    """The pool indices of each item's shots, for items ``0..n_items-1`` in the data's order.

    ``same_split``: the pool is the evaluated data (item i is pool document i).
    ``same(item, j)``: whether pool document j equals item ``item`` (lm-eval drops it);
    by default, on the same split, ``j == item``, and on another split none is.
    """
    if shots < 0:
        raise TaskError(f"{opt('shots')} must be 0 or more")
    if not shots:
        return [() for _ in range(n_items)]
    n = shots + 1 if same_split else shots
    if n > pool_size:
        where = "the data" if same_split else "the few-shot pool"
        raise TaskError(f"{opt('shots', shots)} needs {n} documents to draw from; {where} has {pool_size}")
    if same is None:
        same = (lambda item, j: j == item) if same_split else (lambda item, j: False)
    rnd = random.Random(seed)
    draws = []
    for item in range(n_items):
        drawn = rnd.sample(range(pool_size), n)
        draws.append(tuple(j for j in drawn if not same(item, j))[:shots])
    return draws
