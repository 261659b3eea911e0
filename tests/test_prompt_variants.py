"""--prompt-variant all (or a list): one instance per prompt variant, keyed TASK[@PROTOCOL]~VARIANT,
and "does the prompt matter?" (analysis/prompts.py, report --table prompts). Fake-backend runs (their
answers rewritten to known accuracies), resume / shard / merge of a multi-variant run, one real Gemma run.

Why some take 1-3 s: every plan builds DISCOTEX's 1600 rebuilt items once per wording (about 0.65 s each,
on an idle core), and the report's study bootstraps each paired test; the Gemma test scores 2 items x 2
wordings (most of its time is the model's load)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.analysis import prompts as P
from abricot_local.analysis.loading import load_run
from abricot_local.analysis.runs import labelled
from abricot_local.cli import cli
from abricot_local.errors import AbricotError, TaskError, UsageError, recorded_words, render
from abricot_local.analysis.baselines import protocols_named
from abricot_local.tasks.selection import instances
from abricot_local.tasks import make_task, split_key
from abricot_local.tasks.base import Task, TaskOptions
from abricot_local.tasks.uses import normal, refuse_unused, several
from conftest import fail_after, rewrite_run

BOTH = "ABRICOT paper: llama-3.1-8b; CALAMITA leaderboard: Llama-3.1-8B-Instruct"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def keys(spec, names=("discotex",), reproduces="", **kw):
    o = TaskOptions(prompt_variant=normal(spec), **kw)
    named = protocols_named(reproduces) if reproduces else {}
    return [t.key for t in instances([make_task(n, o) for n in names], named, o.prompt_variant)]


def test_keys_of_the_variants_and_what_they_rebuild():
    assert normal(" ALL ") == ("all",) and normal("card, ita-bench,card") == ("card", "ita-bench") == \
        normal(["card", "ita-bench", "card"]) and normal("card") == ("card",)  # a tuple, parsed once
    assert several("all") and several("card,ita-bench") and not several("card") and not several(None)
    assert keys("all") == keys("ita-bench,card") == ["discotex", "discotex~ita-bench"]
    assert keys("card") == keys(None) == ["discotex"]  # one variant: the key it always had
    # ABRICOT's protocols fix the variant: each protocol's own keeps the plain key, the other is scored with the
    # protocol's other settings (noted); --shots 0 makes paper-under-calamita the same as paper-under-paper: once
    assert keys("all", ("abricot_abs",), BOTH) == ["abricot_abs", "abricot_abs~calamita", "abricot_abs@calamita",
                                                   "abricot_abs@calamita~paper"]
    assert keys("all", ("abricot_abs",), BOTH, shots=0) == ["abricot_abs", "abricot_abs~calamita"]
    t = make_task("abricot_abs@calamita~paper", TaskOptions(prompt_variant="all"))
    assert (t.key, t.variant, t.shots, t.protocol.name) == ("abricot_abs@calamita~paper", "paper", 0, "calamita")
    assert split_key(t.key) == ("abricot_abs", "calamita", "paper")
    (_, other) = instances([make_task("abricot_abs", TaskOptions(prompt_variant="all"))], {}, "all")
    assert any("prompt variant calamita (--prompt-variant all) where protocol paper fixes paper" in render(n, recorded_words)
               for n in other.option_notes)
    assert make_task("discotex", TaskOptions(prompt_variant="all")).variant == "card"  # a plain key: the default
    with pytest.raises(TaskError, match=r"has no prompt variant 'paper' .*its variants: card, ita-bench"):
        make_task("discotex~paper", TaskOptions())


def test_published_rows_are_checked_against_their_protocols_own_variant():
    from types import SimpleNamespace

    from abricot_local.analysis.baselines import entry_for
    from abricot_local.tasks.abricot import CALAMITA_PROTOCOL, PAPER_PROTOCOL

    held = {"abricot_abs@calamita~paper": SimpleNamespace(config={"protocol": "calamita"}),
            "abricot_abs~calamita": SimpleNamespace(config={"protocol": "paper"}),
            "abricot_abs": SimpleNamespace(config={"protocol": "paper"}),
            "abricot_abs@calamita": SimpleNamespace(config={"protocol": "calamita"})}
    refs = make_task("abricot_abs", TaskOptions(allow_download=False)).references()
    paper = next(r for r in refs if r.protocol == PAPER_PROTOCOL)
    calamita = next(r for r in refs if r.protocol == CALAMITA_PROTOCOL)
    assert entry_for(paper, held)[0] == "abricot_abs" and entry_for(calamita, held)[0] == "abricot_abs@calamita"
    assert entry_for(paper, {"abricot_abs~calamita": held["abricot_abs~calamita"]})[0] == "abricot_abs~calamita"


def test_bad_lists_are_refused_naming_the_variants(discotex_dir):
    with pytest.raises(UsageError, match="give it alone"):
        normal("all,card")
    with pytest.raises(UsageError, match="expects a variant name"):
        normal(" , ")

    class Plain(Task):  # a task without prompt variants
        name = "plain"

        def items(self):
            return []

        def metrics(self, samples):
            return {}

    with pytest.raises(UsageError, match=r"prompt_variant=all is used by no task .*plain uses no prompt variant"):
        refuse_unused([Plain], TaskOptions(prompt_variant="all"))
    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir",
                                 str(discotex_dir), "--prompt-variant", "card,bogus", "--limit", "2"])
    assert r.exit_code != 0 and isinstance(r.exception, (SystemExit, AbricotError))
    assert "no task of this run has a prompt variant 'bogus' (discotex's are card, ita-bench)" in r.output


def _run(out: Path, discotex_dir, *extra):
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", discotex_dir,
               "--prompt-variant", "all", "--sample", 24, "--n-ctx", 8192, "--out", out, *extra)
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory, discotex_dir):
    root = tmp_path_factory.mktemp("pv")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        return _run(root / "full", discotex_dir)


def _samples(folder: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(folder.glob("samples-*.jsonl"))}


def test_a_run_records_each_variant_resolved_and_the_plan_predicts_them(made, discotex_dir):
    from abricot_local.tasks.discotex import DESCRIPTION, ITA_BENCH_DESCRIPTION

    doc = json.loads((made / "results.json").read_text())
    assert doc["config"]["prompt_variant"] == "all" and doc["config"]["tasks"] == ["discotex", "discotex~ita-bench"]
    assert [doc["tasks"][k]["config"]["prompt_variant"] for k in doc["config"]["tasks"]] == ["card", "ita-bench"]
    card, ita = ([json.loads(x) for x in (made / f"samples-{k}.jsonl").read_text().splitlines()]
                 for k in ("discotex", "discotex~ita-bench"))
    assert [s["id"] for s in card] == [s["id"] for s in ita]
    assert all(a["context"].startswith(DESCRIPTION) and b["context"].startswith(ITA_BENCH_DESCRIPTION)
               for a, b in zip(card, ita))
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", discotex_dir,
               "--prompt-variant", "all", "--sample", 24, "--n-ctx", 8192, "--dry-run", "--json")
    plan = json.loads(r.output)
    assert [(t["task"], t["items"]) for t in plan["models"][0]["tasks"]] == [("discotex", 24), ("discotex~ita-bench", 24)]
    assert all(t["tokens"] > 0 for t in plan["models"][0]["tasks"])  # each variant counted as work of its own
    assert invoke("check", made).exit_code == 0


def test_resume_and_shards_give_the_same_samples(made, tmp_path, monkeypatch, discotex_dir):
    from dataclasses import replace

    from abricot_local.backends.options import ScoringOptions
    import planned
    from abricot_local.run.request import Shard
    from abricot_local.run.session import run_plan
    from abricot_local.run.merge import merge
    from abricot_local.models.given import Given

    plan = planned.plan_run(model="fake", given=Given.of(ScoringOptions(n_ctx=8192), backend="fake"),
                             task_spec="discotex", limit=None, sample=24,
                             task_options=TaskOptions(data_dir=str(discotex_dir), prompt_variant="all"))
    out = tmp_path / "stopped"
    fail_after(monkeypatch, 30, KeyboardInterrupt)  # inside the second variant
    with pytest.raises(KeyboardInterrupt):
        run_plan(plan, out)
    monkeypatch.undo()
    assert len((out / ".checkpoint" / "samples-discotex~ita-bench.jsonl").read_text().splitlines()) == 6
    run_plan(plan, out, resume=True)
    assert _samples(out) == _samples(made)
    parts = []
    for k in (1, 2):  # the plan's items cut as --shard k/2 cuts them
        shard = Shard(k, 2)
        runs = tuple(r.sharded(shard) for r in plan.runs)
        parts.append(run_plan(replace(plan, runs=runs, shard=shard), tmp_path / f"s{k}").path.parent)
    merge(parts, tmp_path / "merged")
    assert _samples(tmp_path / "merged") == _samples(made)
    merged, full = (json.loads((d / "results.json").read_text())["tasks"] for d in (tmp_path / "merged", made))
    assert {k: v["metrics"] for k, v in merged.items()} == {k: v["metrics"] for k, v in full.items()}


# -- does the prompt matter: three runs rewritten to known accuracies ----------------------------
# correct on the first K of the 24 items: (card, ita-bench) per model
KNOWN = {"a": (18, 6), "b": (12, 12), "c": (6, 18)}


@pytest.fixture(scope="module")
def known(made, tmp_path_factory):
    root = tmp_path_factory.mktemp("known")
    order = [json.loads(x)["id"] for x in (made / "samples-discotex.jsonl").read_text().splitlines()]

    def answers(model):
        def change(task, s):
            right = order.index(s["id"]) < KNOWN[model][0 if task == "discotex" else 1]
            pred = s["gold"] if right else (s["gold"] + 1) % 5
            lps = [-6.0] * 5
            lps[pred] = -0.01
            return {**s, "logprobs": lps, "pred": pred}
        return change

    return [rewrite_run(made, root / m, m, answers(m)) for m in KNOWN]


def test_the_prompt_study_on_known_accuracies(known):
    (s,) = P.study(labelled([load_run(f) for f in known])).studies
    assert (s.task, s.metric, s.prompts) == ("discotex", "accuracy", ("card", "ita-bench"))
    for r in s.runs:
        card, ita = (k / 24 for k in KNOWN[r.run])
        assert [v.value for v in r.values] == pytest.approx([card, ita])
        assert r.mean == pytest.approx((card + ita) / 2) and r.spread == pytest.approx(abs(card - ita))
        (pair,) = r.pairs  # card - ita-bench over the same 24 ids: McNemar on the discordant items
        gap = abs(KNOWN[r.run][0] - KNOWN[r.run][1])
        assert pair.comparison.diff == pytest.approx(card - ita)
        assert pair.comparison.p == pytest.approx(min(1.0, 2 * 0.5 ** gap) if gap else 1.0)
    assert dict(s.rankings) == {"card": ("a", "b", "c"), "ita-bench": ("c", "b", "a")}
    # every pair flips: Kendall's tau is (concordant - discordant) / pairs = (0 - 3) / 3
    assert len(s.flips) == 3 and not s.holds
    (tau,) = s.taus
    assert tau.tau == pytest.approx(-1.0) and tau.n == 3
    # on card: a-b and b-c differ on 6 items (p = 2 / 2^6), a-c on 12 (2 / 2^12); Holm over the three
    p = {(t.prompt, t.comparison.a, t.comparison.b): t.comparison.p_holm for t in s.tests}
    raw = sorted([2 * 0.5 ** 12, 2 * 0.5 ** 6, 2 * 0.5 ** 6])
    holm = [3 * raw[0], max(3 * raw[0], 2 * raw[1]), max(3 * raw[0], 2 * raw[1], raw[2])]
    assert p[("card", "a", "c")] == pytest.approx(holm[0]) and p[("card", "a", "b")] == pytest.approx(holm[2])
    flip = next(f for f in s.flips if (f.a, f.b) == ("a", "c"))
    assert (flip.diff_x, flip.diff_y) == pytest.approx((0.5, -0.5)) and flip.significant(0.05)
    assert not next(f for f in s.flips if (f.a, f.b) == ("a", "b")).significant(0.05)


def test_the_report_shows_it_in_every_format(known):
    text = invoke("report", *known, "--table", "prompts").output
    assert "discotex accuracy: the ranking changes with the prompt: 3 pair(s) of runs flip order" in text
    assert "a > b > c" in text and "c > b > a" in text and "Kendall's tau card vs ita-bench: -1.00" in text
    assert max(len(line) for line in text.splitlines()) <= 120
    md = invoke("report", *known, "--format", "markdown").output
    assert "### Does the prompt matter? discotex accuracy on 2 prompts (card, ita-bench)" in md
    doc = json.loads(invoke("report", *known, "--format", "json").output)["prompts"]
    (study,) = doc["studies"]
    assert study["holds"] is False and study["kendall_tau"][0]["tau"] == pytest.approx(-1.0)
    assert [v["value"] for v in study["runs"][0]["values"]] == pytest.approx([0.75, 0.25])
    from abricot_local.report import tables
    from abricot_local.report.html import report_data

    page = report_data(tables.build([str(f) for f in known]), figures=False)["prompts"]
    assert page[0]["columns"][:3] == ["run", "card", "ita-bench"] and page[0]["rows"][0][0] == "a"
    # runs of one prompt each (one --prompt-variant): no study, compare pairs them instead
    assert P.study(labelled([load_run(known[0])])).studies[0].runs[0].run == "a"
    assert invoke("report", known[0], "--table", "prompts").output.count("one run") == 1


@pytest.mark.real
def test_gemma_scores_both_wordings_in_one_run(gemma_path, discotex_dir, tmp_path):
    out = tmp_path / "g"
    r = invoke("run", gemma_path, "--tasks", "discotex", "--data-dir", discotex_dir, "--prompt-variant", "all",
               "--sample", 2, "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "results.json").read_text())
    assert list(doc["tasks"]) == ["discotex", "discotex~ita-bench"]
    card, ita = ([json.loads(x) for x in (out / f"samples-{k}.jsonl").read_text().splitlines()]
                 for k in doc["tasks"])
    assert all(a["logprobs"] != b["logprobs"] for a, b in zip(card, ita))  # another wording, other numbers
    (s,) = P.study(labelled([load_run(out)])).studies
    assert [v.value for v in s.runs[0].values] == [doc["tasks"][k]["metrics"]["accuracy"] for k in doc["tasks"]]
    assert not math.isnan(s.runs[0].mean)
