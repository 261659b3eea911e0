"""compare.py on runs made by the runner (fake backend, real DISCOTEX items), without the CLI:
matching, verdicts, differing settings, Holm and the best group, correlations, rendering; and
one real-model pair (Gemma 3 270M, --n-batch 128 against 512, run through the CLI)."""

from __future__ import annotations

import json
from dataclasses import replace
from io import StringIO

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from abricot_local.models.given import Given
from abricot_local.analysis import compare as cmp
from abricot_local.analysis.matching import item_key
from abricot_local.analysis.loading import load_run
import planned
from abricot_local.run.request import Shard
from abricot_local.run.session import run_plan
from abricot_local.analysis import stats
from abricot_local.backends.options import ScoringOptions
from abricot_local.cli import cli
from abricot_local.report.comparison import render
from abricot_local.errors import ResultsError, UsageError
from abricot_local.metrics import ROW_STATS, pearson, with_ci_of
from abricot_local.record import Sample
from abricot_local.tasks import make_task
from abricot_local.tasks.base import Task, TaskOptions
from conftest import FIXTURE


def _plan(data_dir, *, model="fake", sample=24, limit=None, task_spec="discotex", backend="fake", options=None):
    opts = TaskOptions(data_dir=str(data_dir), data=(("abricot", str(FIXTURE)),))
    return planned.plan_run(model=model, given=Given.of(options or ScoringOptions(n_ctx=8192), backend=backend),
                             task_spec=task_spec, task_options=opts, limit=limit, sample=sample)


def _variant(plan, *, model="fake", seed=1234, shard=None):
    """The plan with another fake model (label and seed) or a shard of its items (planned once)."""
    runs = tuple(r.sharded(shard) for r in plan.runs) if shard else plan.runs
    return replace(plan, model=replace(plan.model, label=model, as_written=model),
                   backend_options=replace(plan.backend_options, seed=seed), runs=runs, shard=shard)


@pytest.fixture(scope="module")
def folders(tmp_path_factory, discotex_dir):
    root = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        disco, abricot = _plan(discotex_dir), _plan(discotex_dir, task_spec="abricot_abs", sample=None)
        plans = {"a": disco, "a2": disco, "b": _variant(disco, model="fake-7", seed=7),
                 "half": _variant(disco, shard=Shard(1, 2)),
                 "other_half": _variant(disco, shard=Shard(2, 2)),
                 "abs_a": abricot, "abs_b": _variant(abricot, model="fake-7", seed=7)}
        return {name: run_plan(plan, root / name).path.parent for name, plan in plans.items()}


@pytest.fixture(scope="module")
def views(folders):
    return {k: load_run(v) for k, v in folders.items()}


def with_samples(view: cmp.Run, label: str, change) -> cmp.Run:
    """The run with each sample record replaced by change(sample) (a copy)."""
    tasks = tuple(t.with_samples(Sample.from_dict(change(s.to_dict())) for s in t.samples) for t in view.run_tasks)
    return replace(view, path=view.path + "-" + label, label=label, run_tasks=tasks)


def oracle(s: dict) -> dict:
    lps = [-6.0] * len(s["logprobs"])
    lps[s["gold"]] = -0.01
    return {**s, "logprobs": lps, "pred": s["gold"]}


def test_a_rerun_and_the_same_folder_twice_are_identical(views):
    c = cmp.compare([views["a"], views["a2"]])
    assert [v.kind for v in c.verdicts] == [cmp.IDENTICAL] and c.differs == ()
    assert c.matches == (cmp.TaskMatch("discotex", (24, 24), 24, 0),)
    (g,) = c.agreements
    assert g.identical and g.same_pred == 1.0 and g.max_abs_delta == 0.0 and g.mean_kl == 0.0
    assert all(m.diff == 0 and m.p == 1.0 for m in c.metrics)
    # no answer changed over 24 items: Tango's interval still allows about +-z^2 / (24 + z^2) either way
    z2 = 1.959963984540054 ** 2
    assert all(m.ci == pytest.approx((-z2 / (24 + z2), z2 / (24 + z2)), abs=1e-9) for m in c.metrics)
    assert all(e.identical and e.kind == "cannot tell yet" and "identical on these 24 items; " in e.line
               for e in c.equivalence) and c.equivalence
    assert "identical (on these 24 common items, every log-prob bit-identical)" in c.verdicts[0].line
    twice = cmp.compare([views["a"], views["a"]])
    assert twice.verdicts[0].kind == cmp.IDENTICAL and len({r.label for r in twice.runs}) == 2


def test_a_shard_and_a_shuffled_run_match_item_by_item(views):
    c = cmp.compare([views["a"], views["half"]])
    assert c.matches[0].n_common == 12 and c.verdicts[0].kind == cmp.IDENTICAL
    assert c.differs == ()  # the shard only chooses items: not a setting that changes a number
    shuffled = with_samples(views["a"], "shuffled", lambda s: s)
    shuffled = replace(views["a"], label="fake", run_tasks=tuple(t.with_samples(t.samples[::-1])
                                                                   for t in shuffled.run_tasks))
    assert cmp.compare([shuffled, views["a"]]).verdicts[0].kind == cmp.IDENTICAL
    # every number is the same whatever the item order
    assert cmp.compare([shuffled, views["b"]]).metrics == cmp.compare([views["a"], views["b"]]).metrics


def test_runs_without_common_items_are_refused(views, folders):
    with pytest.raises(ResultsError, match="no common items") as err:
        cmp.compare([views["half"], views["other_half"]])
    assert str(folders["half"]) in str(err.value) and str(folders["other_half"]) in str(err.value)
    with pytest.raises(ResultsError, match="share no task"):
        cmp.compare([views["a"], views["abs_a"]])
    with pytest.raises(UsageError):
        cmp.compare([views["a"]])
    with pytest.raises(ResultsError):
        load_run(folders["a"] / "nope")


def test_two_fake_models_differ_as_measured(views):
    c = cmp.compare([views["a"], views["b"]])
    assert {d.key for d in c.differs} == {"model", "provenance.model_desc"}
    (g,) = c.agreements
    assert g.same_pred < 1 and g.max_abs_delta > cmp.TOLERANCE and not g.identical and g.mean_kl > 0
    acc = next(m for m in c.metrics if m.metric == "accuracy")
    a_only, b_only = dict(acc.detail)["a_only"], dict(acc.detail)["b_only"]
    assert acc.diff == pytest.approx((a_only - b_only) / acc.n)  # the discordant pairs make the difference
    assert acc.ci[0] <= acc.diff <= acc.ci[1] and acc.p_holm == acc.p  # one pair: nothing to adjust
    assert acc.mdd == stats.min_detectable_difference(24, (a_only + b_only) / 24)
    v = c.verdicts[0]
    assert v.kind == (cmp.DIFFERENT if acc.p < 0.05 else cmp.CANNOT_TELL) and v.p == acc.p
    assert "discotex accuracy" in v.reason
    assert c.power == (cmp.TaskPower("discotex", "accuracy", v.a, v.b, 24, acc.mdd),)  # the table's own figure


def test_numerically_close_follows_the_tolerance(views):
    nudged = with_samples(views["a"], "nudged", lambda s: {**s, "logprobs": [x - 2e-4 for x in s["logprobs"]]})
    c = cmp.compare([views["a"], nudged])
    assert c.verdicts[0].kind == cmp.CLOSE and "0.001 nats" in c.verdicts[0].reason
    assert c.agreements[0].max_abs_delta == pytest.approx(2e-4, rel=1e-6)
    assert c.agreements[0].mean_kl == pytest.approx(0.0, abs=1e-12)  # a shift: same distribution
    strict = cmp.compare([views["a"], nudged], tolerance=1e-5)
    assert strict.verdicts[0].kind == cmp.CANNOT_TELL and strict.verdicts[0].p == 1.0
    with pytest.raises(UsageError):
        cmp.compare([views["a"], nudged], tolerance=-1)


def test_three_runs_holm_and_the_best_group(views):
    best = with_samples(views["a"], "oracle", oracle)
    c = cmp.compare([views["a"], views["b"], best])
    acc = [m for m in c.metrics if m.metric == "accuracy"]
    assert len(acc) == 3 and [m.p_holm for m in acc] == list(stats.holm([m.p for m in acc]))
    assert any(m.p_holm > m.p for m in acc)
    by_pair = {(v.a, v.b): v for v in c.verdicts}
    assert by_pair[("fake", "oracle")].kind == cmp.DIFFERENT and by_pair[("fake", "oracle")].p < 1e-3
    group = next(g for g in c.groups if (g.task, g.metric) == ("discotex", "accuracy"))
    assert group.best == "oracle" and group.members == ("oracle",)
    ab = next(m for m in acc if (m.a, m.b) == ("fake", "fake-7"))
    if ab.p_holm >= 0.05:  # neither fake is distinguishable from the other, both far from the oracle
        assert by_pair[("fake", "fake-7")].kind == cmp.CANNOT_TELL
    assert cmp.compare([views["a"], views["b"]]).groups == ()  # two runs: no group


def test_correlations_use_williams_t_and_need_the_same_gold(views):
    a, b = views["abs_a"], views["abs_b"]
    c = cmp.compare([a, b])
    rows = {m.metric: m for m in c.metrics}
    assert set(rows) == {"pearson", "pearson_continuous", "pearson_expected", "spearman", "accuracy"}
    m = rows["pearson_expected"]
    xa = [s.fields["expected_score"] for s in sorted(a.task("abricot_abs").samples, key=item_key)]
    xb = [s.fields["expected_score"] for s in sorted(b.task("abricot_abs").samples, key=item_key)]
    assert m.test == "Williams t" and dict(m.detail)["r_ab"] == pytest.approx(pearson(xa, xb))
    w = stats.williams_t(m.value_a, m.value_b, dict(m.detail)["r_ab"], m.n)
    assert (m.statistic, m.p) == (w.statistic, w.p) and dict(m.detail)["steiger_p"] > 0
    moved = with_samples(b, "moved", lambda s: {**s, "human_mean": s["human_mean"] * 0.9})
    rows = {m.metric: m for m in cmp.compare([a, moved]).metrics}
    for name in ("pearson_continuous", "pearson_expected", "spearman"):
        assert rows[name].test == "" and "gold vectors differ" in rows[name].note and np.isnan(rows[name].p)
    assert rows["pearson"].test == "Williams t" and rows["accuracy"].test == "McNemar exact"


def test_metric_inputs_give_the_recorded_metrics(views, folders):
    """What compare resamples is what results.json reports: every task's CI metrics are its
    MetricInputs' statistics, and the default covers a plugin (accuracy of pred on gold)."""
    for key in ("a", "abs_a"):
        doc = json.loads((folders[key] / "results.json").read_text())
        (t,) = views[key].run_tasks
        task = make_task(t.name, TaskOptions.from_config(dict(t.config)))
        inputs = task.metric_inputs(list(t.samples))
        assert inputs and all(inp.stat in ROW_STATS and len(inp.x) == len(t.samples) for inp in inputs)
        for inp in inputs:
            assert json.loads(json.dumps(with_ci_of(inp, seed=1234))) == {
                k: doc["tasks"][t.name]["metrics"][k] for k in (inp.name, f"{inp.name}_ci95")}

    class Bare(Task):
        name, version = "bare", "1"

        def items(self):
            return []

        def metrics(self, samples):
            return {}

    two = [Sample(id="x", logprobs=(-2.0, -1.0, -3.0), pred=1, gold=1), Sample(id="y", logprobs=(0.0, -1.0, -3.0),
                                                                                pred=0, gold=2)]
    (only,) = Bare(TaskOptions()).metric_inputs(two)
    assert (only.name, only.stat, list(only.x), list(only.y)) == ("accuracy", "accuracy", [1, 0], [1, 2])


def test_settings_differ_and_settings_of(folders):
    from abricot_local.analysis.differing import differing_settings

    from abricot_local.record import Model, Provenance, Record, RunConfig, read_run
    from abricot_local.record import settings as recorded

    def run(label, config, provenance):
        return cmp.Run(label, Record(schema_version=1, model=Model(name=label), config=config, provenance=provenance,
                                     tasks={}))

    x = run("x", RunConfig(seed=1, extra={"n_batch": 64, "k": None}), Provenance(schedule={"n_batch": 64}))
    y = run("y", RunConfig(extra={"n_batch": 512}),
            Provenance(schedule={"n_batch": 512}, extra={"system_info": "AVX2 = 1"}))
    got = {d.key: (d.value_a, d.value_b) for d in differing_settings(x, y)}
    assert got == {"seed": (1, None), "n_batch": (64, 512), "provenance.system_info": (None, "AVX2 = 1")}
    s = recorded.settings(read_run(folders["half"]), "Q4_K_M")
    assert s["quant"] == "Q4_K_M" and s["engine"] and s["n_batch"] and s["provenance.schedule.n_batch"]
    assert s["discotex.prompt_hash"] and len(s["discotex.data_sha256"]) == 2
    assert not {"sample", "shard", "tasks", "limit"} & set(s) and "model_sha256" not in s  # the fake has no file


def test_render_every_format(views):
    c = cmp.compare([views["a"], views["b"], with_samples(views["a"], "oracle", oracle)])
    table = render(c, "table")
    verdicts = table.rsplit("\nVerdict\n\n", 1)[1].replace("\n  ", " ")  # lines folded at 120 columns
    assert verdicts.splitlines() == [v.line for v in c.verdicts]
    assert max(map(len, table.splitlines())) <= 120
    assert "Recorded settings that differ" in table and "(Holm)" in table and "(none)" in table
    md = render(c, "markdown")
    assert "### Verdict" in md and md.splitlines()[-1] == "- " + c.verdicts[-1].line
    df = pd.read_csv(StringIO(render(c, "csv")))
    assert len(df) == len(c.metrics) and {"p_holm", "ci_lo", "verdict", "mean_kl"} <= set(df.columns)
    doc = json.loads(render(c, "json"))
    assert [v["kind"] for v in doc["verdicts"]] == [v.kind for v in c.verdicts]
    assert doc["bootstrap"]["seed"] == c.seed and doc["metrics"][0]["detail"]
    with pytest.raises(UsageError):
        render(c, "html")


@pytest.mark.real
def test_real_gemma_n_batch_128_against_512(gemma_run, tmp_path):
    """Two real runs differing in one setting (--n-batch: the decode cuts of the ~300-token
    prompts): the setting is named, the log-probs move, and the verdict says how much.
    Measured (llama-cpp-python 0.3.36, CPU AVX2/FMA, 2 threads), 10 items at 64 vs 512: one
    prediction of 10 flipped, max |delta log-prob| 0.34 nats, same accuracy: cannot tell apart."""
    # the shared run (the first 4 items, TED: the shortest prompts; n_batch 512, the default), and it at 128
    r = CliRunner().invoke(cli, [*gemma_run.args, "--n-batch", "128", "--out", str(tmp_path / "nb128")])
    assert r.exit_code == 0, r.output
    c = cmp.compare([load_run(tmp_path / "nb128"), load_run(gemma_run.out)])
    # n_batch (the config; the schedule's repeats it) and the ubatch that follows it; nothing else
    assert {d.key: (d.value_a, d.value_b) for d in c.differs} == {
        "n_batch": (128, 512), "provenance.schedule.n_ubatch": (128, 512)}
    (g,) = c.agreements
    assert g.n == 4 and g.max_abs_delta > 0  # the decode cuts changed the numbers
    assert c.verdicts[0].kind in (cmp.CLOSE, cmp.CANNOT_TELL), c.verdicts[0].line
    assert "n_batch" in render(c, "table")


def test_a_ci_that_excludes_0_beside_a_test_that_does_not_reject_says_why():
    """The last session's SmolLM2 ladder: F16 vs Q4_0 on 40 items, +0.175 [+0.035, +0.329], McNemar exact p = 0.039,
    0.117 Holm-adjusted over 3 pairs: the CI is not adjusted, the p-value is; with 2 runs there is nothing to adjust."""
    m = cmp.MetricComparison("discotex", "accuracy", "accuracy", "f16", "q4_0", 40, 0.325, 0.15, 0.175,
                             (0.0347, 0.3294), "McNemar exact", 9.0, 0.039, p_holm=0.117, mdd=0.204)
    g = cmp.Agreement("discotex", "f16", "q4_0", 40, 0.525, 2.0, 0.5, 0.04, False)
    v = cmp.verdict("f16", "q4_0", [m], [g], {"discotex": "accuracy"}, cmp.TOLERANCE, 0.05)
    assert v.kind == cmp.CANNOT_TELL and v.p == 0.117
    assert ("p = 0.117 (Holm-adjusted over the pairs); the CI (not adjusted over the pairs) excludes 0 but the "
            "Holm-adjusted test does not reject; 40 items detect only differences of 0.204 or more") in v.reason
    alone = cmp.verdict("f16", "q4_0", [replace(m, p=0.06, p_holm=0.06)], [g], {"discotex": "accuracy"},
                        cmp.TOLERANCE, 0.05)
    assert alone.kind == cmp.CANNOT_TELL and "p = 0.06; the CI excludes 0 but the test does not reject;" in alone.reason
    assert cmp.verdict("f16", "q4_0", [replace(m, p_holm=0.039)], [g], {"discotex": "accuracy"}, cmp.TOLERANCE,
                       0.05).kind == cmp.DIFFERENT


def test_a_pairs_different_verdict_is_adjusted_over_its_tasks():
    """It read the smallest p of the pair's tasks unadjusted: with three equal tasks, one pair in seven was
    `different` at alpha 0.05. Holm over the tasks: p 0.03 of three is 0.09; 0.01 of three is still 0.03."""
    m = cmp.MetricComparison("discotex", "accuracy", "accuracy", "a", "b", 40, 0.3, 0.2, 0.1, (0.01, 0.19),
                             "McNemar exact", 5.0, 0.03, p_holm=0.03, mdd=0.2)
    ms = [m, replace(m, task="t2", p=0.5, p_holm=0.5), replace(m, task="t3", p=0.8, p_holm=0.8)]
    gs = [cmp.Agreement(t, "a", "b", 40, 0.8, 1.0, 0.5, 0.01, False) for t in ("discotex", "t2", "t3")]
    primary = {"discotex": "accuracy", "t2": "accuracy", "t3": "accuracy"}
    v = cmp.verdict("a", "b", ms, gs, primary, cmp.TOLERANCE, 0.05)
    assert v.kind == cmp.CANNOT_TELL and v.p == pytest.approx(0.09)
    assert "the smallest p of 3 tasks: discotex accuracy" in v.reason and "p = 0.09 (Holm-adjusted over the 3 " \
        "tasks); the CI (not adjusted over the 3 tasks) excludes 0" in v.reason
    assert cmp.verdict("a", "b", [replace(m, p=0.01, p_holm=0.01), *ms[1:]], gs, primary, cmp.TOLERANCE,
                       0.05).kind == cmp.DIFFERENT
    assert cmp.verdict("a", "b", [m], gs[:1], primary, cmp.TOLERANCE, 0.05).kind == cmp.DIFFERENT  # one task alone
