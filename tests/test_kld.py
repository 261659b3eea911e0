"""The full-vocabulary KL divergence (`kld`): rows compared in lockstep and dropped, statistics as
llama-perplexity reports them, kept in the run folder and shown by the ladder, compare and the API;
`quantize`'s pure parts (the rungs asked, llama.cpp's fallbacks in one line, the models.toml fragment)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from abricot_local.analysis.kld import KldStats, summarise
from abricot_local.backends.engines import engine_class
from abricot_local.backends.fake import FakeSession
from abricot_local.backends.kld import KlRows, PairedSession, kl_row
from abricot_local.backends.options import ScoringOptions
from abricot_local.backends.base import Schedule
from abricot_local.cli import cli
from abricot_local.errors import NonFiniteError, UsageError
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_kl_row_is_the_full_vocabulary_kl_in_float64():
    rng = np.random.default_rng(0)
    p, q = rng.normal(size=1000).astype(np.float32), rng.normal(size=1000).astype(np.float32)
    kl, same = kl_row(p, q)
    lp = p.astype(np.float64) - np.log(np.exp(p.astype(np.float64)).sum())
    lq = q.astype(np.float64) - np.log(np.exp(q.astype(np.float64)).sum())
    assert kl == pytest.approx(float((np.exp(lp) * (lp - lq)).sum()), rel=1e-9) and kl > 0
    assert same == (int(np.argmax(p)) == int(np.argmax(q)))
    assert kl_row(p, p.copy()) == (0.0, True)  # the same row: exactly 0
    bad = q.copy()
    bad[3] = np.nan
    with pytest.raises(NonFiniteError, match="non-finite logits"):
        kl_row(p, bad)


def test_summary_is_llama_perplexity_s():
    rng = np.random.default_rng(1)
    x = rng.exponential(0.05, size=2001)
    s = summarise(x, x < 0.1, n_items=7)
    se = x.std(ddof=1) / np.sqrt(x.size)
    assert s.mean == pytest.approx(x.mean()) and s.ci95 == pytest.approx((x.mean() - 1.96 * se, x.mean() + 1.96 * se),
                                                                          rel=1e-4)
    srt = np.sort(x)  # llama-perplexity: linear interpolation at fraction * (n - 1)
    assert s.median == srt[1000] and s.p99 == pytest.approx(srt[1980]) and s.max == srt[-1]
    assert s.p99_9 == pytest.approx(srt[1998]) and s.same_top == np.mean(x < 0.1)
    assert KldStats.from_dict(json.loads(json.dumps(s.to_dict()))) == s and s.n_items == 7
    with pytest.raises(Exception, match="no token"):
        summarise([], [])


def _score(ref_seed: int, rung_seed: int) -> tuple[KlRows, int]:
    opts = ScoringOptions(engine="prefix")
    rows = KlRows()
    engine = engine_class("prefix")(PairedSession(FakeSession(ScoringOptions(seed=ref_seed)),
                                                  FakeSession(ScoringOptions(seed=rung_seed)), rows), opts)
    sch = [Schedule.from_tokens([1, 5, 9, 2, 7], [[3, 4], [8]], 64), Schedule.from_tokens([1, 5, 9, 6], [[3]], 64)]
    engine.score_many(sch, ["a", "b"])
    assert len(rows) == engine.counters.tokens > 0  # a row at every decoded token, not only the scored ones
    return rows, engine.counters.decode_calls


def test_the_two_models_decode_the_same_calls_and_every_row_is_compared():
    same, calls = _score(3, 3)
    assert len(same) > 0 and set(same.kl) == {0.0} and all(same.same_top)
    other, calls2 = _score(3, 4)
    assert len(other) == len(same) and calls2 == calls and min(other.kl) > 0  # another model: every row differs


def test_kld_of_two_runs_is_kept_in_the_run_folder_and_shown(tmp_path):
    data = write_discotex(tmp_path / "d", 6)
    models = tmp_path / "models.toml"
    models.write_text("".join(f'[tiny-{k}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\nbase = "Tiny"\n\n'
                              for k, q in (("q8", "Q8_0"), ("q4", "Q4_K_M"))), encoding="utf-8")
    out = tmp_path / "ladder"
    r = invoke("run", "tiny-q8", "--models", models, "--quants", "Q4_K_M,Q8_0", "--tasks", "discotex",
               "--data-dir", data, "--out", out)
    assert r.exit_code == 0, r.output
    r = invoke("kld", out / "tiny-q8", out / "tiny-q4", "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)[0]["tasks"]["discotex"]
    assert res["n_items"] == 12 and res["n_tokens"] >= 12 and res["mean"] == 0.0 and res["same_top"] == 1.0
    doc = json.loads((out / "tiny-q4" / "kld.json").read_text())
    ref_sha = json.loads((out / "tiny-q8" / "results.json").read_text())["model"]["sha256"]
    assert list(doc["references"]) == [ref_sha or "name:tiny-q8"]
    ladder = json.loads(invoke("report", out, "--models", models, "--table", "quant", "--format", "json").stdout)
    q4 = next(x for x in ladder["quant_ladder"] if x["quant"] == "Q4_K_M")
    assert q4["kld"]["mean"] == 0.0 and q4["kld"]["same_top"] == 1.0 and q4["kl_mean"] == 0.0  # both, apart
    assert "KLD mean" in invoke("report", out, "--models", models, "--table", "quant").stdout
    cmp = json.loads(invoke("compare", out / "tiny-q8", out / "tiny-q4", "--models", models, "--format", "json").stdout)
    assert [(k["run"], k["task"], k["kld"]["n_items"]) for k in cmp["kld"]] == [("tiny-q4", "discotex", 12)]
    import abricot_local as al

    frame = al.compare([out / "tiny-q8", out / "tiny-q4"], models_file=models).kld()
    assert list(frame["run"]) == ["tiny-q4"] and frame["mean"].iloc[0] == 0.0
    bad = invoke("kld", out / "tiny-q8", out / "tiny-q8")
    assert bad.exit_code != 0 and "is the reference itself" in bad.output


def test_quantize_parses_rungs_and_summarises_fallbacks():
    from abricot_local.models.quantize import parse_rungs

    assert parse_rungs("q8_0, Q4_K_M,Q8_0") == ("Q8_0", "Q4_K_M")
    with pytest.raises(UsageError, match="unknown quant Q9"):
        parse_rungs("Q9")
    pytest.importorskip("llama_cpp")
    from abricot_local.backends.llama_cpp.quantize import fallback_summary

    one = ("warning: blk.0.attn_q.weight                  - ncols    640 not divisible by 256 (required for type "
           "   q6_K) -> falling back to    q8_0\n")
    other = "[  13/ 236]            blk.0.ffn_up.weight - [ 1024,  2048,     1,     1], type =    f16, converting to q6_K\n"
    text = one * 3 + other + "llama_model_quantize_impl: WARNING: 3 of 236 tensor(s) required fallback quantization\n"
    assert fallback_summary(text) == "3 of 236 tensors fell back (q6_K -> q8_0: 3; columns not divisible by 256)"
    assert fallback_summary(other) == ""


def test_quantize_refuses_a_quantized_source_without_allow_requantize(tmp_path):
    from abricot_local.models.quantize import make_ladder
    from gguf_synth import Synth, kv

    src = Synth(kvs=[*Synth().kvs, kv("general.file_type", "u32", 15)]).write(tmp_path / "m.gguf")
    with pytest.raises(UsageError, match=r"already quantized \(Q4_K_M\).*allow_requantize=True"):
        make_ladder(str(src), "Q8_0", out=str(tmp_path / "rungs"))
    assert not (tmp_path / "rungs").exists()
