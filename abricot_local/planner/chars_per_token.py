"""Characters per token of tokenizer families on the tasks' own text, measured: how ``run
--dry-run`` estimates the tokens of a model whose file (or vocabulary) is not on this machine.

``MEASURED`` is printed by ``bench/chars_per_token.py`` (``--check`` compares it with a new
measurement): family -> (vocabulary size, {task: characters per token, ``"*"``: over every
task's text}). The text is every item's context as scored (shots included), default seed,
3 shots, paper prompts: the DISCOTEX sub-task 1 test release (1600 items) and the invented
ABRICOT fixture (tests/data/abricot_invented_fixture.csv: 18 rows, so ``abricot_*`` ratios
describe the prompts' template more than the real release's sentences). Tokens: the family's
tokenizer in llama.cpp (llama-cpp-python 0.3.36, a vocabulary-only load), without BOS; the
tokenizers are llama.cpp's vocabulary-only GGUFs (llama-spm, llama-bpe, qwen2, phi-3, gpt-2),
Gemma 3 270M (gemma3) and SmolLM2-135M (smollm). A family the registry names but nobody
measured (mistral-v3-spm, minerva-spm, velvet-bpe) gets the median of the measured ones, and
the plan says so.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

MEASURED = {
    "gemma3": (262144, {"*": 3.986, "discotex": 4.01, "abricot_abs": 3.364, "abricot_inc": 3.397}),
    "gpt-2": (50257, {"*": 2.785, "discotex": 2.796, "abricot_abs": 2.457, "abricot_inc": 2.482}),
    "llama-bpe": (128256, {"*": 3.484, "discotex": 3.497, "abricot_abs": 3.073, "abricot_inc": 3.143}),
    "llama-spm": (32000, {"*": 3.248, "discotex": 3.269, "abricot_abs": 2.675, "abricot_inc": 2.746}),
    "phi-3": (32064, {"*": 3.248, "discotex": 3.269, "abricot_abs": 2.675, "abricot_inc": 2.746}),
    "qwen2": (151936, {"*": 3.462, "discotex": 3.475, "abricot_abs": 3.073, "abricot_inc": 3.143}),
    "smollm": (49152, {"*": 2.795, "discotex": 2.805, "abricot_abs": 2.519, "abricot_inc": 2.544}),
}


@dataclass(frozen=True)
class Ratio:
    """Characters per token for one family on one task's text, and where the number comes from."""

    chars_per_token: float
    n_vocab: int | None  # the family's vocabulary size (None: not measured)
    basis: str  # for the plan: "gemma3: 4.01 chars/token measured on discotex"


def ratio(family: str, task: str) -> Ratio:
    """The measured ratio of ``family`` on ``task``'s text (its all-task ratio for a task not
    measured); for a family not measured, the median of the measured families' ratios."""
    if family in MEASURED:
        n_vocab, ratios = MEASURED[family]
        on = task if task in ratios else "every measured task"
        value = ratios.get(task, ratios["*"])
        return Ratio(value, n_vocab, f"{family}: {value:.2f} chars/token measured on {on}")
    value = statistics.median(r.get(task, r["*"]) for _, r in MEASURED.values())
    what = f"tokenizer family {family} not measured" if family else "tokenizer family unknown"
    return Ratio(value, None, f"{what}: {value:.2f} chars/token, the median of the measured families")
