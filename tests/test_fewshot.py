"""The few-shot sampler against lm-eval's rule as PROTOCOL.md states it (not the tool's code)."""

import random

import pytest

from abricot_local.errors import TaskError
from abricot_local.tasks.fewshot import lm_eval_draws


def _harness_rule(docs, k, *, same_split, seed=1234):
    """lm-eval's ContextSampler.get_context, over documents (dicts), one generator per task."""
    rnd = random.Random(seed)
    out = []
    for doc in docs:
        drawn = rnd.sample(docs if same_split else POOL, k + 1 if same_split else k)
        out.append([x for x in drawn if x != doc][:k])
    return out


DOCS = [{"id": f"D{i}", "text": f"frase {i}"} for i in range(127)]
POOL = [{"id": f"T{i}", "text": f"train {i}"} for i in range(400)]


def test_same_split_draws_match_the_harness_document_for_document():
    want = _harness_rule(DOCS, 3, same_split=True)
    got = lm_eval_draws(len(DOCS), len(DOCS), 3, same_split=True)
    assert [[DOCS[j] for j in d] for d in got] == want
    assert all(len(d) == 3 and i not in d for i, d in enumerate(got))
    assert len({d for d in got}) > 100  # every item its own shots, not one draw for all


def test_other_split_draws_match_the_harness():
    want = _harness_rule(DOCS[:50], 2, same_split=False)
    got = lm_eval_draws(50, len(POOL), 2, same_split=False)
    assert [[POOL[j] for j in d] for d in got] == want


def test_a_prefix_of_the_items_has_the_same_draws():
    full = lm_eval_draws(127, 127, 3, same_split=True)
    assert lm_eval_draws(20, 127, 3, same_split=True) == full[:20]


def test_zero_shots_and_too_few_documents():
    assert lm_eval_draws(3, 3, 0, same_split=True) == [(), (), ()]
    with pytest.raises(TaskError, match="needs 4 documents"):
        lm_eval_draws(3, 3, 3, same_split=True)
