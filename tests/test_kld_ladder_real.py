"""The lockstep ladder on real llama.cpp rows (SmolLM2-135M: its F16 written by the project's quantizer
the reference, its Q8_0 and the original Q4_1 the rungs): each rung's rows the same bits in the ladder
as in a pair, every row within the stated bound of the one-row `kl_row`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from abricot_local.backends.base import Schedule
from abricot_local.backends.engines import engine_class
from abricot_local.backends.kld import KlRows, LadderSession, PairedSession, kl_row
from test_kld_ladder import KL_ROW_BOUND

pytestmark = pytest.mark.real

TEXT = ("Il gatto dorme sul divano mentre fuori piove. ", ["La pioggia cade da ore.", "Il cane abbaia.",
                                                       "Domani farà bel tempo, dicono."])


class Kept:
    """A session whose rows are copied as they come (the test's, to compare with kl_row)."""

    def __init__(self, session):
        self.s, self.rows = session, []

    def decode(self, entries):
        out = self.s.decode(entries)
        self.rows += [np.array(x) for x in out if x is not None]
        return out

    def __getattr__(self, name):
        return getattr(self.s, name)


def test_a_real_ladder_is_its_pairs_bit_for_bit(smollm2_path, tmp_path):
    from abricot_local.backends.llama_cpp.options import LlamaCppOptions
    from abricot_local.backends.llama_cpp.session import LlamaSession
    from abricot_local.models.quantize import make_ladder

    ladder = make_ladder(str(smollm2_path), "Q8_0", out=str(tmp_path), allow_requantize=True, threads=2)
    opts = LlamaCppOptions(n_ctx=256, n_batch=16, threads=1, engine="prefix")  # 1: quick on a busy machine
    ref = Kept(LlamaSession(ladder.rungs[0].path, opts))
    rungs = [Kept(LlamaSession(p, opts)) for p in (ladder.rungs[1].path, smollm2_path)]
    try:
        ctx = ref.tokenize(TEXT[0])
        sch = [Schedule.from_tokens(ctx, [ref.tokenize(" " + c, bos=False) for c in TEXT[1]], 256)]

        def score(session):
            engine_class("prefix")(session, opts).score_many(sch, ["t"])

        rows = [KlRows(), KlRows()]
        score(LadderSession(ref, rungs, rows, threads=2))
        assert len(rows[0]) == len(ref.rows) > 16  # more than one decode call
        for k, rung in enumerate(rungs):
            d = [abs(kl_row(a, b)[0] - got) for a, b, got in zip(ref.rows, rung.rows, rows[k].kl, strict=True)]
            assert max(d) <= KL_ROW_BOUND
            alone = KlRows()
            ref.s.clear()
            rung.s.clear()
            score(PairedSession(ref.s, rung.s, alone))
            assert alone.kl == rows[k].kl and alone.same_top == rows[k].same_top
        assert max(rows[0].kl) > 0  # the Q8_0 is not the F16
    finally:
        for s in (ref, *rungs):
            s.s.close()


def test_the_kld_command_gives_a_rung_the_same_kld_json_alone_and_in_a_ladder(smollm2_path, discotex_dir, tmp_path):
    """`kld REF Q8_0 Q4_1` and `kld REF Q8_0` on real SmolLM2 runs (one DISCOTEX item, one thread): the
    Q8_0's kld.json statistics the same bits, the ladder one reference pass decoding what the lone pair did
    and what `kld --dry-run` counted."""
    from click.testing import CliRunner

    from abricot_local.cli import cli
    from abricot_local.models.quantize import make_ladder
    from abricot_local.run.kld import kld_runs
    from abricot_local.run.kld_cost import kld_cost

    ladder = make_ladder(str(smollm2_path), "Q8_0", out=str(tmp_path / "rungs"), allow_requantize=True, threads=2)
    runs = []
    for k, model in enumerate((ladder.rungs[0].path, ladder.rungs[1].path, smollm2_path)):
        runs.append(tmp_path / f"run{k}")
        r = CliRunner().invoke(cli, ["run", str(model), "--tasks", "discotex", "--data-dir", str(discotex_dir),
                                     "--limit", "1", "--threads", "1", "--n-ctx", "512", "--out", str(runs[-1])])
        assert r.exit_code == 0, r.output
    (alone,) = kld_runs(runs[0], [runs[1]])
    first = json.loads((runs[1] / "kld.json").read_text())
    both = kld_runs(runs[0], runs[1:])
    assert [r.pass_rungs for r in both] == [tuple(runs[1:])] * 2 and both[0].decode_calls == alone.decode_calls
    again = json.loads((runs[1] / "kld.json").read_text())
    (a,), (b,) = first["references"].values(), again["references"].values()
    assert a["tasks"] == b["tasks"] and a["tasks"]["discotex"]["n_tokens"] > 100
    means = [r.tasks["discotex"].mean for r in both]
    assert min(means) > 0 and means[0] != means[1]  # two models, each its own rows
    # `kld --dry-run`'s plan of it: the tokens and calls the pass decoded; each model's output rows in memory
    (one,) = kld_cost(runs[0], runs[1:]).passes
    (task,) = one.tasks
    assert (task.work.tokens, task.work.calls) == (both[0].tasks["discotex"].n_tokens, both[0].decode_calls)
    assert one.rows_bytes == 3 * 512 * 49152 * 4 and one.memory.fits  # n_batch x SmolLM2's vocabulary, float32
