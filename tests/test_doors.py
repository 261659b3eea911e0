"""One schedule through every door (issue 36 items 2 and 3), on the real Gemma 3 270M.

`run` (the API's `evaluate`, which is `run`) and the lm-eval model score the same text with the
same cuts, because both take the cached prefix from the text alone (core.cached_prefix): the
log-likelihoods are bit-identical on every shipped task x protocol x prompt variant, at 0 shots
and at k shots. The shipped lm-eval tasks (abricot_local/lm_eval/tasks/) run through real lm-eval
build byte for byte `run`'s contexts, and score them to `run`'s numbers.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

import pytest  # noqa: E402

from abricot_local.core import cached_prefix  # noqa: E402
from abricot_local.record import read_samples  # noqa: E402
from conftest import require_lm_eval as _lm_eval  # noqa: E402

pytestmark = pytest.mark.real

# (task, prompt variant, shots): every shipped task x wording, 0 and k shots (the ABRICOT variants are its
# two protocols' prompts: paper, calamita); one item each (the first: its shots drawn as for every item)
CASES = [(t, v, k) for t in ("abricot_abs", "abricot_inc") for v in ("paper", "calamita") for k in (0, 3)] + \
    [("discotex", v, k) for v in ("card", "ita-bench") for k in (0, 2)]
# lm-eval task -> the `run` case whose contexts it must build (the lm-eval test below covers these)
PUBLISHED = {"abricot_abs_paper": ("abricot_abs", "paper", 3), "abricot_inc_paper": ("abricot_inc", "paper", 3),
             "abricot_abs_calamita": ("abricot_abs", "calamita", 0),
             "abricot_inc_calamita": ("abricot_inc", "calamita", 0),
             "discotex_card": ("discotex", "card", 2), "discotex_itabench": ("discotex", "ita-bench", 2)}


@pytest.fixture(scope="module")
def run_door(gemma_path, abricot_file, discotex_dir, tmp_path_factory):
    """(task, variant, shots) -> the samples `evaluate` (as `run`) wrote, 2 threads."""
    from abricot_local import evaluate

    out = {}
    groups: dict = {}
    for task, variant, shots in CASES:
        family = "abricot_abs,abricot_inc" if task.startswith("abricot") else task
        groups.setdefault((family, shots), set()).add(variant)
    for (tasks, shots), variants in groups.items():
        folder = tmp_path_factory.mktemp("run-door")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = evaluate(str(gemma_path), tasks, shots=shots, prompt_variant=",".join(sorted(variants)), limit=1,
                           data={"abricot": str(abricot_file)}, data_dir=str(discotex_dir), threads=2,
                           out=folder / "out", progress=False)
        assert run.record.provenance.schedule["version"] == "prefix|trunk|tail/v2"
        for key in run.tasks:
            samples = read_samples(Path(run.path) / f"samples-{key}.jsonl")
            entry = run.record.tasks[key]
            assert len(samples) == 1
            out[(key.split("@")[0].split("~")[0], entry.config["prompt_variant"], shots)] = samples
    return out


def test_run_and_the_lm_eval_model_give_the_same_log_likelihoods_bit_for_bit(run_door, gemma_path):
    from abricot_local.lm_eval import requests as lm_requests

    assert sorted(run_door) == sorted(CASES)
    opened = lm_requests.open_model({"model": str(gemma_path), "threads": 2})
    try:
        for case in sorted(set(CASES) - set(PUBLISHED.values())):  # those: through real lm-eval, below
            samples = run_door[case]
            pairs = [(s.context, c) for s in samples for c in s.continuations]
            got = [lp for lp, _ in lm_requests.loglikelihood(opened.backend, pairs)]
            want = [lp for s in samples for lp in s.logprobs]
            assert got == want, case
    finally:
        opened.backend.close()
    # the rule matters here: calamita's prefix runs to the blank line before "Rispondi...", into the item
    calamita = run_door[("abricot_abs", "calamita", 3)][0]
    assert calamita.context[len(cached_prefix(calamita.context)):].startswith("Rispondi esclusivamente")


def _lm_eval_samples(gemma_path, tasks, metadata, limit, **kw):
    import lm_eval
    from lm_eval.tasks import TaskManager

    import abricot_local.lm_eval.model  # noqa: F401  registers "abricot-local" (lm-eval 0.4.13)
    from abricot_local.lm_eval.tasks import TASKS_PATH

    manager = TaskManager(include_path=str(TASKS_PATH), include_defaults=False, metadata=metadata)
    res = lm_eval.simple_evaluate(model="abricot-local", model_args=f"model={gemma_path},threads=2", tasks=tasks,
                                  limit=limit, log_samples=True, task_manager=manager, **kw)
    return res, {t: sorted(s, key=lambda d: d["doc_id"]) for t, s in res["samples"].items()}


def test_the_shipped_lm_eval_tasks_build_runs_contexts_and_numbers(run_door, gemma_path, abricot_file, discotex_dir):
    _lm_eval()
    a_res, abricot = _lm_eval_samples(gemma_path, ["abricot_paper", "abricot_calamita"], {"data": str(abricot_file)},
                                      1)
    _, discotex = _lm_eval_samples(gemma_path, ["discotex_card", "discotex_itabench"],
                                   {"data_dir": str(discotex_dir)}, 1, num_fewshot=2)
    got = {**abricot, **discotex}
    assert sorted(got) == sorted(PUBLISHED)
    for name, case in PUBLISHED.items():
        for doc, want in zip(got[name], run_door[case], strict=False):
            contexts = {a[0] for a in doc["arguments"]}
            assert contexts == {want.context}, name  # byte for byte
            assert [a[1] for a in doc["arguments"]] == list(want.continuations), name
            assert [r[0][0] for r in doc["resps"]] == list(want.logprobs), name  # bit for bit
            assert doc["target"] == want.gold, name
    for name in ("abricot_abs_paper", "abricot_inc_calamita"):  # Pearson, the fork's metric, is reported
        assert "pearson,none" in a_res["results"][name]
