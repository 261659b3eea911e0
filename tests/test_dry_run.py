"""`run --dry-run`: the tokens an engine will evaluate, the predicted time from a calibration
(known rates on the fake backend give known predictions), sweeps, the cost of --sample and
--shard instead, models not here estimated from the text, and nothing written or downloaded."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.models.given import Given
from abricot_local.run import calibration
from abricot_local.backends.fake import FakeBackend
from abricot_local.backends.options import ScoringOptions
from abricot_local.cli import cli
from abricot_local.run.cost import Measured, text_tokenizer
from abricot_local.run.model_facts import ModelFacts
from conftest import FIXTURE

RATE = dict(token_s=1e-3, call_s=1e-2, row_s=2e-3, load_s=1.5)
ABRICOT = ("--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def dry(*args) -> dict:
    r = invoke("run", *args, "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def known_rate(label: str = "fake", n_batch: int = 512, **rate) -> None:
    """A calibration of the fake backend with known seconds per token, call, row and load."""
    r = {**RATE, **rate}
    calibration.store(calibration.Calibration(
        label, f"synthetic:{label}", FakeBackend.speed_settings(ScoringOptions(n_batch=n_batch)), calibration.host(),
        Measured(r["token_s"], 256, r["call_s"], r["row_s"], r["load_s"]), None, "2025-01-01T00:00:00+00:00"))


def expected(task: dict) -> float:
    return task["tokens"] * RATE["token_s"] + task["decode_calls"] * RATE["call_s"] + task["rows"] * RATE["row_s"]


@pytest.fixture
def online(monkeypatch):
    """Downloads allowed (a dry run makes none; offline, it refuses a model not here: issue 29)."""
    monkeypatch.delenv("ABRICOT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def tree(root: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*"))


@pytest.mark.parametrize("engine", ["prefix", "naive", "batched"])
def test_a_known_rate_gives_a_known_prediction_of_the_engines_own_work(engine, tmp_path):
    import planned
    from abricot_local.run.execute import score_items
    from abricot_local.backends import backend_options
    from abricot_local.tasks.base import TaskOptions

    known_rate()
    doc = dry("fake", "--backend", "fake", *ABRICOT, "--engine", engine)
    (model,) = doc["models"]
    assert model["speed"]["source"] == "calibrated" and model["speed_note"] is None
    for task in model["tasks"]:
        assert task["exact"] and task["seconds"] == pytest.approx(expected(task), rel=1e-9)
    assert doc["seconds"] == pytest.approx(RATE["load_s"] + sum(expected(t) for t in model["tasks"]), rel=1e-9)
    # what the engine really decodes when the run scores those items
    opts = backend_options("fake", {"n_ctx": 8192, "engine": engine})
    plan = planned.plan_run(model="fake", given=Given.of(opts, backend="fake"), task_spec="abricot", limit=None,
                             task_options=TaskOptions(data=(("abricot", str(FIXTURE)),)))
    for task, run in zip(model["tasks"], plan.runs):
        backend = FakeBackend("fake", opts)
        list(score_items(run.items, backend))
        assert (task["tokens"], task["decode_calls"]) == (backend.counters.tokens, backend.counters.decode_calls)


@pytest.mark.parametrize("engine", ["naive", "single", "prefix", "batched"])
def test_the_count_of_a_segment_is_the_count_of_its_entries(engine, monkeypatch):
    """counting.py's decode counts a segment's calls, tokens, positions and rows without an entry per token: the same
    Work as Engine.decode's entries through the counting decode_call, small n_batch calls cutting the prompts."""
    import types

    import planned
    from abricot_local.backends import backend_options, counting
    from abricot_local.backends.engines import Engine
    from abricot_local.run.cost import count_work
    from abricot_local.tasks.base import TaskOptions

    opts = backend_options("fake", {"n_ctx": 8192, "engine": engine, "n_batch": 48})
    plan = planned.plan_run(model="fake", given=Given.of(opts, backend="fake"), task_spec="abricot", limit=None,
                            task_options=TaskOptions(data=(("abricot", str(FIXTURE)),)))
    fake = FakeBackend("fake", opts)
    items = [it for run in plan.runs for it in run.items[:4]]

    def work():
        return count_work(items, fake.schedule, opts, exact=True, basis="")

    fast = work()
    made = counting.counting_engine

    def by_entries(o):
        engine = made(o)
        engine.decode = types.MethodType(Engine.decode, engine)  # an entry per token into the counting decode_call
        return engine

    monkeypatch.setattr(counting, "counting_engine", by_entries)
    assert fast == work() and fast.rows > 0 and fast.positions > fast.tokens > 0


def test_a_sweep_sums_its_models():
    known_rate("fake-a")
    known_rate("fake-b", token_s=2e-3)
    doc = dry("fake-a", "fake-b", "--backend", "fake", *ABRICOT)
    a, b = doc["models"]
    assert a["tasks"] == [dict(t, seconds=t["seconds"]) for t in a["tasks"]]
    assert [t["tokens"] for t in a["tasks"]] == [t["tokens"] for t in b["tasks"]]
    assert b["seconds"] - RATE["load_s"] > a["seconds"] - RATE["load_s"]  # twice the seconds per token
    assert doc["seconds"] == pytest.approx(a["seconds"] + b["seconds"])


def test_what_sample_and_shard_would_cost_instead(tmp_path):
    from invented_data import write_discotex

    known_rate()
    data = write_discotex(tmp_path / "d", per_source=60)  # 120 items
    args = ("fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--n-ctx", "8192")
    doc = dry(*args, "--sample", "20")
    (task,) = doc["models"][0]["tasks"]
    scoring = doc["seconds"] - RATE["load_s"]
    alt = {a["option"]: a["seconds"] for a in doc["alternatives"]}
    assert task["items"] == 20 and task["available"] == 120
    assert alt["every item"] == pytest.approx(RATE["load_s"] + scoring * 120 / 20, rel=1e-3)
    assert alt["--shard K/2 (each part)"] == pytest.approx(RATE["load_s"] + scoring / 2, rel=1e-3)
    assert alt["--shard K/4 (each part)"] == pytest.approx(RATE["load_s"] + scoring * 5 / 20, rel=1e-3)
    whole = dry(*args)
    options = [a["option"] for a in whole["alternatives"]]
    assert options[0] == "--sample 100" and "--sample 400" not in options and whole["seconds"] > doc["seconds"] * 4
    text = invoke("run", *args, "--sample", "20", "--dry-run")
    assert text.exit_code == 0 and "instead: every item: " in text.stdout and "--shard K/2" in text.stdout


def test_a_dry_run_writes_nothing_and_downloads_nothing(tmp_path, monkeypatch, vocab_dir, discotex_dir):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    before = tree(tmp_path)
    for args in (("fake", "--backend", "fake", *ABRICOT),
                 (vocab_dir / "ggml-vocab-llama-bpe.gguf", "--tasks", "discotex", "--data-dir", discotex_dir,
                  "--sample", "5"),
                 ("mistral-7b-q4", "llama-3.1-8b-q4", "--tasks", "discotex", "--sample", "5")):  # data not here either
        r = invoke("run", *args, "--dry-run")
        assert r.exit_code == 0, r.output
        assert "nothing is scored, written or downloaded" in r.stdout
        # the total says what it leaves out (it read ~8 s, a model's load, for hours of work)
        assert ("not counted: 1 task whose data is not here (discotex): a run downloads it first" in r.stdout) \
            == (args[0] == "mistral-7b-q4"), r.stdout
    assert tree(tmp_path) == before
    assert not (tmp_path / "results").exists() and not (tmp_path / "cache").exists()


def test_a_dry_run_finds_its_out_as_the_run_will(tmp_path):
    """--resume: the items the folder holds are left out (a grown --sample: the new ones only); a folder the run
    refuses is refused (the dry run planned every item, and passed a finished folder the run refuses)."""
    out, args = tmp_path / "o", ("fake", "--backend", "fake", *ABRICOT)
    assert invoke("run", *args, "--sample", 8, "--out", out).exit_code == 0
    plan = dry(*args, "--sample", 12, "--out", out, "--resume")
    assert [(t["task"], t["items"]) for t in plan["models"][0]["tasks"]] == [("abricot_abs", 4), ("abricot_inc", 4)]
    r = CliRunner().invoke(cli, ["run", *map(str, args), "--sample", "12", "--out", str(out), "--dry-run"])
    assert r.exit_code == 2 and f"{out} already holds a finished run" in r.output, r.output
    plan = dry(*args, "--sample", 12, "--out", tmp_path / "new")
    assert [t["items"] for t in plan["models"][0]["tasks"]] == [12, 12]


def test_a_model_not_here_is_estimated_from_its_text_and_labelled(discotex_dir, online):
    from abricot_local.models.hub import download_folder
    from abricot_local.models.ref import lookup_alias

    doc = dry("mistral-7b-q4", "llama-3.1-8b-q4", "hf:someone/Some-Model-7B-GGUF", "--tasks", "discotex",
              "--data-dir", discotex_dir, "--sample", "40")
    mistral, llama, hub = doc["models"]
    for m in doc["models"]:
        (task,) = m["tasks"]
        assert task["exact"] is False and task["tokens"] > 40 * 200 and m["path"] is None
    assert "mistral-v3-spm not measured" in mistral["tasks"][0]["counted_by"]
    assert llama["tasks"][0]["counted_by"] == "llama-bpe: 3.50 chars/token measured on discotex"
    assert "tokenizer family unknown" in hub["tasks"][0]["counted_by"]
    assert mistral["download"]["bytes"] == 4_370_000_000
    assert mistral["download"]["to"] == str(download_folder(lookup_alias("mistral-7b-q4")))
    assert mistral["memory"]["estimated"] and mistral["memory"]["weights_bytes"] == 4_370_000_000
    assert hub["download"]["bytes"] is None and hub["memory"] is None
    assert doc["seconds"] is None and "no calibration yet" in mistral["speed_note"]
    assert "--calibrate" in mistral["speed_note"]
    text = invoke("run", "mistral-7b-q4", "--tasks", "discotex", "--data-dir", discotex_dir, "--sample", "40",
                  "--dry-run").stdout
    assert f"~{mistral['tasks'][0]['tokens']:,}" in text and "download: bartowski/Mistral-7B" in text
    assert "no calibration yet" in text


@pytest.mark.real
def test_a_quant_not_here_is_costed_by_another_quant_of_its_model_that_is(smollm2_path, tmp_path, discotex_dir,
                                                                        online):
    """The same base and params: the file here gives the shape (its width, no width spread), the KV cache and the
    tokens (its tokenizer's, not called exact), the entry its own size."""
    away_entry = ('[tiny-q8]\nrepo = "someone/Tiny-GGUF"\nrevision = ""\nfile = "tiny.Q8_0.gguf"\n'
                  'size_approx = "145 MB"\nparams = "135M"\nbase = "Tiny"\nquant = "Q8_0"\n')
    both, alone = tmp_path / "models.toml", tmp_path / "alone.toml"
    both.write_text(f'[tiny-here]\nsource = "local"\npath = "{smollm2_path}"\nparams = "135M"\nbase = "Tiny"\n'
                    f'quant = "Q4_1"\n\n{away_entry}', encoding="utf-8")
    alone.write_text(away_entry, encoding="utf-8")
    selection = ("--tasks", "discotex", "--data-dir", discotex_dir, "--sample", "8")
    away, here = dry("tiny-q8", "tiny-here", "--models", both, *selection)["models"]
    (a,), (h,) = away["tasks"], here["tasks"]
    assert away["path"] is None and away["download"]["bytes"] == 145_000_000
    assert (a["tokens"], a["decode_calls"]) == (h["tokens"], h["decode_calls"]) and not a["exact"] and h["exact"]
    assert a["counted_by"] == "the tokenizer of tiny-here (the same model)"
    assert away["memory"]["kv_bytes"] == here["memory"]["kv_bytes"] and away["memory"]["weights_bytes"] == 145_000_000
    assert away["memory"]["estimated"]
    (guessed,) = dry("tiny-q8", "--models", alone, *selection)["models"][0]["tasks"]
    assert guessed["counted_by"] != a["counted_by"]  # without a quant of it here: estimated from the text


def test_a_model_not_calibrated_is_scaled_from_the_nearest_calibrated_one(discotex_dir, online):
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend, LlamaCppOptions

    settings = json.loads(json.dumps(LlamaCppBackend.speed_settings(LlamaCppOptions())))
    small = ModelFacts(params=1e8, attention=2e4, width=640, n_vocab=262144, bytes=250_000_000, basis="its GGUF header")
    measured = Measured(token_s=4e-3, prompt_tokens=256, call_s=5e-3, row_s=1e-3, load_s=2.0)
    calibration.store(calibration.Calibration("small", "0" * 64, settings, calibration.host(), measured, small, "now"))
    far = ModelFacts(params=7e10, attention=6e5, width=8192, n_vocab=128256, bytes=42_000_000_000, basis="x")
    calibration.store(calibration.Calibration("far", "1" * 64, {**settings, "threads": 999}, calibration.host(),
                                              measured, far, "now"))  # other settings: never used
    doc = dry("mistral-7b-q4", "--tasks", "discotex", "--data-dir", discotex_dir, "--sample", "10")
    speed = doc["models"][0]["speed"]
    assert speed["source"] == "scaled" and speed["reference"] == "small"
    rate = (2 * small.params + 4 * small.attention * 127.5) / measured.token_s  # FLOP/s of the calibration
    assert speed["per_call_s"] == measured.call_s and speed["load_s"] == pytest.approx(2.0 * 4.37e9 / 2.5e8)
    assert 2e9 / rate < speed["per_token_s"] < 2 * 7.25e9 / rate  # 7B parameters each token goes through, or fewer
    assert doc["seconds"] > 10 * 200 * speed["per_token_s"]  # ten items of a few hundred tokens each


def bench_scale_rows() -> dict[str, dict]:
    """bench/README.md's scale table (bench/scale.py): per model, params, file GiB, vocabulary,
    tokens per item, s/item and prompt tokens/s measured. The one source of the 7B figures."""
    text = (Path(__file__).resolve().parents[1] / "bench" / "README.md").read_text(encoding="utf-8")
    table, full = text.split("<!-- scale:start -->")[1].split("<!-- scale:end -->")[0].split("Projected full run", 1)
    rows = {}
    for ln in table.splitlines():
        c = [x.strip() for x in ln.strip().strip("|").split("|")]
        if len(c) == 15 and c[0] != "model" and not c[0].startswith("-"):
            rows[c[0]] = dict(params=float(c[1][:-1]) * 1e9, bytes=int(float(c[2]) * 2**30), vocab=int(c[3]),
                              tokens=int(c[4]), s_item=float(c[6].split()[0]), tok_s=float(c[7].split()[0]))
    for ln in full.splitlines():
        c = [x.strip() for x in ln.strip().strip("|").split("|")]
        if c[0] in rows:
            rows[c[0]]["full_hours"] = float(c[3])
    return rows


# (vocabulary, width, layers, heads, kv heads, ffn) of bench/random_gguf.py's shapes
SHAPES = {"Llama-3.2-1B shape, random": (128256, 2048, 16, 32, 8, 8192),
          "Llama-3.2-3B shape, random": (128256, 3072, 28, 24, 8, 8192),
          "Mistral-7B-v0.1 shape, random": (32000, 4096, 32, 32, 8, 14336)}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("known", ["header", "registry"])
def test_a_speed_scaled_from_gemma_agrees_with_what_bench_scale_measured_at_that_size(shape, known):
    """Issue 30: Gemma 3 270M's speed on the project's VM (bench/scale.py's own row) scaled to the
    1B, 3B and 7B shapes predicts their measured time per token within the error bar the dry run
    shows (a 12x overshoot: a busy machine's calibration, and FLOPs scaled without the width's
    efficiency: 1.9x). ``registry``: the model not here, known by its parameter count alone."""
    from abricot_local.run.cost import SCALED_ERROR, Work, speed_from
    from abricot_local.run.model_facts import estimated_facts

    rows = bench_scale_rows()
    g, r = rows["Gemma 3 270M"], rows[shape]
    gemma = ModelFacts(params=100326016, attention=18432.0, width=640.0, n_vocab=262144, bytes=253113024,
                       basis="its GGUF header")  # gemma-3-270m-q4_k_m.gguf's header (plan_cost.gguf_facts)
    measured = Measured(token_s=1 / g["tok_s"], prompt_tokens=g["tokens"], call_s=0.0, row_s=0.0, load_s=2.0)
    v, d, layers, heads, kv, ff = SHAPES[shape]
    body = layers * (2 * d * d + 2 * d * kv * (d // heads) + 3 * d * ff + 2 * d) + d
    facts = ModelFacts(body, layers * d, d, v, r["bytes"], "its GGUF header") if known == "header" else \
        estimated_facts(r["params"], r["bytes"], None, "its registry entry")
    speed = speed_from(measured, gemma, facts, same=False, reference="gemma-3-270m", when="")
    t = r["tokens"]
    predicted = speed.seconds(Work(1, t, 1, 0, t * (t - 1) // 2)) / t
    assert abs(predicted * r["tok_s"] - 1) <= SCALED_ERROR == speed.error
    assert "width" in speed.how and "bench/scale.py" in speed.how


def test_every_7b_figure_of_the_readme_and_the_docs_is_bench_scales():
    rows = bench_scale_rows()
    seven = rows["Mistral-7B-v0.1 shape, random"]
    root = Path(__file__).resolve().parents[1]
    readme = " ".join(root.joinpath("README.md").read_text(encoding="utf-8").split())
    running = " ".join(root.joinpath("docs", "running.md").read_text(encoding="utf-8").split())
    hours = f"about {seven['full_hours']:.0f} hours for a 7B Q4 model"
    per_item = f"{seven['s_item']:.0f} s per DISCOTEX item"
    assert hours in readme and per_item in readme
    assert per_item in running and f"{seven['full_hours']:.0f} hours" in running


# the counts below, in a process of their own started once the tests are collected (conftest.start_early): three
# vocabularies' tokenizers over 80 items run beside the suite's other tests; the same calls, their numbers as JSON
TOKENS = """
import json, sys
sys.path.insert(0, sys.argv[1])  # the package the suite imports
from pathlib import Path
from abricot_local.backends.base import schedule
from abricot_local.backends.llama_cpp.backend import LlamaCppBackend, LlamaCppOptions
from abricot_local.backends.options import ScoringOptions
from abricot_local.run.chars_per_token import ratio
from abricot_local.run.cost import count_work, text_tokenizer
from abricot_local.tasks.selection import prepare
from abricot_local.tasks import make_task
from abricot_local.tasks.base import TaskOptions
vocab_dir, discotex_dir, fixture = map(Path, sys.argv[2:5])
opts = ScoringOptions(n_ctx=4096)
tasks = [make_task("discotex", TaskOptions(data_dir=str(discotex_dir))),
         make_task("abricot_inc", TaskOptions(data=(("abricot", str(fixture)),)))]
runs = prepare(tasks, None, sample=40)
said = []
for family in ("llama-bpe", "llama-spm", "qwen2"):
    be = LlamaCppBackend(vocab_dir / f"ggml-vocab-{family}.gguf", LlamaCppOptions(vocab_only=True, n_ctx=4096))
    for run in runs:
        exact = count_work(run.items, be.schedule, opts, exact=True, basis="")
        tok = text_tokenizer(ratio(family, run.task).chars_per_token)
        est = count_work(run.items, lambda r: schedule(r, tok, 4096), opts, exact=False, basis="")
        said.append([family, run.task.name, exact.tokens, est.tokens, exact.calls, est.calls, exact.rows, est.rows])
    be.close()
print(json.dumps(said))
"""


def early_children(tmp_path_factory, vocab_dir=None, discotex_dir=None) -> dict:
    """TOKENS in a fresh process (a private cache and config), the data sets where the suite finds them (none: no
    child yet, the test's fixtures say why)."""
    import sys

    import abricot_local
    import realdata
    from conftest import Early, isolated_env

    try:
        vocab_dir = vocab_dir or realdata.obtain(realdata.VOCAB)
        discotex_dir = discotex_dir or realdata.obtain(realdata.DISCOTEX)
    except realdata.Missing:
        return {}
    root = tmp_path_factory.mktemp("tokens")
    return {"tokens": Early([sys.executable, "-c", TOKENS, str(Path(abricot_local.__file__).parents[1]),
                             str(vocab_dir), str(discotex_dir), str(FIXTURE)], timeout=300, cwd=root,
                            env={**os.environ, **isolated_env(root)})}


@pytest.fixture(scope="module")
def tokens(tmp_path_factory, vocab_dir, discotex_dir):
    from conftest import early_children_of

    child = early_children_of(__name__, early_children, tmp_path_factory).get("tokens")
    child = child or early_children(tmp_path_factory, vocab_dir, discotex_dir)["tokens"]
    yield child
    child.close()


def test_estimated_tokens_are_close_to_the_tokenizers_own(tokens):
    """The stand-in tokenizer with a family's measured ratio against that family's tokenizer,
    on the same items through the same engine: within 10% (figures printed)."""
    r = tokens.result()
    assert r.returncode == 0, r.stderr[-3000:]
    said = json.loads(r.stdout)
    assert len(said) == 6  # 3 families x 2 tasks
    for family, task, exact_tokens, est_tokens, exact_calls, est_calls, exact_rows, est_rows in said:
        print(f"{family} {task}: tokens exact {exact_tokens}, estimated {est_tokens}; rows {exact_rows}, {est_rows}")
        assert est_tokens == pytest.approx(exact_tokens, rel=0.10)
        # a trunk call per n_batch tokens of an item (one whose length the estimate puts across a boundary
        # takes a call more or less: 1 of the 40 sampled DISCOTEX items does); how the answer splits from the
        # context differs (rows: a factor of 2)
        assert abs(est_calls - exact_calls) <= 1 and exact_rows / 2 <= est_rows <= 2 * exact_rows


def test_a_real_run_prints_its_plan_first(tmp_path):
    known_rate()
    r = invoke("run", "fake", "--backend", "fake", *ABRICOT, "--limit", "3", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("plan: ")]
    assert lines[0].startswith("plan: fake abricot_abs: 3 items, ") and " tokens, " in lines[0]
    assert lines[-1].startswith("plan: total ") and "calibrated" in lines[-1]
    assert r.stderr.index("plan: total") < r.stderr.index("run: fake")  # before the run starts scoring
    plain = invoke("run", "fake", "--backend", "fake", *ABRICOT, "--limit", "3", "--out", tmp_path / "p")
    assert "plan: total" not in plain.stderr or "calibrated" in plain.stderr


def test_json_and_calibrate_need_dry_run():
    for flag in ("--json", "--calibrate"):
        r = invoke("run", "fake", "--backend", "fake", *ABRICOT, flag)
        assert r.exit_code == 2 and "go with --dry-run" in r.output


def test_calibrate_writes_only_its_cache_entry(tmp_path):
    before = tree(tmp_path)
    r = invoke("run", "fake", "--backend", "fake", *ABRICOT, "--limit", "2", "--dry-run", "--calibrate")
    assert r.exit_code == 0, r.output
    added = sorted(set(tree(tmp_path)) - set(before))
    assert [a[0] for a in added] == ["cache", "cache/calibrations.json"]
    doc = dry("fake", "--backend", "fake", *ABRICOT, "--limit", "2")
    assert doc["models"][0]["speed"]["source"] == "calibrated" and doc["seconds"] > 0
    other = dry("fake", "--backend", "fake", *ABRICOT, "--limit", "2", "--n-batch", "64")  # other settings
    assert other["seconds"] is None


def test_calibration_recovers_the_costs_of_token_call_and_row(monkeypatch):
    """A session whose decode calls advance a clock by known costs: the three measurements
    give those costs back."""
    from abricot_local.backends import fake

    clock = [0.0]
    x, y, z = 3e-3, 20e-3, 1.5e-3
    decode = fake.FakeSession.decode

    def timed_decode(self, entries):
        clock[0] += len(entries) * x + y + sum(e[3] for e in entries) * z
        return decode(self, entries)

    monkeypatch.setattr(fake.FakeSession, "decode", timed_decode)
    monkeypatch.setattr(calibration.time, "perf_counter", lambda: clock[0])
    got = calibration.measure(FakeBackend("fake", ScoringOptions(n_batch=64)), load_s=0.5)
    assert (got.token_s, got.call_s, got.row_s) == pytest.approx((x, y, z), rel=1e-6)
    assert got.prompt_tokens == calibration.PROMPT_TOKENS and got.load_s == 0.5


def test_the_stand_in_tokenizer_keeps_prefixes():
    tok = text_tokenizer(3.5)
    context, whole = tok("Paragrafo: uno, due e tre.\nRisposta:"), tok("Paragrafo: uno, due e tre.\nRisposta: B")
    assert context[0] == 0 and len(context) == 1 + math.ceil(36 / 3.5)
    assert whole[: len(context) - 1] == context[:-1] and whole[len(context) - 1] != context[-1]
    assert tok("abcdefg") != tok("abcdefh") and tok("") == [0]


@pytest.mark.real
def test_gemma_calibrated_predicts_a_run(gemma_path, tmp_path):
    """Calibrate Gemma 3 270M here (seconds), predict a 3-item ABRICOT run (the fixture's first 3
    of 18: the run, not the calibration, is what this test spends), run it: the prediction is
    reported against the measured time, and only checked within a factor of 4."""
    args = (gemma_path, "--tasks", "abricot_abs", "--data", f"abricot={FIXTURE}", "--threads", "2", "--limit", "3")
    r = invoke("run", *args, "--dry-run", "--calibrate", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    (task,) = doc["models"][0]["tasks"]
    assert task["exact"] and task["items"] == 3 and doc["models"][0]["speed"]["source"] == "calibrated"
    out = tmp_path / "o"
    assert invoke("run", *args, "--out", out).exit_code == 0
    measured = json.loads((out / "results.json").read_text())["wall_seconds"]
    print(f"gemma-3-270m abricot_abs 3 items: predicted {doc['seconds']:.1f} s, measured {measured:.1f} s "
          f"({os.cpu_count()} cores; calibration {doc['models'][0]['speed']})")
    assert measured / 4 < doc["seconds"] < measured * 4


def test_a_calibration_on_a_busy_machine_says_so(monkeypatch):
    monkeypatch.setattr("os.getloadavg", lambda: (8.3, 7.0, 6.0))
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert "the machine was busy (load average 8.3 on 2 cores)" in calibration.busy()
    monkeypatch.setattr("os.getloadavg", lambda: (0.5, 0.4, 0.3))
    assert calibration.busy() == ""


def test_a_grown_shard_plans_the_items_it_will_score(tmp_path, discotex_dir):
    """A grown shard keeps every item it scored (shard K of a sample lies inside shard K of every larger one): the
    plan counts only the new ones, 4 of shard 1/3 grown from 30 items (10) to 40 (14), as the run scores them."""
    out = tmp_path / "s"
    args = ("fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", discotex_dir, "--n-ctx", 8192,
            "--shard", "1/3")
    assert invoke("run", *args, "--sample", 30, "--out", out).exit_code == 0
    plan = dry(*args, "--sample", 40, "--out", out, "--resume")
    (task,) = plan["models"][0]["tasks"]
    r = invoke("run", *args, "--sample", 40, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    scored = json.loads((out / "results.json").read_text())["tasks"]["discotex"]["scored_now"]
    assert task["items"] == scored == 4, (task, scored)
    assert f"{scored} items left" in r.stderr  # the run's own plan line counts alike
