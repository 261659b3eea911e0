"""`abricot-local compare RUNS...`: fake-backend runs compared through the command line: two runs,
three runs (Holm, the best group), every format, -o, the refusals, 120 columns; the unique run
labels (run_labels) and the text tables' fitting (texttable) it relies on."""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import replace

import pandas as pd
import pytest
from click.testing import CliRunner

from abricot_local.models.given import Given
from abricot_local.analysis import compare as cmp
from abricot_local.analysis.differing import SettingDiff
from abricot_local.analysis.loading import load_run
import planned
from abricot_local.run.session import run_plan
from abricot_local.analysis import stats
from abricot_local.cli import cli
from abricot_local.cli.compare import compare as compare_command
from abricot_local.report.comparison import render
from abricot_local.analysis.labels import RunIdentity, unique_labels
from abricot_local.tasks.base import TaskOptions
from abricot_local.report.texttable import fit
from conftest import oracle_sample, rewrite_run


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, discotex_dir):
    """24 DISCOTEX items: fake (n_batch 512 and 64: one model, identical numbers), fake-7 (another
    seed of the fake model: other numbers on the same prompts), an oracle (every answer gold) and
    fake nudged (every log-prob 2e-4 nats lower)."""
    root = tmp_path_factory.mktemp("cmp")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        plan = planned.plan_run(model="fake", given=Given("fake", {"n_ctx": 8192}), task_spec="discotex",
                                 task_options=TaskOptions(data_dir=str(discotex_dir)), limit=None, sample=24)
        out = {}
        for name, variant in (("a", plan), ("a64", replace(plan, backend_options=replace(plan.backend_options, n_batch=64))),
                              ("b", replace(plan, model=replace(plan.model, label="fake-7", as_written="fake-7"),
                                            backend_options=replace(plan.backend_options, seed=7)))):
            out[name] = run_plan(variant, root / "runs" / name).path.parent
    out["oracle"] = rewrite_run(out["a"], root / "runs" / "oracle", "oracle", oracle_sample)
    out["nudged"] = rewrite_run(out["a"], root / "nudged", "fake-nudged",
                                lambda t, s: {**s, "logprobs": [x - 2e-4 for x in s["logprobs"]]})
    return out


def verdict_lines(text: str) -> list[str]:
    """The verdict lines of a table output, unfolded."""
    return text.rsplit("\nVerdict\n\n", 1)[1].replace("\n  ", " ").splitlines()


def api(*folders, **kw) -> cmp.Comparison:
    return cmp.compare([load_run(f) for f in folders], **kw)


def test_two_runs(runs):
    r = invoke("compare", runs["a"], runs["b"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert max(map(len, out.splitlines())) <= 120, [ln for ln in out.splitlines() if len(ln) > 120]
    c = api(runs["a"], runs["b"])
    assert verdict_lines(out) == [v.line for v in c.verdicts]
    assert c.verdicts[0].kind in (cmp.DIFFERENT, cmp.CANNOT_TELL) and c.verdicts[0].p is not None
    # the items matched, the settings that differ, the power stated in words
    assert ["discotex", "24", "/", "24", "24", "0"] in [ln.split() for ln in out.splitlines()]
    settings = out.split("Recorded settings that differ", 1)[1].split("Paired differences", 1)[0]
    assert "provenance.model_desc" in settings and "fake-7" in settings and "seed" not in settings  # bootstrap seed
    detectable = next(m.mdd for m in c.metrics if m.metric == "accuracy")
    assert f"discotex accuracy: 24 common items detect only differences of {detectable:.3f} or more" in out
    assert "p (Holm)" not in out and "Runs not distinguishable" not in out  # two runs: nothing to adjust


def test_three_runs_holm_and_the_best_group(runs):
    r = invoke("compare", runs["a"], runs["b"], runs["oracle"])
    assert r.exit_code == 0, r.output
    c = api(runs["a"], runs["b"], runs["oracle"])
    assert verdict_lines(r.stdout) == [v.line for v in c.verdicts] and len(c.verdicts) == 3
    by_pair = {(v.a, v.b): v for v in c.verdicts}
    assert by_pair[("fake", "oracle")].kind == cmp.DIFFERENT and "Holm-adjusted" in by_pair[("fake", "oracle")].reason
    best = r.stdout.split("Runs not distinguishable from the best", 1)[1].split("Power", 1)[0]
    (group,) = [g for g in c.groups if g.metric == "accuracy"]
    assert group.members == ("oracle",)
    assert [ln.split()[:3] for ln in best.splitlines() if ln.startswith("discotex")][0] == \
        ["discotex", "accuracy", "oracle"]
    assert "(Holm)" in r.stdout and max(map(len, r.stdout.splitlines())) <= 120


def test_two_runs_of_one_model_are_labelled_apart(runs):
    r = invoke("compare", runs["a"], runs["a64"])
    assert r.exit_code == 0, r.output
    assert verdict_lines(r.stdout) == [
        "fake (n_batch=512) vs fake (n_batch=64): identical (on these 24 common items, every log-prob bit-identical)"]
    # a folder of runs is searched, as report does
    r = invoke("compare", runs["a"].parent, "--format", "json")
    assert [x["label"] for x in json.loads(r.stdout)["runs"]] == [
        "fake (n_batch=512)", "fake (n_batch=64)", "fake-7", "oracle"]


def test_formats_and_output_file(runs, tmp_path):
    folders = (runs["a"], runs["b"], runs["oracle"])
    c = api(*folders)
    md = invoke("compare", *folders, "--format", "markdown").stdout
    assert "### Verdict" in md and md.rstrip().splitlines()[-1] == "- " + c.verdicts[-1].line
    for block in md.split("### ")[1:]:  # every table well formed
        lines = [ln for ln in block.splitlines() if ln.startswith("|")]
        assert len({ln.replace("\\|", "").count("|") for ln in lines}) <= 1
    df = pd.read_csv(io.StringIO(invoke("compare", *folders, "--format", "csv").stdout))
    assert len(df) == len(c.metrics) and set(df["verdict"]) == {v.kind for v in c.verdicts}
    doc = json.loads(invoke("compare", *folders, "--format", "json", "--seed", 7, "--alpha", 0.01).stdout)
    assert doc["bootstrap"]["seed"] == 7 and doc["alpha"] == 0.01
    assert [v["kind"] for v in doc["verdicts"]] == [v.kind for v in api(*folders, alpha=0.01, seed=7).verdicts]
    dest = tmp_path / "sub" / "cmp.md"
    dest.parent.mkdir()
    r = invoke("compare", *folders, "--format", "markdown", "-o", dest)
    assert r.exit_code == 0 and r.stdout == "" and f"wrote {dest}" in r.stderr
    assert dest.read_text() == md


def test_tolerance(runs):
    assert verdict_lines(invoke("compare", runs["a"], runs["nudged"]).stdout)[0].split(": ")[1].startswith(
        "numerically close (same predictions on 24 items, max |delta log-prob| 2.00e-04 <= 0.001 nats")
    strict = verdict_lines(invoke("compare", runs["a"], runs["nudged"], "--tolerance", 1e-5).stdout)[0]
    assert ": cannot tell apart (" in strict
    # the command's defaults are the library's
    defaults = {p.name: p.default for p in compare_command.params}
    assert defaults["tolerance"] == cmp.TOLERANCE and defaults["alpha"] == stats.ALPHA


def test_refusals(runs, tmp_path, discotex_dir):
    one = invoke("compare", runs["a"])
    assert one.exit_code == 2 and one.stderr.count("\n") == 1
    assert one.stderr.startswith("error: compare needs at least two finished runs; found 1")
    assert invoke("compare").stderr.startswith("error: compare needs at least two runs")
    assert invoke("compare", runs["a"], runs["b"], "--alpha", 2).exit_code == 2
    missing = invoke("compare", runs["a"], tmp_path / "nope")
    assert missing.exit_code == 2 and "run folder not found" in missing.stderr
    # an incomplete run is skipped with a note, as report does; --strict refuses it
    half = tmp_path / "runs" / "half"
    shutil.copytree(runs["a"], half)
    (half / "results.json").unlink()
    (half / ".checkpoint").mkdir()
    shutil.copytree(runs["b"], tmp_path / "runs" / "b")
    r = invoke("compare", tmp_path / "runs", runs["a"])
    assert r.exit_code == 0 and "note: skipped" in r.stderr and str(half) in r.stderr
    assert invoke("compare", tmp_path / "runs", runs["a"], "--strict").exit_code == 2
    # no common items: the chat-wrapped run scored other texts
    chat = tmp_path / "chat"
    made = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", discotex_dir,
                  "--sample", 24, "--n-ctx", 8192, "--chat-template", "--out", chat)
    assert made.exit_code == 0, made.output
    r = invoke("compare", runs["a"], chat)
    assert r.exit_code == 2 and "have no common items" in r.stderr and str(chat) in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.output


# -- the labels and the fitting compare's text relies on ------------------------------------------
def test_unique_labels():
    def ident(model, folder, **kw):
        return RunIdentity(model, folder=folder, **kw)

    assert unique_labels([ident("a", "x/1"), ident("b", "x/2")]) == ("a", "b")
    # the quant first, then one option (the shortest of those that tell most apart), then the folder
    assert unique_labels([ident("m", "r/1", quant="Q4_K_M"), ident("m", "r/2", quant="Q8_0")]) == (
        "m (Q4_K_M)", "m (Q8_0)")
    opts = [{"n_batch": 64, "seed": 1, "engine": "prefix"}, {"n_batch": 512, "seed": 1, "engine": "batched"}]
    assert unique_labels([ident("m", "r/1", options=opts[0]), ident("m", "r/2", options=opts[1])]) == (
        "m (n_batch=64)", "m (n_batch=512)")
    assert unique_labels([ident("m", "res/a/full"), ident("m", "res/b/full")]) == ("m (a/full)", "m (b/full)")
    # the time when it is shorter than the folder; two options when one is not enough
    times = [ident("m", "results/m/20250101-120000", created="2025-01-01T12:00:00+00:00"),
             ident("m", "results/m/20250101-130500", created="2025-01-01T13:05:00+00:00")]
    assert unique_labels(times) == ("m (12:00)", "m (13:05)")
    grid = [ident("m", f"r/{k}", options={"n_batch": b, "seed": s}) for k, (b, s) in enumerate(
        [(64, 1), (64, 2), (512, 1)])]
    assert unique_labels(grid) == ("m (seed=1, n_batch=64)", "m (seed=2)", "m (seed=1, n_batch=512)")
    # a label naming its quant is not told apart by it; one folder twice: by position
    assert unique_labels([ident("m-Q4_0", "r/1", quant="Q4_0", names_quant=True),
                          ident("m-Q4_0", "r/2", quant="Q4_0", names_quant=True)]) == ("m-Q4_0 (1)", "m-Q4_0 (2)")
    assert unique_labels([ident("m", "r/1"), ident("m", "r/1")]) == ("m #1", "m #2")


def test_fit_wraps_then_splits_within_the_width():
    df = pd.DataFrame({"model": ["alpha", "beta"], "notes": ["word " * 30, "short"],
                       **{f"task.metric_{k}": ["0.123 [0.100, 0.150]", ""] for k in range(8)}})
    text, split = fit(df, keys=1, wrap_cols=("notes",), groups=(("task.metric_0", "task.metric_1"),))
    assert split and max(map(len, text.splitlines())) <= 120
    blocks = text.split("\n\n")
    assert all(b.splitlines()[0].startswith("model") or b.splitlines()[1].startswith("model") for b in blocks)
    assert sum(b.count("0.123 [0.100, 0.150]") for b in blocks) == 8  # every cell once
    assert all("beta" not in b for b in blocks if "task" in b and "notes" not in b)  # rows with nothing there: out
    small = pd.DataFrame({"a": ["x"], "b": ["y"]})
    assert fit(small) == ("a  b\n-  -\nx  y", False)


def test_the_detectable_difference_is_one_figure_in_the_table_the_power_line_and_the_verdict(runs):
    """Issue 30: one quantity, one unit (a difference of accuracy), wherever compare states it."""
    c = api(runs["a"], runs["b"])
    out = invoke("compare", runs["a"], runs["b"]).stdout
    acc = next(m for m in c.metrics if m.task == "discotex" and m.metric == "accuracy")
    table = out.split("Paired differences", 1)[1].split("Predictions and log-probs", 1)[0]
    row = next(ln.split() for ln in table.splitlines() if ln.split()[:2] == ["discotex", "accuracy"])
    power = out.split("Power:", 1)[1].split("bootstrap:", 1)[0]
    figure = f"{acc.mdd:.3f}"
    assert row[-1] == figure and f"differences of {figure} or more" in power
    if "detect only" in c.verdicts[0].line:
        assert f"differences of {figure} or more" in c.verdicts[0].line
    assert "points" not in out


def test_a_sha256_and_a_long_setting_name_are_never_broken_across_lines():
    import pandas as pd

    from abricot_local.report.texttable import fit

    sha, name = "ab" * 32, "provenance.schedule.a_very_long_setting_name_indeed"
    df = pd.DataFrame([{"setting": name, "a": sha, "b": "c" * 64}, {"setting": "n_batch", "a": "512", "b": "64"}])
    text, _ = fit(df, keys=1, wrap_cols=("setting", "a", "b"))
    assert sha in text and name in text and "c" * 64 in text and max(map(len, text.splitlines())) <= 120


def test_render_of_a_long_setting_stays_within_120_columns(runs):
    c = api(runs["a"], runs["b"])
    long = replace(c, differs=(SettingDiff(c.runs[0].label, c.runs[1].label, "provenance.system_info",
                                               "AVX = 1 | " * 40, None),))
    text = render(long, "table")
    assert max(map(len, text.splitlines())) <= 120 and "(not recorded)" in text
