"""The bench scripts' own logic: llama-perplexity's multiple-choice file and log, the engines'
work counted without a model, the random-weight GGUF shapes, and gpu.sh's CPU path."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import perplexity_mc as pmc  # noqa: E402
import random_gguf  # noqa: E402
import scale  # noqa: E402
from invented_data import write_discotex  # noqa: E402

from abricot_local.backends.fake import N_VOCAB, FakeBackend  # noqa: E402
from abricot_local.backends.options import ScoringOptions  # noqa: E402
from abricot_local.tasks.selection import prepare  # noqa: E402
from abricot_local.tasks import make_task  # noqa: E402
from abricot_local.tasks.base import TaskOptions  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "abricot_invented_fixture.csv"


def discotex_items(tmp_path, n=8):
    folder = write_discotex(tmp_path / "discotex", per_source=n // 2)
    task = make_task("discotex", TaskOptions(data_dir=str(folder), allow_download=False))
    return list(prepare([task], None)[0].items)


# -- llama-perplexity's --multiple-choice file -------------------------------------------------
def test_multiple_choice_file_round_trips_through_perplexity_cpp_reader(tmp_path):
    tasks = [("Qual è la capitale? «città»\n", ["Roma", "Parigi", "Tōkyō"], [1, 0, 0]),
             ("Secondo", ["A", "B"], [0, 1])]
    path = tmp_path / "mc.bin"
    pmc.write_mc(path, tasks)
    assert pmc.read_mc(path) == [(q, a, lab, [], []) for q, a, lab in tasks]
    raw = path.read_bytes()
    assert struct.unpack_from("<I", raw, 0)[0] == 2
    second = struct.unpack_from("<I", raw, 8)[0]  # the offset of task 2 points at its question
    assert raw[second + 4 : second + 4 + len(b"Secondo")] == b"Secondo"
    path.write_bytes(raw[:-1])
    with pytest.raises(ValueError):
        pmc.read_mc(path)


def test_discotex_items_become_answers_without_their_space_and_gold_labels(tmp_path):
    items = discotex_items(tmp_path)
    tasks = pmc.gold_tasks(items)
    for it, (question, answers, labels) in zip(items, tasks):
        assert question == it.context
        assert [question + " " + a for a in answers] == [it.context + c for c in it.continuations]
        assert labels.index(1) == it.gold and sum(labels) == 1


def test_bit_copies_spell_the_picked_answer(tmp_path):
    items = discotex_items(tmp_path)
    tasks = pmc.bit_tasks(items)
    assert len(tasks) == len(items) * pmc.n_bits(5) == len(items) * 3
    for chosen in range(5):  # a scorer that always picks answer `chosen`: its correct flags
        flags = [labels[chosen] == 1 for _, _, labels in tasks]
        assert pmc.picked_from_bits(flags, [5] * len(items)) == [chosen] * len(items)


def test_perplexity_log_gives_each_tasks_correctness_and_the_counters():
    flags = [True, False, False, True, True]
    rows, hits = [], 0
    for n, ok in enumerate(flags, 1):
        hits += ok
        rows.append(f"{n}\t{100.0 * hits / n:.8f}")
    text = ("0.04.268.882 I system_info: n_threads = 2 (n_threads_batch = 2) / 2 | CPU : AVX2 = 1 | FMA = 1 |\n"
            "0.04.268.925 I multiple_choice_score: reading tasks0.04.269.042 I multiple_choice_score: preparing "
            "task data0.04.316.812 I multiple_choice_score : calculating TruthfulQA score over 5 tasks.\n"
            "task\tacc_norm\n" + "\n".join(rows) + "\n\n"
            "1.02.500.000 I Final result: 60.0000 +/- 24.4949\n"
            "llama_perf_context_print:        load time =     812.50 ms\n"
            "llama_perf_context_print: prompt eval time =   40000.00 ms /  9000 tokens (    4.44 ms per token,   225.00 tokens per second)\n"
            "llama_perf_context_print:        eval time =       0.00 ms /     1 runs   (    0.00 ms per token,      inf tokens per second)\n"
            "llama_perf_context_print:       total time =   43000.25 ms /  9001 tokens\n")
    got = pmc.parse_log(text)
    assert got["correct"] == flags
    assert got["perf"]["prompt eval time"] == (40000.0, 9000)
    assert got["perf"]["total time"][0] - got["perf"]["load time"][0] == pytest.approx(42187.75)
    assert "AVX2 = 1" in got["system_info"]
    assert got["score_s"] == pytest.approx(62.5 - 4.316812)


def test_plan_replays_how_perplexity_packs_tasks_into_decode_calls():
    tasks = [(100, [1] * 5)] * 3  # 105 tokens each
    assert pmc.plan(tasks, n_ctx=250, max_seq=10, n_batch=512) == (315, 2)  # 2 + 1 tasks
    assert pmc.plan(tasks, n_ctx=250, max_seq=5, n_batch=512) == (315, 3)  # one task per batch (5 answers)
    assert pmc.plan(tasks, n_ctx=400, max_seq=20, n_batch=100) == (315, 4)  # all three, cut every 100 tokens
    with pytest.raises(SystemExit):
        pmc.plan(tasks, n_ctx=100, max_seq=5, n_batch=512)


def test_timing_pairs_each_of_our_runs_with_the_llama_perplexity_run_right_after_it():
    assert pmc.ENGINES == ("prefix", "single")  # rounds run prefix, theirs, single, theirs
    t = pmc.timing({"rounds": {"theirs": [10.0, 12.0, 20.0, 24.0], "prefix": [8.0, 16.0], "single": [10.0, 12.0]}})
    assert t["prefix"]["paired"] == [10 / 8, 20 / 16] and t["single"]["paired"] == [12 / 10, 24 / 12]
    assert (t["theirs"]["best"], t["theirs"]["median"], t["prefix"]["best"]) == (10.0, 16.0, 8.0)


# -- the engines' work, counted without a model ------------------------------------------------
@pytest.mark.parametrize("engine", ["naive", "single", "prefix", "batched"])
def test_engine_work_counts_what_the_engine_decodes(tmp_path, engine):
    from throughput import engine_work, load_items

    items = discotex_items(tmp_path) + load_items("abricot_abs", None, None, str(FIXTURE))
    opts = ScoringOptions(engine=engine, n_batch=64)  # small calls: chunking is counted too
    fake = FakeBackend("fake", opts)
    fake.n_vocab = N_VOCAB
    counted = engine_work(fake, items, opts)
    from abricot_local.run.execute import score_items

    for _ in score_items(items, fake):
        pass
    assert (counted.tokens, counted.decode_calls) == (fake.counters.tokens, fake.counters.decode_calls)
    assert counted.tokens > 0


# -- the random-weight models ------------------------------------------------------------------
@pytest.mark.parametrize("key, billions", [("1b", 1.24), ("3b", 3.21), ("7b", 7.24)])
def test_shapes_have_the_parameters_of_the_models_they_copy(key, billions):
    # Llama-3.2-1B: 1.24B, Llama-3.2-3B: 3.21B, Mistral-7B-v0.1: 7.24B (their model cards)
    assert random_gguf.n_params(random_gguf.SHAPES[key]) / 1e9 == pytest.approx(billions, rel=0.01)


# the test below, its body in a process of its own started once the tests are collected (conftest.start_early): it
# writes a GGUF of 32,000 tokens and opens two vocabularies, beside the suite's other tests; each check as it was
RANDOM_GGUF = """
import sys
sys.path[:0] = sys.argv[1:3]  # the package the suite imports, and bench/
from pathlib import Path
import numpy as np
import random_gguf
from abricot_local.backends.llama_cpp.backend import LlamaCppBackend, LlamaCppOptions
from abricot_local.gguf.check import read_header
vocab_dir, out = Path(sys.argv[3]), Path(sys.argv[4])
tiny = random_gguf.Shape("tiny", "nothing", 32000, 64, 2, 4, 2, 128, True, random_gguf.SPM, 10000.0)
random_gguf.write_random_gguf(tiny, vocab_dir / random_gguf.SPM, out)
header = read_header(out)  # our reader of what the gguf package wrote (its own reader parses 32000 tokens: seconds)
assert {t.name: t.shape[::-1] for t in header.tensors} == dict(random_gguf.tensor_shapes(tiny))
assert random_gguf.gguf_params(out) == random_gguf.n_params(tiny)
up = next(t for t in header.tensors if t.name == "blk.0.ffn_up.weight")
rows, cols = dict(random_gguf.tensor_shapes(tiny))[up.name]
assert up.type_name == "F16" and up.nbytes == 2 * rows * cols
weights = np.fromfile(out, np.float16, count=up.nbytes // 2, offset=up.start).astype(np.float32)
assert 0.015 < weights.std() < 0.025, weights.std()
text = "Indica la frase che rappresenta la continuazione del paragrafo."
ours = LlamaCppBackend(out, LlamaCppOptions(vocab_only=True))
theirs = LlamaCppBackend(vocab_dir / random_gguf.SPM, LlamaCppOptions(vocab_only=True))
try:
    assert ours.tokenize(text) == theirs.tokenize(text)
    assert ours.metadata("llama.block_count") == "2"
finally:
    ours.close()
    theirs.close()
print("checked")
"""


def early_children(tmp_path_factory, vocab_dir=None) -> dict:
    """RANDOM_GGUF in a fresh process (a private cache and config), the vocabularies where the suite finds them
    (none: no child yet, the test's fixture says why)."""
    import abricot_local
    import realdata
    from conftest import Early, isolated_env

    try:
        vocab_dir = vocab_dir or realdata.obtain(realdata.VOCAB)
    except realdata.Missing:
        return {}
    root = tmp_path_factory.mktemp("random-gguf")
    return {"random_gguf": Early([sys.executable, "-c", RANDOM_GGUF, str(Path(abricot_local.__file__).parents[1]),
                                  str(ROOT / "bench"), str(vocab_dir), str(root / "tiny.gguf")], timeout=300,
                                 cwd=root, env={**os.environ, **isolated_env(root)})}


@pytest.fixture(scope="module")
def random_gguf_child(tmp_path_factory, vocab_dir):
    from conftest import early_children_of

    child = early_children_of(__name__, early_children, tmp_path_factory).get("random_gguf")
    child = child or early_children(tmp_path_factory, vocab_dir)["random_gguf"]
    yield child
    child.close()


def test_random_gguf_has_the_shape_and_the_tokenizer(random_gguf_child):
    r = random_gguf_child.result()
    assert r.returncode == 0 and r.stdout.split() == ["checked"], r.stdout + r.stderr[-3000:]


def test_dry_run_predictions_are_read_from_the_plan_json():
    doc = {"seconds": 130.0, "models": [{"seconds": 125.5, "speed": {"source": "scaled", "reference": "gemma-3-270m"},
                                        "speed_note": None}]}
    assert scale.predicted_seconds(doc) == (125.5, "scaled gemma-3-270m")
    none = {"seconds": None, "models": [{"seconds": None, "speed": None, "speed_note": "no calibration yet"}]}
    assert scale.predicted_seconds(none) == (None, "no calibration yet")


def test_scale_table_has_a_row_per_model_in_both_tables():
    row = {"model": "m", "n_params": 7.2e9, "weights": 4 * 2**30, "kv": 2**28, "n_vocab": 32000, "tokens": 3000,
           "items": 10, "decode_calls": 11, "s_item": 30.0, "idle_s_item": 20.0, "tok_s": 10.0, "idle_tok_s": 15.0,
           "wall_s": 320.0, "score_s": 300.0, "peak_rss": 5 * 2**30, "predicted": {"own": None}, "load_avg": (2.0, 3.5),
           "full_tokens": {"discotex": 500000, "abricot_abs": 20000, "abricot_inc": 20000}, "full_h": 15.0,
           "idle_full_h": 10.0, "system_info": "CPU : AVX2 = 1 |"}
    doc = {"sample": 10, "threads": 2, "machine": "test", "created": "2026-01-01T00:00:00", "command": "scale.py",
           "full_items": {"discotex": 1600, "abricot_abs": 127, "abricot_inc": 127},
           "rows": [row, {**row, "model": "n", "predicted": {"own": 250.0, "scaled": 310.0}}]}
    text = scale.format_table(doc)
    assert [ln.split(" | ")[0] for ln in text.splitlines() if ln.startswith("| m ") or ln.startswith("| n ")] == \
        ["| m", "| n", "| m", "| n"]
    assert "| n/a |" in text and "| 250 (310) |" in text
    assert "| 1.18 |" in text  # peak RSS / (weights + KV): 5 / 4.25 GiB


# -- gpu.sh ------------------------------------------------------------------------------------
def test_gpu_script_parses_and_explains_itself():
    script = str(ROOT / "bench" / "gpu.sh")
    subprocess.run(["bash", "-n", script], check=True)
    help_text = subprocess.run(["bash", script, "--help"], capture_output=True, text=True, check=True).stdout
    assert "--quick" in help_text and "set -euo" not in help_text
    wrong = subprocess.run(["bash", script, "--frobnicate"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "unknown option --frobnicate" in wrong.stderr


def test_gpu_report_agreement_counts_predictions_and_the_largest_difference():
    import gpu_report

    a = {"samples": {"x": (1, [-1.0, -0.5]), "y": (0, [-0.2, -3.0]), "z": (1, [0.0, 0.0])}}
    b = {"samples": {"x": (1, [-1.25, -0.5]), "y": (1, [-2.0, -0.1])}}
    same, n, diff = gpu_report.agreement(a, b)
    assert (same, n) == (1, 2) and diff == pytest.approx(2.9)


@pytest.mark.real
def test_gpu_script_cpu_path_runs_and_prints_the_table(tmp_path, gemma_path, discotex_dir):
    res = subprocess.run(["bash", str(ROOT / "bench" / "gpu.sh"), "--quick", "--cpu", "--models", str(gemma_path),
                          "--out", str(tmp_path / "out"), "--data-dir", str(discotex_dir), "--threads", "2"],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHON": sys.executable})  # this environment's Python, not PATH's
    assert res.returncode == 0, res.stderr[-2000:]
    assert "CPU path only" in res.stdout
    rows = [ln for ln in res.stdout.splitlines() if ln.startswith("| gemma")]
    assert [r.split(" | ")[2] for r in rows] == ["batched", "prefix"]
    assert all(r.split(" | ")[4] == "3" for r in rows)  # --quick: 3 items
    assert "CPU-vs-GPU drift: n/a (no GPU)" in res.stdout
    runs = json.loads((tmp_path / "out" / f"{gemma_path.stem}--cpu--prefix" / "results.json").read_text())
    assert runs["tasks"]["discotex"]["n"] == 3


def test_bench_scripts_open_models_with_the_one_call():
    """bench/ opens a model as `run` does (models.locate.open_model, through throughput.open_llama), never
    by building a backend class directly."""
    import ast

    built = [f"{p.name}:{n.lineno}" for p in sorted((ROOT / "bench").glob("*.py"))
             for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id.endswith("Backend")]
    assert not built, built

