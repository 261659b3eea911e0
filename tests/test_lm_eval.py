"""The lm-evaluation-harness front end: lm-eval's three request types over the backends.

Fast tests run on the fake backend, whose rows are a pure function of the tokens
before them, so an independent oracle (a fresh fake session, no engine) gives the
expected numbers. The real tests run the local task YAMLs of tests/lm_eval_tasks/
(JSON data written at test time: DISCOTEX items from the real release as multiple
choice, Italian paragraphs for perplexity, few-shot questions for generation) on
Gemma 3 270M through `abricot-local lm-eval`, lm-eval's Python API and the LM class,
with no network.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

# lm-eval reads its data through `datasets`, which reads these when first imported (its cache: conftest.py)
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from abricot_local.lm_eval import requests as requests_  # noqa: E402
from abricot_local.backends.options import ScoringOptions  # noqa: E402
from abricot_local.backends.fake import BOS, FakeBackend, FakeSession  # noqa: E402
from abricot_local.core import Request, log_softmax  # noqa: E402
from abricot_local.errors import ContextOverflowError, UsageError  # noqa: E402
from conftest import require_lm_eval as _lm_eval  # noqa: E402

TASKS = Path(__file__).resolve().parent / "lm_eval_tasks"


# -- an independent oracle for the fake model -----------------------------------------------------
def oracle_row(history: list[int], seed: int = 1234) -> np.ndarray:
    """The fake model's log-softmax after ``history``, from a fresh session (no engine)."""
    s = FakeSession(ScoringOptions(seed=seed))
    raw = s.decode([(0, p, t, p == len(history) - 1) for p, t in enumerate(history)])[-1]
    return log_softmax(raw)


def oracle_score(seq: list[int], start: int) -> tuple[float, bool]:
    """Log-likelihood of seq[start:] after seq[:start], and whether each token is the argmax."""
    total, greedy = 0.0, True
    for j in range(start, len(seq)):
        row = oracle_row(seq[:j])
        total += row[seq[j]]
        greedy &= int(np.argmax(row)) == seq[j]
    return float(total), greedy


def fake(**kw) -> FakeBackend:
    return FakeBackend("fake", ScoringOptions(**kw))


# -- fast tests on the fake backend ---------------------------------------------------------------
def test_loglikelihood_scores_each_context_once_and_matches_the_oracle():
    contexts = ["Intro.\n\nQ1?\nA:", "Intro.\n\nQ2 più lunga?\nA:", "Senza prefisso:"]
    conts = [" si", " no", " forse no"]
    pairs = [(c, x) for c in contexts for x in conts] + [(contexts[0], " si")]  # a duplicate
    b = fake()
    got = requests_.loglikelihood(b, pairs)
    assert b.counters.requests == len(contexts)  # one evaluation per context, all continuations
    assert b.counters.prefix_hits >= 1  # "Intro.\n\n" stayed in the cache
    for (ctx, cont), (lp, greedy) in zip(pairs, got):
        whole = b.tokenize(ctx + cont)
        want_lp, want_greedy = oracle_score(whole, len(b.tokenize(ctx)))
        assert lp == pytest.approx(want_lp, abs=1e-12) and greedy == want_greedy
        # a separate scoring of the same request through a fresh backend: exactly equal
        alone = fake().score(Request(ctx, tuple(conts)))
        assert lp == alone.logprobs[conts.index(cont)]


def test_loglikelihood_is_independent_of_order_and_grouping():
    pairs = [(f"Intro.\n\nDomanda {k}\nR:", f" {x}") for k in range(6) for x in ("A", "B", "CD")]
    ref = requests_.loglikelihood(fake(), pairs)
    for seed in range(3):
        order = list(range(len(pairs)))
        random.Random(seed).shuffle(order)
        got = requests_.loglikelihood(fake(), [pairs[k] for k in order])
        assert [got[order.index(k)] for k in range(len(pairs))] == ref
    # a subset (as --limit makes) keeps each number
    assert requests_.loglikelihood(fake(), pairs[3:7]) == ref[3:7]
    # every exact engine gives the same numbers
    for engine in ("naive", "single"):
        assert requests_.loglikelihood(fake(engine=engine), pairs) == ref


def test_is_greedy_is_true_exactly_for_the_argmax_continuation():
    b = fake()
    ctx = "Il gatto"
    gen = b.generate(ctx, [], 3)
    seq = b.tokenize(ctx)
    s = b.score_tokens(seq, [gen.tokens, (gen.tokens[0], (gen.tokens[1] + 1) % 256)])
    assert s.greedy == (True, False)
    assert s.logprobs[0] == pytest.approx(oracle_score(seq + list(gen.tokens), len(seq))[0], abs=1e-12)


def test_empty_context_scores_the_continuation_after_bos():
    b = fake()
    (lp, greedy), = requests_.loglikelihood(b, [("", "ciao")])
    assert (lp, greedy) == pytest.approx(oracle_score([BOS, *b"ciao"], 1), abs=1e-12)


def test_rolling_windows_predict_every_token_once_each_exactly():
    from abricot_local.lm_eval.model import lm_eval_windows

    _lm_eval()
    text = "Nel mezzo del cammin di nostra vita mi ritrovai per una selva oscura."  # 69 tokens
    b = fake(n_ctx=24)
    (got,) = requests_.loglikelihood_rolling(b, [text], lm_eval_windows)
    tokens = list(text.encode())
    windows = list(lm_eval_windows(tokens, BOS, 23))
    assert len(windows) == 3 and sum(len(p) for _, p in windows) == len(tokens)
    assert [t for _, p in windows for t in p] == tokens  # each token predicted exactly once, in order
    want = 0.0
    for ctx, pred in windows:
        assert len(ctx) + len(pred) <= 24
        want += oracle_score(ctx + pred, len(ctx))[0]
    assert got == pytest.approx(want, abs=1e-9)
    assert requests_.loglikelihood_rolling(fake(n_ctx=24), [text, "", text], lm_eval_windows) == [got, 0.0, got]


def test_generation_is_greedy_and_stops_at_until_max_tokens_and_eos(monkeypatch):
    b = fake()
    # a prompt after which the fake model writes ASCII (its tokens are bytes), so the text is the tokens
    prompt = next(p for p in (f"Domanda {k}:" for k in range(2000))
                  if (g := b.generate(p, [], 6).tokens) and len(g) == 6 and max(g) < 128)
    full = b.generate(prompt, [], 6)
    assert full.reason == "max_tokens" and len(full.tokens) == 6
    seq = b.tokenize(prompt)
    for tok in full.tokens:  # each token is the oracle's argmax after the ones before it
        assert int(np.argmax(oracle_row(seq))) == tok
        seq.append(tok)
    assert full.text == bytes(full.tokens).decode()
    stop = full.text[2:4]
    cut = b.generate(prompt, [stop, "non appare"], 6)
    assert cut.reason == "until" and cut.text == full.text[: full.text.find(stop)]
    assert len(cut.tokens) == full.text.find(stop) + 2  # generation stops once the stop string is complete
    monkeypatch.setattr(b.session, "is_eog", lambda t: t == full.tokens[2])
    eos = b.generate(prompt, [], 6)
    assert eos.reason == "eos" and eos.tokens == full.tokens[:2]


def test_generation_requests_are_order_free_and_share_the_prefix():
    reqs = [(f"Esempio: 1 -> 2\n\nDomanda {k}:", {"until": ["\n"], "max_gen_toks": 5}) for k in range(4)]
    reqs.append((reqs[0][0], {"until": "\n", "max_gen_toks": 5}))  # `until` as one string: the same request
    b = fake()
    ref = requests_.generate(b, reqs)
    assert b.counters.requests == 4 and b.counters.prefix_hits == 3
    assert ref[4] == ref[0]
    shuffled = list(reversed(reqs))
    assert list(reversed(requests_.generate(fake(), shuffled))) == ref
    for (ctx, kw), g in zip(reqs, ref):  # each equals a generation on its own, from a fresh backend
        assert fake().generate(ctx, ["\n"], 5) == g


def test_bad_requests_fail_before_any_decode():
    b = fake(n_ctx=32)
    with pytest.raises(ContextOverflowError, match="raise model_args n_ctx "):  # lm-eval's words
        requests_.loglikelihood(b, [("breve", " x"), ("x" * 40, " y")])
    with pytest.raises(ContextOverflowError, match="raise model_args n_ctx=N"):
        requests_.generate(b, [("breve", {}), ("x" * 40, {})])
    assert b.counters.decode_calls == 0
    with pytest.raises(UsageError, match="greedily"):
        requests_.generate(b, [("breve", {"do_sample": True})])
    with pytest.raises(UsageError, match="adds no token"):
        requests_.loglikelihood(b, [("breve", "")])


def test_model_args_are_checked():
    with pytest.raises(UsageError, match="unknown model_args pretrained"):
        requests_.open_model({"model": "fake", "backend": "fake", "pretrained": "gpt2"})
    with pytest.raises(UsageError, match="needs model="):
        requests_.open_model({"backend": "fake"})
    with pytest.raises(UsageError, match="no option model_args n_gpu_layers"):
        requests_.open_model({"model": "fake", "backend": "fake", "n_gpu_layers": 3})
    with pytest.raises(UsageError, match="expected an integer"):
        requests_.open_model({"model": "fake", "backend": "fake", "n_ctx": "tanti"})
    from abricot_local.errors import UnknownModelError

    with pytest.raises(UnknownModelError, match="abricot-local models"):  # before any download
        requests_.open_model({"model": "no-such-model"})
    opened = requests_.open_model({"model": "fake", "backend": "fake", "n_ctx": 256, "batch_size": 64})
    assert opened.provenance["schedule"]["n_ctx"] == 256
    assert opened.provenance["requests"]["rolling_window_tokens"] == 255


def _write_fake_data(folder: Path) -> None:
    data = folder / "lm_eval_data"
    data.mkdir(parents=True, exist_ok=True)
    mc = [{"context": f"Istruzioni.\n\nDomanda {k}: quale?\nRisposta:", "choices": ["A", "B", "C"], "gold": k % 3}
          for k in range(5)]
    roll = [{"text": "Il gatto dorme sul divano. " * (k + 1)} for k in range(3)]
    gen = [{"prompt": f"Esempio: 1 -> 2\n\nDomanda {k}:", "answer": "x"} for k in range(3)]
    for name, rows in (("mc", mc), ("rolling", roll), ("generate", gen)):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _evaluate(model, tasks, **kw):
    import lm_eval
    from lm_eval.tasks import TaskManager

    import abricot_local.lm_eval.model  # noqa: F401  registers "abricot-local" (lm-eval 0.4.13)

    return lm_eval.simple_evaluate(model=model, tasks=tasks, log_samples=True,
                                   task_manager=TaskManager(include_path=str(TASKS), include_defaults=False), **kw)


ALL = ["abricot_mc", "abricot_rolling", "abricot_generate"]


def _resps(results) -> dict:
    return {task: [s["resps"] for s in sorted(samples, key=lambda s: s["doc_id"])]
            for task, samples in results["samples"].items()}


def test_lm_eval_python_api_on_the_fake_backend(isolated_home):
    _lm_eval()
    _write_fake_data(isolated_home)
    args = "model=fake,backend=fake,n_ctx=96"
    one = _evaluate("abricot-local", ALL, model_args=args, batch_size=1)
    many = _evaluate("abricot-local", ALL, model_args=args, batch_size=64)
    assert _resps(one) == _resps(many)
    prov = one["config"]["abricot_local"]
    assert prov["backend"] == "fake" and prov["schedule"]["n_ctx"] == 96
    assert prov["requests"]["version"] == requests_.REQUEST_RULES["version"]
    # the logged numbers are the harness's on a fresh backend
    samples = one["samples"]["abricot_mc"]
    pairs = [tuple(a) for s in samples for a in s["arguments"]]
    want = requests_.loglikelihood(fake(n_ctx=96), pairs)
    assert [tuple(r[0]) for s in samples for r in s["resps"]] == want
    assert one["results"]["abricot_mc"]["acc,none"] == np.mean(
        [int(np.argmax([r[0][0] for r in s["resps"]])) == s["target"] for s in samples])


def test_the_class_is_importable_and_registered():
    _lm_eval()
    from lm_eval.api.model import LM
    from lm_eval.api.registry import get_model

    from abricot_local.lm_eval.model import AbricotLM

    assert issubclass(AbricotLM, LM) and get_model("abricot-local") is AbricotLM
    lm = AbricotLM.create_from_arg_string("model=fake,backend=fake,n_ctx=64", {"batch_size": "8", "device": None})
    assert lm.get_model_info()["abricot_local"]["backend"] == "fake"
    assert "<|user|>" in lm.apply_chat_template([{"role": "user", "content": "ciao"}])


def test_the_command_says_how_to_install_lm_eval(monkeypatch):
    from click.testing import CliRunner

    from abricot_local.cli import cli

    _lm_eval()
    r = CliRunner().invoke(cli, ["lm-eval", "gemma-3-270m", "--model", "hf"])
    assert r.exit_code != 0 and "sets --model itself" in r.output
    monkeypatch.delitem(sys.modules, "abricot_local.lm_eval.model", raising=False)
    for name in [m for m in sys.modules if m == "lm_eval" or m.startswith("lm_eval.")] + ["lm_eval"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if lm-eval were not installed
    r = CliRunner().invoke(cli, ["lm-eval", "gemma-3-270m", "--tasks", "x"])
    assert r.exit_code != 0 and 'pip install "abricot-local[lm-eval]"' in r.output


def test_the_shipped_tasks_folder_and_the_one_line_refusals(tmp_path):
    from click.testing import CliRunner

    from abricot_local.cli import cli
    from abricot_local.lm_eval.tasks import TASKS_PATH

    r = CliRunner().invoke(cli, ["lm-eval", "--tasks-path"])  # no lm-eval needed to print it
    assert r.exit_code == 0 and r.output.strip() == str(TASKS_PATH)
    names = {p.stem for p in TASKS_PATH.glob("*.yaml")}
    assert {"_abricot_paper", "_abricot_calamita", "abricot_abs_paper", "abricot_inc_paper", "abricot_abs_calamita",
            "abricot_inc_calamita", "discotex_card", "discotex_itabench"} <= names
    r = CliRunner().invoke(cli, ["lm-eval"])
    assert r.exit_code != 0 and "needs MODEL" in r.output and "Traceback" not in r.output
    _lm_eval()
    r = CliRunner().invoke(cli, ["lm-eval", "gemma-3-270m", "--limit", "2"])
    assert r.exit_code != 0 and "needs --tasks" in r.output and "abricot_paper" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_two_different_models_are_refused(tmp_path):
    """`lm-eval smollm2-135m-pypi --model_args model=gemma-3-270m` evaluated Gemma without a word."""
    from click.testing import CliRunner

    from abricot_local.cli import cli

    _lm_eval()
    for given in (["--model_args", "model=gemma-3-270m"], ["--model_args", "n_ctx=512", "model=gemma-3-270m"],
                  ["-a", '{"model": "gemma-3-270m", "n_ctx": 512}']):
        r = CliRunner().invoke(cli, ["lm-eval", "smollm2-135m-pypi", *given, "--tasks", "x"])
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
        assert "two models" in r.output and "smollm2-135m-pypi" in r.output and "gemma-3-270m" in r.output
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    for same in ("model=smollm2-135m-pypi", f"model={tmp_path}/./m.gguf"):  # the same model: no refusal
        name = str(model) if "m.gguf" in same else "smollm2-135m-pypi"
        with pytest.raises(_Reached):
            _lm_eval_cli(name, ["--model_args", same, "--tasks", "x"])


def test_metadata_data_names_each_tasks_own(abricot_file, tmp_path):
    """``--metadata '{"data": FILE}'`` gave FILE to every task: ABRICOT's file to DISCOTEX too."""
    _lm_eval()
    from invented_data import write_discotex

    from abricot_local.errors import AbricotError
    from abricot_local.lm_eval.tasks import loaders

    folder = write_discotex(tmp_path / "discotex", 4)
    both = {"abricot": str(abricot_file), "discotex": str(folder)}
    assert len(loaders.abricot("abs", "paper", data=both)["validation"]) == 127
    assert len(loaders.discotex(data=both)["test"]) == 8
    assert len(loaders.abricot("inc", "calamita", data=str(abricot_file))["validation"]) == 127  # one task: one path
    with pytest.raises(AbricotError) as err:  # the one path given to every task, and DISCOTEX cannot read it
        loaders.discotex(data=str(abricot_file))
    assert """--metadata '{"data": {"abricot": FILE, "discotex": DIR}}'""" in str(err.value)
    with pytest.raises(AbricotError, match="Did you mean: abricot") as err:
        loaders.abricot("abs", "paper", data={"abricto": str(abricot_file)})
    assert "--metadata" in str(err.value)


class _Reached(Exception):
    pass


def _lm_eval_cli(model, args):
    """run_cli up to the point where lm-eval would start evaluating."""
    from lm_eval._cli import HarnessCLI

    from abricot_local.lm_eval import model as lm_model

    def stop(self, ns):
        raise _Reached

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(HarnessCLI, "execute", stop)
        lm_model.run_cli(model, args)


@pytest.mark.real  # lm-eval indexes its own thousands of task files first
def test_an_unknown_task_is_one_line(isolated_home):
    _lm_eval()
    r = subprocess.run([sys.executable, "-m", "abricot_local", "lm-eval", "fake", "--model_args", "backend=fake",
                        "--tasks", "nosuchtask"], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "Tasks not found: nosuchtask" in r.stderr and "abricot_paper" in r.stderr


# -- the real model -------------------------------------------------------------------------------
THREADS = 1  # robust on a shared 2-core machine (2 spinning threads crawl when the cores are busy)
N_CTX = 512
N_ITEMS = 2


def _discotex_dir() -> Path:
    """The release, as the discotex_dir fixture finds it (skip with how, fail under CI=true)."""
    import realdata

    return realdata.require(realdata.DISCOTEX)


def _write_real_data(folder: Path) -> None:
    """DISCOTEX items as lm-eval multiple choice (target_delimiter " ": the continuations are
    " A" ... " E", as `run` scores them), their paragraphs as texts, few-shot questions. The items
    with the shortest contexts: lm-eval's requests and batching, not the prompts, are under test."""
    from abricot_local.tasks.base import TaskOptions
    from abricot_local.tasks.discotex import LETTERS, DiscotexTask

    items = sorted(DiscotexTask(TaskOptions(data_dir=str(_discotex_dir()))).items(), key=lambda it: len(it.context))
    items = items[:N_ITEMS]
    data = folder / "lm_eval_data"
    data.mkdir(parents=True, exist_ok=True)
    mc = [{"id": it.id, "context": it.context, "choices": list(LETTERS), "gold": it.gold} for it in items]
    roll = [{"text": it.context.split("Paragrafo: '")[1].split("'\nDomanda")[0]} for it in items]
    shots = "Domanda: Qual è la capitale della Francia?\nRisposta: Parigi\n\n"
    gen = [{"prompt": f"{shots}Domanda: Qual è la capitale {x}?\nRisposta:", "answer": a}
           for x, a in (("d'Italia", "Roma"), ("della Spagna", "Madrid"), ("della Germania", "Berlino"))]
    for name, rows in (("mc", mc), ("rolling", roll), ("generate", gen)):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                            encoding="utf-8")


@pytest.fixture(scope="module")
def real(gemma_path, tmp_path_factory):
    """One `abricot-local lm-eval` run (--batch_size 1) and one lm-eval Python API run
    (batch_size 64) of the three tasks; then the LM's requests again, shuffled."""
    _lm_eval()
    from click.testing import CliRunner

    from abricot_local.cli import cli
    from abricot_local.lm_eval.model import AbricotLM

    folder = tmp_path_factory.mktemp("lm_eval_real")
    _write_real_data(folder)
    with pytest.MonkeyPatch.context() as mp:  # isolated as conftest's isolated_home does, for the module
        mp.setenv("ABRICOT_CACHE_DIR", str(folder / "cache"))
        mp.setenv("ABRICOT_CONFIG_DIR", str(folder / "config"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        mp.chdir(folder)  # the task YAMLs read lm_eval_data/ relative to the working folder
        r = CliRunner().invoke(cli, ["lm-eval", str(gemma_path), "--include_path", str(TASKS), "--tasks", ",".join(ALL),
                                     "--model_args", f"n_ctx={N_CTX},threads={THREADS}", "--output_path", "out",
                                     "--log_samples", "--batch_size", "1"])
        assert r.exit_code == 0, r.output + repr(r.exception)
        (results_file,) = (folder / "out").rglob("results_*.json")
        cli_results = json.loads(results_file.read_text(encoding="utf-8"))
        cli_samples = {t: sorted((_norm(t, json.loads(x)) for x in next((folder / "out").rglob(
            f"samples_{t}_*.jsonl")).read_text(encoding="utf-8").splitlines()), key=lambda s: s["doc_id"]) for t in ALL}
        lm = AbricotLM(model=str(gemma_path), n_ctx=N_CTX, threads=THREADS)
        api = _evaluate(lm, ALL, batch_size=64)
        api_samples = {t: sorted((_norm(t, x) for x in api["samples"][t]), key=lambda s: s["doc_id"]) for t in ALL}
        shuffled = {}
        for task, method in (("abricot_mc", lm.loglikelihood), ("abricot_rolling", lm.loglikelihood_rolling),
                             ("abricot_generate", lm.generate_until)):
            from lm_eval.api.instance import Instance

            args = [a for s in cli_samples[task] for a in s["args"]]
            order = list(range(len(args)))
            random.Random(7).shuffle(order)
            got = method([Instance("loglikelihood", {}, args[k], 0) for k in order])
            shuffled[task] = [_norm(task, {"arguments": [], "resps": [[got[order.index(k)]]]})["resps"][0]
                              for k in range(len(args))]
        lm.close()
    return {"cli": cli_results, "samples": cli_samples, "api": api, "api_samples": api_samples, "shuffled": shuffled}


def _norm(task: str, s: dict) -> dict:
    """A logged sample with its arguments as tuples and each response as the LM returned it:
    (log-likelihood, is_greedy), a log-likelihood, a text. The saved JSONL spells arguments as
    {"gen_args_K": {"arg_I": ...}} and numbers as strings (str(float) round-trips exactly)."""
    a = s["arguments"]
    if isinstance(a, dict):
        a = [[v[f"arg_{i}"] for i in range(len(v))] for _, v in sorted(a.items(), key=lambda kv: int(kv[0].rsplit("_", 1)[1]))]

    def one(resp):
        v = resp[0]
        if task == "abricot_mc":
            return (float(v[0]), str(v[1]) == "True")
        return float(v) if task == "abricot_rolling" else str(v)

    return {**s, "args": [tuple(x) for x in a], "resps": [one(r) for r in s["resps"]]}


@pytest.mark.real
def test_real_outputs_are_independent_of_batch_size_and_order(real):
    for task in ALL:
        logged = [r for s in real["samples"][task] for r in s["resps"]]
        assert len(logged) == sum(len(s["args"]) for s in real["samples"][task]) > 0
        assert [r for s in real["api_samples"][task] for r in s["resps"]] == logged  # --batch_size 1 and 64
        assert real["shuffled"][task] == logged  # the requests again, shuffled


@pytest.mark.real
def test_real_logged_loglikelihoods_equal_a_separate_scoring(real, gemma_path):
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend, LlamaCppOptions
    from abricot_local.lm_eval.model import lm_eval_windows

    b = LlamaCppBackend(gemma_path, LlamaCppOptions(n_ctx=N_CTX, threads=THREADS, engine="single"))
    try:
        for s in real["samples"]["abricot_mc"]:
            ctx = s["args"][0][0]
            conts = tuple(a[1] for a in s["args"])
            assert conts == (" A", " B", " C", " D", " E")  # lm-eval's target delimiter, as `run` scores
            sep = b.score(Request(ctx, conts))  # fresh cache, no reuse
            assert s["resps"] == list(zip(sep.logprobs, sep.greedy))
            gold = int(s["target"])
            lone = b.score(Request(ctx, (conts[gold],)))
            # one continuation alone: a longer trunk (its own token in the last decode call);
            # measured identical here, accepted within 1e-4 nats
            assert abs(lone.logprobs[0] - sep.logprobs[gold]) <= 1e-4
            assert float(s["acc"]) == float(int(np.argmax(sep.logprobs)) == gold)
        for s in real["samples"]["abricot_rolling"]:
            text = s["args"][0][0]
            total = 0.0
            for ctx, pred in lm_eval_windows(b.tokenize(text, bos=False), b.prefix_token, N_CTX - 1):
                total += b.score_tokens(ctx, [pred]).logprobs[0]
            assert s["resps"] == [total]
        for s in real["samples"]["abricot_generate"]:
            ctx, kw = s["args"][0]
            g = b.generate(ctx, kw["until"], kw["max_gen_toks"])
            assert s["resps"] == [g.text] and g.reason in ("until", "max_tokens", "eos")
            # what it generated is greedy under the scoring schedule too
            assert b.score_tokens(b.tokenize(ctx), [g.tokens]).greedy == (True,)
    finally:
        b.close()


@pytest.mark.real
def test_real_results_carry_the_provenance(real, gemma_path):
    import hashlib

    prov = real["cli"]["config"]["abricot_local"]
    assert prov["model"]["sha256"] == hashlib.sha256(Path(gemma_path).read_bytes()).hexdigest()
    assert prov["schedule"]["engine"] == "prefix" and prov["schedule"]["n_ctx"] == N_CTX
    assert prov["threads"] == THREADS and prov["llama_cpp_python"]
    assert prov["requests"]["rolling_window_tokens"] == N_CTX - 1
    assert real["cli"]["config"]["model"] == "abricot-local"
    assert set(real["cli"]["results"]) == set(ALL)
    assert real["api"]["config"]["abricot_local"]["model"] == prov["model"]
    gen = [r for s in real["samples"]["abricot_generate"] for r in s["resps"]]
    assert gen[0].strip() == "Roma"  # the model knows this one; a broken generation would not


@pytest.mark.real
def test_real_rolling_windows_at_a_small_context(gemma_path):
    """Several windows on the real model: the sum of lm-eval's windows, each scored exactly."""
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend, LlamaCppOptions
    from abricot_local.lm_eval.model import lm_eval_windows

    _lm_eval()
    text = ("Nel mezzo del cammin di nostra vita mi ritrovai per una selva oscura, ché la diritta via era "
            "smarrita. Ahi quanto a dir qual era è cosa dura esta selva selvaggia e aspra e forte che nel "
            "pensier rinova la paura!")
    b = LlamaCppBackend(gemma_path, LlamaCppOptions(n_ctx=32, threads=THREADS))
    try:
        tokens = b.tokenize(text, bos=False)
        # n_ctx 32 asked (llama.cpp allocates 256 cells, but decodes at most 32 tokens per call)
        assert requests_.window_tokens(b) == 31 and b.provenance().schedule["n_batch"] == 32
        windows = list(lm_eval_windows(tokens, b.prefix_token, 31))
        assert len(windows) >= 2
        (got,) = requests_.loglikelihood_rolling(b, [text], lm_eval_windows)
        want = 0.0
        for ctx, pred in windows:
            want += b.score_tokens(ctx, [pred]).logprobs[0]
        assert got == want and -20 * len(tokens) < got < 0
        assert windows[0][0] == [b.prefix_token] == [b.session.bos]  # Gemma adds BOS: the text follows it
    finally:
        b.close()


# Gemma 3's chat template (its instruction-tuned GGUFs carry it; the embedded base model has none)
GEMMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% set role = 'model' if message['role'] == 'assistant' "
    "else message['role'] %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}")


@pytest.mark.real
def test_real_chat_template_renders_the_gguf_own(gemma_path, monkeypatch):
    """--apply_chat_template: lm-eval's chat history through the GGUF's template, BOS left to tokenize."""
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend, LlamaCppOptions

    b = LlamaCppBackend(gemma_path, LlamaCppOptions(vocab_only=True))
    try:
        msgs = [{"role": "user", "content": "Ciao"}, {"role": "assistant", "content": "Salve"},
                {"role": "user", "content": "Come stai?"}]
        with pytest.raises(UsageError, match="has no chat template"):
            b.render_chat(msgs)
        monkeypatch.setattr(b.session, "chat_template", lambda: GEMMA3_TEMPLATE)
        text = b.render_chat(msgs)
        assert text == ("<start_of_turn>user\nCiao<end_of_turn>\n<start_of_turn>model\nSalve<end_of_turn>\n"
                        "<start_of_turn>user\nCome stai?<end_of_turn>\n<start_of_turn>model\n")
        assert not b.render_chat(msgs[:2], add_generation_prompt=False).endswith("<start_of_turn>model\n")
        toks = b.tokenize(text, special=True)
        assert toks[0] == b.session.bos and toks.count(b.session.bos) == 1
        assert b.piece(toks[1]) == "<start_of_turn>"  # one special token, not its letters
    finally:
        b.close()


@pytest.mark.real
def test_real_a_chat_run_renders_each_prompt_as_lm_eval_does(gemma_path, monkeypatch):
    """`run --chat-template` renders each prompt through the template as the one user turn, as lm-eval's
    --apply_chat_template does through this backend: Gemma 3's `| trim` drops an ABRICOT prompt's last newline
    (a head + prompt + tail wrap kept it, and scored another text than the lm-eval door)."""
    from abricot_local.backends.chat import turn_of
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend, LlamaCppOptions
    from abricot_local.run.execute import apply_chat
    from abricot_local.tasks.base import Item
    from abricot_local.tasks.selection import TaskRun

    b = LlamaCppBackend(gemma_path, LlamaCppOptions(vocab_only=True))
    try:
        monkeypatch.setattr(b.session, "chat_template", lambda: GEMMA3_TEMPLATE)
        it = Item(id="1", source="s", context="Parola: casa\nRisposta:\n", choices=("1", "2"),
                  continuations=(" 1", " 2"), gold=0)
        (run,) = apply_chat([TaskRun(None, (it,))], b)
        (got,) = run.items
        lm_eval = b.render_chat([{"role": "user", "content": it.context}])  # what lm_eval/model.py gives lm-eval
        head, tail = turn_of(b)
        assert got.context == lm_eval == head + it.context.strip() + tail != head + it.context + tail
        assert (got.continuations, got.parse_special) == (("1", "2"), True)
    finally:
        b.close()
