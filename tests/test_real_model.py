"""End to end on the real Gemma 3 270M (PyPI package, test extra), CPU."""

import json

import pytest
from click.testing import CliRunner

from abricot_local.backends.llama_cpp.backend import LlamaCppOptions
from abricot_local.core import Request, log_softmax
from abricot_local.cli import cli
from conftest import FIXTURE

pytestmark = pytest.mark.real
OPTS = dict(threads=2, n_ctx=2048)


def backend(path, **kw):
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend

    return LlamaCppBackend(path, LlamaCppOptions(**{**OPTS, **kw}))


def reference_logprob(b, sch, i, memo=None):
    """Score continuation i alone, token by token, from an empty KV cache, with the canonical cuts.
    With ``memo`` (a dict), the rows of a prefix + trunk decoded from an empty cache are kept and
    reused for a continuation of the same sequence that has no tokens past the trunk (DISCOTEX's
    one-token answers: the same decode calls five times otherwise)."""

    from abricot_local.backends.base import chunks

    s = b.session  # llama.cpp's primitives, without the engines
    seq = sch.seqs[i]
    rest = seq[sch.trunk_len : len(seq) - 1]
    key = (tuple(seq[: sch.trunk_len]), sch.prefix_len, sch.trunk_logit_positions())
    if memo is not None and not rest and key in memo:
        return sum(float(memo[key][pos][seq[pos + 1]]) for pos in range(sch.ctx_lens[i] - 1, len(seq) - 1))

    def decode(start, toks, outputs):
        rows = {}
        for pos0, part in chunks(start, toks, b.options.n_batch):
            raw = s.decode([(0, pos0 + k, t, (pos0 + k) in outputs) for k, t in enumerate(part)])
            rows.update((pos0 + k, log_softmax(r)) for k, r in enumerate(raw) if r is not None)
        return rows

    s.clear()
    decode(0, seq[: sch.prefix_len], set())
    got = decode(sch.prefix_len, seq[sch.prefix_len : sch.trunk_len], set(sch.trunk_logit_positions()))
    if memo is not None and not rest:
        memo[key] = dict(got)
    if rest:
        got |= decode(sch.trunk_len, rest, set(range(sch.trunk_len, len(seq) - 1)))
    total = 0.0
    for pos in range(sch.ctx_lens[i] - 1, len(seq) - 1):  # every continuation token
        total += float(got[pos][seq[pos + 1]])
    s.clear()
    b.engine.reset()
    return total


def test_run_discotex_end_to_end_and_logprobs_equal_token_by_token(gemma_path, gemma_run):
    out = gemma_run.out  # `run` on the first 4 items (shared with other tests)
    res = json.loads((out / "results.json").read_text())
    assert res["model"]["sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert res["provenance"]["architecture"] == "gemma3"
    samples = [json.loads(l) for l in (out / "samples-discotex.jsonl").read_text().splitlines()]
    assert len(samples) == 4
    b = backend(gemma_path)
    memo = {}  # an item's prefix + trunk decoded once from an empty cache for its one-token answers
    for k, s in enumerate(samples):
        req = Request(s["context"], tuple(s["continuations"]))
        sch = b.schedule(req)
        assert [list(seq[c:]) for seq, c in zip(sch.seqs, sch.ctx_lens)] == s["continuation_tokens"]
        if k < 2:  # the run's two cases: the first item from an empty cache, the next with the prefix held
            for i, lp in enumerate(s["logprobs"]):
                assert abs(reference_logprob(b, sch, i, memo) - lp) <= 1e-3
    assert len(memo) == 2  # one decode per item: its answers are one token each
    b.close()


def test_multi_token_continuations_equal_token_by_token(gemma_path):
    b = backend(gemma_path)
    req = Request("Completa.\n\nLa capitale d'Italia è", (" Roma", " Milano e dintorni", " una città"))
    sch = b.schedule(req)
    assert not sch.fast_path
    scored = b.score(req)
    for i, lp in enumerate(scored.logprobs):
        assert abs(reference_logprob(b, sch, i) - lp) <= 1e-3
    assert scored.logprobs[0] > scored.logprobs[1]
    b.close()


ENGINE_BATCH = 8  # tokens per decode call here: every trunk, and a tail, span several calls (asserted)


def requests_for_engines():
    """Short requests that still straddle decode calls (the engines, not the prompts, are under
    test; their equivalence on the tasks' items is proven on the fake backend, tests/test_engines.py):
    two sharing a prefix (held between them), one without, each with tails to decode and rewind, one
    longer than a decode call."""
    tails = (" Roma", " Milano e dintorni", " una città antica che si affaccia sul Tevere e sul mare")
    m = [Request(f"Completa la frase.\n\nSecondo i libri di storia, la capitale {x} è", tails, label=f"m{k}")
         for k, x in enumerate(("d'Italia", "della Francia"))]
    return [*m, Request("Il gatto dorme sul divano del salotto e il cane", (" abbaia", " dorme anche lui"), label="n")]


def test_engines_and_item_order_are_bit_identical(gemma_path):
    """llama.cpp's own KV cache under every engine: the prefix held and reused, tails decoded and
    rewound, batched at parallel 1 (the prefix schedule, on sequence 1 copied from 0)."""
    reqs = requests_for_engines()
    results = {}
    for engine, extra in (("naive", {}), ("single", {}), ("prefix", {}), ("batched", {"parallel": 1})):
        b = backend(gemma_path, engine=engine, n_batch=ENGINE_BATCH, **extra)
        if engine == "naive":
            schs = [b.schedule(r) for r in reqs]
            spans = [sch.trunk_len - sch.prefix_len for sch in schs]  # the trunk past the prefix
            assert min(spans) > ENGINE_BATCH, spans
            assert max(len(sch.tail(i)) for sch in schs for i in range(len(sch.seqs))) > ENGINE_BATCH
        order = list(reversed(reqs)) if engine in ("single", "batched") else reqs
        size = b.batch_size()  # as the runner scores: chunks of batch_size() through score_many
        got = [s.logprobs for k in range(0, len(order), size) for s in b.score_many(order[k : k + size])]
        results[engine] = {(r.label, r.context): lp for r, lp in zip(order, got)}
        if engine == "prefix":
            assert b.counters.prefix_hits == 1  # the prefix of the first request, reused by the second
        if engine == "batched":
            sched = b.provenance().schedule
            assert sched["parallel"] == 1 and sched["n_seq_max"] == 2
        b.close()
    assert results["naive"] == results["single"] == results["prefix"] == results["batched"]


def test_truncated_gguf_is_a_clean_error(gemma_path, tmp_path, discotex_dir):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(gemma_path.read_bytes()[: 5_000_000])
    r = CliRunner().invoke(cli, ["run", str(cut), "--data-dir", str(discotex_dir), "--limit", "1", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "Traceback" not in r.output  # refused by gguf_check before llama.cpp opens it
    assert "is not a usable GGUF model" in r.output and "the file is incomplete" in r.output
    assert not (tmp_path / "o" / "results.json").exists()


def test_embedded_alias_runs_abricot(tmp_path):
    out = tmp_path / "o"
    r = CliRunner().invoke(cli, ["run", "gemma-3-270m", "--tasks", "abricot", "--data", f"abricot={FIXTURE}",
                                 "--limit", "1", "--shots", "0", "--prompt-variant", "calamita", "--out", str(out)])
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert res["model"]["alias"] == "gemma-3-270m"
    assert res["tasks"]["abricot_inc"]["config"]["prompt_variant"] == "calamita"


def test_memory_refusal_names_both_numbers_and_force_overrides(gemma_path, tmp_path, monkeypatch, discotex_dir):
    from abricot_local import memory

    monkeypatch.setattr(memory, "available_memory", lambda: 50 * 2**20)
    args = ["run", str(gemma_path), "--data-dir", str(discotex_dir), "--limit", "1", "--threads", "2"]
    r = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "a")])
    assert r.exit_code != 0 and "not enough memory" in r.output and "--force" in r.output
    assert "KV cache" in r.output and "GiB" in r.output
    r = CliRunner().invoke(cli, [*args, "--force", "--out", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
