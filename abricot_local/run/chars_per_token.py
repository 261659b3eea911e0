"""Characters per token of tokenizer families on the tasks' own text, measured: how ``run
--dry-run`` estimates the tokens of a model whose file (or vocabulary) is not on this machine.

``MEASURED`` (family -> (vocabulary size, characters per token over every task's text)) and
each task's own ``chars_per_token`` (family -> ratio on its text: a task declares it) are printed
by ``bench/chars_per_token.py`` (``--check`` compares them with a new measurement). The text
is every item's context as scored (shots included), default seed, 3 shots, paper prompts: the DISCOTEX sub-task 1 test release (1600 items) and the invented
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
    "gemma3": (262144, 3.986),
    "gpt-2": (50257, 2.785),
    "llama-bpe": (128256, 3.484),
    "llama-spm": (32000, 3.248),
    "phi-3": (32064, 3.248),
    "qwen2": (151936, 3.462),
    "smollm": (49152, 2.795),
}


@dataclass(frozen=True)
class Ratio:
    """Characters per token for one family on one task's text, and where the number comes from."""

    chars_per_token: float
    n_vocab: int | None  # the family's vocabulary size (None: not measured)
    basis: str  # for the plan: "gemma3: 4.01 chars/token measured on discotex"


def ratio(family: str, task=None) -> Ratio:
    """The ratio of ``family`` on ``task``'s text (a tasks.base.Task: the ratio it declares), else
    on every measured task's text; for a family not measured, the median of the measured families'."""
    own = getattr(task, "chars_per_token", {}) or {}
    if family in MEASURED or family in own:
        n_vocab, overall = MEASURED.get(family, (None, None))
        value = own.get(family, overall)
        on = task.name if family in own else "every measured task"
        return Ratio(value, n_vocab, f"{family}: {value:.2f} chars/token measured on {on}")
    value = statistics.median(own.values() or [r for _, r in MEASURED.values()])
    what = f"tokenizer family {family} not measured" if family else "tokenizer family unknown"
    return Ratio(value, None, f"{what}: {value:.2f} chars/token, the median of the measured families")
