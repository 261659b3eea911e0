"""End to end on the real Gemma 3 270M (PyPI package, test extra), CPU."""

import json

import pytest
from click.testing import CliRunner

from abricot_local.backends.llama_cpp.backend import LlamaCppOptions
from abricot_local.core import Request, log_softmax
from abricot_local.cli import cli
from abricot_local.tasks.base import TaskOptions
from abricot_local.tasks.discotex import DiscotexTask
from abricot_local.tasks.abricot import AbricotAbsTask
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


ENGINE_BATCH = 64  # tokens per decode call here: every item's trunk spans several calls (asserted)


def items_for_engines(discotex_dir):
    """Two items of each task, each with its prefix (the shortest DISCOTEX ones, ABRICOT with 1 shot:
    the engines, not the prompts, are under test; the naive engine decodes every continuation from
    scratch). With n_batch 64 each trunk still straddles decode-call boundaries, as the default 512
    does on full-length items."""
    d = sorted(DiscotexTask(TaskOptions(data_dir=str(discotex_dir))).items(), key=lambda it: len(it.context))[:2]
    a = AbricotAbsTask(TaskOptions(data=(("abricot", str(FIXTURE)),), shots=1)).items()[:2]
    return d + a


def test_engines_and_item_order_are_bit_identical(gemma_path, discotex_dir):
    items = items_for_engines(discotex_dir)
    results = {}
    for engine in ("naive", "single", "prefix"):
        b = backend(gemma_path, engine=engine, n_batch=ENGINE_BATCH)
        if engine == "naive":
            schs = [b.schedule(it.request()) for it in items]
            spans = [sch.trunk_len - sch.prefix_len for sch in schs]  # the trunk past the prefix
            assert min(spans) > ENGINE_BATCH, spans
        order = items if engine != "prefix" else list(reversed(items))
        results[engine] = {it.id: b.score(it.request()).logprobs for it in order}
        b.close()
    assert results["naive"] == results["single"] == results["prefix"]


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
