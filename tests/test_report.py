"""`abricot-local report`: tables equal results.json, formats parse, plots, quant comparison."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.analysis import baselines
from abricot_local.analysis.loading import load_run
from abricot_local.analysis.reproduction import words
from abricot_local.report import tables as report
from abricot_local.cli import cli
from abricot_local.errors import ResultsError, UsageError
from abricot_local.gguf.file import quant_of, strip_quant
from abricot_local.record import TaskEntry
from abricot_local.models.registry import load_registry
from conftest import FIXTURE

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, discotex_dir) -> dict[str, Path]:
    """Two fake-backend runs (DISCOTEX + ABRICOT); one labelled as a registry alias."""
    root = tmp_path_factory.mktemp("runs")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_CONFIG_DIR", str(root / "config"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        for label, seed in (("toy-q8", "1234"), ("llama-3.1-8b-q4", "7")):
            r = invoke("run", label, "--backend", "fake", "--tasks", "discotex,abricot", "--data-dir", discotex_dir,
                       "--data", f"abricot={FIXTURE}", "--n-ctx", 8192, "--limit", 12, "--seed", seed,
                       "--shot-seed", seed, "--out", root / label)
            assert r.exit_code == 0, r.output
            out[label] = root / label
    return out


def results(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text())


def fmt_cell(value, ci=None) -> str:
    if ci and value == value and ci[0] != ci[0]:  # a value recorded with no interval: run's words (frames.ci_words)
        return f"{value:.3f} no interval"
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


# -- the runs table equals results.json -----------------------------------------------------------
def test_json_format_copies_the_metrics_exactly(runs):
    r = invoke("report", *runs.values(), "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"bare {c}: not strict JSON"))
    assert [Path(x["folder"]) for x in doc["runs"]] == list(runs.values())
    withheld = 0
    for run, folder in zip(doc["runs"], runs.values()):
        res = results(folder)
        # the llama entry reproduces both ABRICOT sources: its run holds ABRICOT under both protocols
        both = run["label"] == "llama-3.1-8b-q4"
        assert set(run["tasks"]) == {"discotex", "abricot_abs", "abricot_inc"} | (
            {"abricot_abs@calamita", "abricot_inc@calamita"} if both else set())
        for task, entry in res["tasks"].items():
            # as recorded, but a NaN (an interval the run withheld) is null: strict JSON has no NaN
            assert run["tasks"][task]["metrics"] == report.finite(entry["metrics"])
            assert run["tasks"][task]["n"] == entry["n"]
            nan = {k[:-5] for k, v in entry["metrics"].items()
                   if k.endswith("_ci95") and v[0] != v[0] and entry["metrics"][k[:-5]] == entry["metrics"][k[:-5]]}
            assert set(run["tasks"][task]["no_interval"]) == nan  # each withheld one said, with the run's reason
            withheld += len(nan)
    assert withheld  # the fixture's 12-item ABRICOT runs withhold some correlations' intervals
    assert {(b["model"], b["source"]) for b in doc["baselines"]} == {(b.model, b.source) for b in baselines.all_references()}


def test_csv_values_equal_results_files(runs):
    r = invoke("report", *runs.values(), "--format", "csv", "--table", "runs")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    by_folder = {row["folder"]: row for row in rows if row["folder"]}
    assert len(by_folder) == 2
    for folder in runs.values():
        row = by_folder[str(folder)]
        for task, entry in results(folder)["tasks"].items():
            assert int(row[f"{task}.n"]) == entry["n"]
            for name, value in entry["metrics"].items():
                if name.endswith("_ci95"):
                    base = f"{task}.{name[:-5]}"
                    got = [float(row[f"{base}.ci_lo"] or "nan"), float(row[f"{base}.ci_hi"] or "nan")]
                    assert got == value or all(g != g and v != v for g, v in zip(got, value))  # NaN: no interval
                else:
                    assert float(row[f"{task}.{name}"]) == value
    refs = [row for row in rows if not row["folder"]]
    assert {row["source"] for row in refs} == {"paper 3-shot", "CALAMITA leaderboard"}
    mistral = next(row for row in refs if row["model"] == "mistral-7b")
    assert float(mistral["abricot_abs.pearson"]) == 0.22 and float(mistral["abricot_inc.pearson"]) == 0.0


def test_every_csv_is_one_plain_table(runs):
    """--format csv writes one table a CSV reader loads as is; with --table all, the runs table."""
    default = invoke("report", *runs.values(), "--format", "csv").stdout
    assert default == invoke("report", *runs.values(), "--format", "csv", "--table", "runs").stdout
    for which in ("runs", "published", "quant", "samples"):
        out = invoke("report", *runs.values(), "--format", "csv", "--table", which).stdout
        assert not any(line.startswith("#") for line in out.splitlines()) and "\n\n" not in out.strip()
        rows = list(csv.reader(io.StringIO(out)))
        assert rows and len({len(x) for x in rows}) == 1, which  # a header at least


def test_table_and_markdown_show_the_recorded_values(runs):
    table = invoke("report", *runs.values()).stdout
    md = invoke("report", *runs.values(), "--format", "markdown").stdout
    for folder in runs.values():
        for task, entry in results(folder)["tasks"].items():
            m = entry["metrics"]
            for name, value in m.items():
                if not name.endswith("_ci95"):
                    cell = fmt_cell(value, m.get(f"{name}_ci95"))
                    assert cell in table and cell in md
    assert "paper 3-shot" in table and "CALAMITA leaderboard" in table
    # every markdown table is well formed: same number of cells on each line
    for block in md.split("### ")[1:]:
        lines = [ln for ln in block.splitlines() if ln.startswith("|")]
        assert len(lines) >= 3 and set(lines[1].strip("|").split("|")) == {"---"}
        assert len({ln.replace("\\|", "").count("|") for ln in lines}) == 1


def test_metrics_filter(runs):
    out = invoke("report", *runs.values(), "--metrics", "pearson,discotex.acc*", "--format", "csv", "--table", "runs").stdout
    header = next(csv.reader(io.StringIO(out)))
    metric_cols = [c for c in header if "." in c and not c.endswith((".ci_lo", ".ci_hi", ".n"))]
    assert metric_cols == ["discotex.accuracy", "discotex.accuracy_ted", "abricot_abs.pearson", "abricot_inc.pearson",
                           "abricot_abs@calamita.pearson", "abricot_inc@calamita.pearson"]  # the first run's first


def test_a_metrics_pattern_that_selects_nothing_is_said(runs):
    r = CliRunner().invoke(cli, ["report", *map(str, runs.values()), "--metrics", "nope,discotex.["])
    assert r.exit_code == 2 and "--metrics nope,discotex.[: no metric of these runs matches; theirs: " \
        "discotex.accuracy, " in r.output, r.output  # was an empty table, exit 0
    r = CliRunner().invoke(cli, ["report", *map(str, runs.values()), "--metrics", "nope,pearson", "--format", "csv"])
    assert r.exit_code == 0 and "note: --metrics nope matches no metric of these runs" in r.stderr
    assert "abricot_abs.pearson" in r.stdout


# -- published baselines ------------------------------------------------------------------------
def test_registry_reproduces_fields_all_name_published_rows():
    for spec in load_registry().values():
        found, unknown = baselines.parse_reproduces(spec.reproduces)
        assert not unknown, (spec.name, unknown)
        assert bool(found) == bool(spec.reproduces)


def test_published_value_inside_ci(runs):
    doc = report.build(list(runs.values()), registry=load_registry())
    llama = next(r for r in doc.runs if r.label == "llama-3.1-8b-q4")
    assert llama.registry_alias == "llama-3.1-8b-q4" and llama.quant == "Q4_K_M"
    assert {b.source for b in llama.reproduces} == {"paper 3-shot", "CALAMITA leaderboard"}
    checks = [c for c in doc.checks if c.run is llama]
    assert len(checks) == 4 and all(c.run.label != "toy-q8" for c in doc.checks)
    res = results(runs["llama-3.1-8b-q4"])["tasks"]
    # this run recorded no published block (a model named only by --backend fake): the registry's rows
    # (--models) against its CIs, with no verdict (that needs the samples at run time)
    assert results(runs["llama-3.1-8b-q4"])["published"]["checks"] == []
    for rc in checks:
        c = rc.check
        lo, hi = res[c.task]["metrics"]["pearson_ci95"]
        assert c.verdict is None and c.notes == ("fake backend, not the model",)
        if c.source == "CALAMITA leaderboard":  # 0-shot: the seed moves nothing it fixes
            assert c.task.endswith("@calamita") and c.comparable
            assert c.inside == (None if lo != lo else lo <= c.published <= hi)  # 12 items: no interval read
            assert words(c) == {True: "inside the 95% CI", False: "outside the 95% CI", None: "no 95% CI"}[c.inside]
        else:  # --shot-seed 7 drew other shots than the paper's seed 1234: not comparable, never "no"
            assert c.differences == ("shot_seed 7, published 1234",) and c.inside is None
            assert words(c) == "not comparable"
    text = report.render(doc, table="published")
    assert "against the margin" in text and "llama-3.1-8b (paper 3-shot)" in text and "fake backend" in text
    assert "not comparable: shot_seed 7, published" in " ".join(text.split())
    assert ("inside the 95% CI" in text) == any(rc.check.inside for rc in checks)  # 12 items: often no interval
    assert "a run held to no verdict: whether the published value is inside its 95% CI" in " ".join(text.split())
    assert report.build(list(runs.values())).checks == ()  # no registry, nothing recorded: no checks


def test_ci_check_edges():
    found = baselines.find("paper 3-shot", "LLAMA-3.1-8B")
    assert {(r.task, r.value) for r in found} == {("abricot_abs", 0.30), ("abricot_inc", 0.30)}
    b = next(r for r in found if r.task == "abricot_abs")
    entry = TaskEntry(metrics={"pearson": 0.1, "pearson_ci95": [0.3, 0.5]}, n=10,
                      config={"prompt_variant": "calamita", "shots": 0})
    c = baselines.check(b, entry)  # made otherwise: not comparable, though 0.30 lies in [0.3, 0.5]
    assert c.inside is None and not c.comparable and c.text.startswith("0.30 not comparable: ")
    assert c.differences[:2] == ("prompt_variant calamita, published paper", "shots 0, published 3")
    same = {"prompt_variant": "paper", "shots": 3, "shot_sampler": "lm-eval", "seed": 1234, "chat_template": False}
    c = baselines.check(b, TaskEntry(metrics=entry.metrics, n=10, config=same))
    assert c.inside is True and c.text == "0.30 in CI? yes"
    nan = baselines.check(b, TaskEntry(metrics={"pearson": math.nan, "pearson_ci95": [math.nan, math.nan]}, n=10,
                                       config=same))
    assert nan.inside is None and nan.text.endswith("n/a")


# -- recomputation ------------------------------------------------------------------------------
def test_recompute_matches_results(runs):
    for folder in runs.values():
        checks = report.recompute(load_run(folder))
        assert [c.task for c in checks] == list(results(folder)["tasks"])
        assert {"discotex", "abricot_abs", "abricot_inc"} <= {c.task for c in checks}
        assert all(c.ok for c in checks), [c.mismatches for c in checks]
    r = invoke("report", *runs.values(), "--verify", "--table", "runs")
    assert r.exit_code == 0 and "verified" in r.stderr
    assert "none recorded a published verdict to check" in r.stderr  # it does not claim a check it did not make


def test_recompute_detects_a_changed_number(runs, tmp_path):
    import shutil

    folder = tmp_path / "edited"
    shutil.copytree(runs["toy-q8"], folder)
    doc = results(folder)
    doc["tasks"]["abricot_abs"]["metrics"]["pearson"] += 1e-9
    (folder / "results.json").write_text(json.dumps(doc))
    bad = {c.task: c.mismatches for c in report.recompute(load_run(folder)) if not c.ok}
    assert bad == {"abricot_abs": ("pearson",)}
    r = invoke("report", folder, "--verify")
    assert r.exit_code == 1 and "abricot_abs: pearson" in r.stderr


# -- plots --------------------------------------------------------------------------------------
def test_plots_are_png_files(runs, tmp_path, monkeypatch):
    import matplotlib  # noqa: F401  (the test extra installs it: the plots are tested, not skipped)
    from abricot_local.report import plots

    # every figure drawn, the bar charts of two metrics (one code for every metric's: all of them take seconds)
    out = tmp_path / "figs"
    r = invoke("report", *runs.values(), "--plot", out, "--format", "json",
               "--metrics", "abricot_abs.pearson,discotex.accuracy")
    assert r.exit_code == 0, r.output
    json.loads(r.stdout)  # the figure message goes to stderr
    names = {p.name for p in out.iterdir()}
    for stem in ("toy-q8", "llama-3.1-8b-q4"):
        assert {f"{stem}-abricot_abs-scatter.png", f"{stem}-abricot_inc-scatter.png",
                f"{stem}-discotex-confusion.png"} <= names
    assert {"bar-abricot_abs.pearson.png", "bar-discotex.accuracy.png"} <= names
    for p in out.iterdir():
        data = p.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 5000, p.name
        assert p.stat().st_mode & 0o444 == 0o444, p.name  # written whole with the umask's mode, not mkstemp's 0600
    # without --metrics: the same figures, and a bar chart of every metric (asked for here, not drawn)
    asked = []

    def drawn(*args):  # scatter, confusion and bars take the figure's path
        path = next(a for a in args if isinstance(a, Path))
        asked.append(path.name)
        return path, []

    for name in ("scatter", "confusion", "bars"):
        monkeypatch.setattr(plots, name, drawn)
    r = invoke("report", *runs.values(), "--plot", tmp_path / "all", "--format", "json")
    assert r.exit_code == 0, r.output
    assert names < set(asked) and len(asked) == len(set(asked))
    keys = {m.key for run in report.build([str(f) for f in runs.values()]).runs for m in run.metric_values}
    assert len([n for n in asked if n.startswith("bar-")]) == len(keys) > 2


def _skewed(runs, tmp_path) -> Path:
    """A copy of a run with what a real run can hold: a CI that does not contain its value, an
    infinite metric, an item whose plotted field is infinite, and one with an impossible gold."""
    import shutil

    folder = tmp_path / "skewed"
    shutil.copytree(runs["toy-q8"], folder)
    doc = results(folder)
    m = doc["tasks"]["discotex"]["metrics"]
    m["accuracy_ci95"] = [m["accuracy"] + 0.1, m["accuracy"] + 0.2]
    doc["tasks"]["abricot_abs"]["metrics"]["pearson"] = math.inf
    (folder / "results.json").write_text(json.dumps(doc))
    for task, change in (("abricot_inc", {"human_mean": math.inf}), ("discotex", {"gold": 9})):
        path = folder / f"samples-{task}.jsonl"
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        lines[0].update(change)
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


def test_plots_draw_what_they_can_and_say_what_they_cannot(runs, tmp_path):
    """A CI not holding its value and an infinite value used to stop --plot and --format html in
    matplotlib ("'yerr' must not contain negative values"): now the rest is drawn and each is named
    (a gold that is no choice's is a malformed samples line: the page refuses it, naming the line)."""
    import shutil

    folder = _skewed(runs, tmp_path)
    out = tmp_path / "figs"
    r = invoke("report", folder, runs["llama-3.1-8b-q4"], "--plot", out, "--table", "runs",  # the bars it names
               "--metrics", "discotex.accuracy,abricot_abs.pearson,abricot_inc.pearson")
    assert r.exit_code == 0, r.output
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("note: ")]
    assert any("bar-discotex.accuracy.png" in n and "does not contain the value" in n for n in notes), notes
    assert any("bar-abricot_abs.pearson.png" in n and "the value is inf, no bar" in n for n in notes), notes
    assert any("abricot_inc-scatter.png: 1 item(s) with a non-finite human_mean not drawn" in n for n in notes)
    assert any("discotex-confusion.png: not drawn" in n and "gold 9" in n for n in notes), notes
    names = {p.name for p in out.iterdir()}
    assert {"bar-discotex.accuracy.png", "bar-abricot_abs.pearson.png"} <= names
    assert sum(n.endswith("-discotex-confusion.png") for n in names) == 1  # the other run's
    assert sum(n.endswith("-abricot_inc-scatter.png") for n in names) == 2
    assert f"wrote {len(names)} figure(s)" in r.stderr and "inf" in r.stdout
    page = invoke("report", folder, runs["llama-3.1-8b-q4"], "--format", "html")  # a gold no choice has: refused
    assert page.exit_code == 2 and "line 1 is malformed (id 'task_1_ted_test_1'): gold 9 is not a choice" in page.output
    shutil.copy(runs["toy-q8"] / "samples-discotex.jsonl", folder / "samples-discotex.jsonl")
    page = invoke("report", folder, runs["llama-3.1-8b-q4"], "--format", "html")
    assert page.exit_code == 0, page.output
    block = page.stdout.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    data = json.loads(block)
    cells = [row["cells"]["abricot_abs.pearson"][0] for row in data["rows"] if row["kind"] == "run"]
    assert "inf" in cells and "abricot_inc-scatter.png: 1 item(s) with a non-finite human_mean" in data["figuresNote"]


def test_the_text_report_fits_120_columns_and_says_how_to_see_it_whole(runs, tmp_path):
    import shutil

    again = tmp_path / "again"
    shutil.copytree(runs["toy-q8"], again)
    text = invoke("report", *runs.values(), again).stdout
    assert max(map(len, text.splitlines())) <= 120
    assert text.rstrip().endswith("(split to fit 120 columns: --format markdown, csv or html shows each table whole)")
    # two runs of one model are told apart by their folders; the markdown keeps one wide table
    assert "toy-q8 (toy-q8)" in text and "toy-q8 (again)" in text
    md = invoke("report", *runs.values(), again, "--format", "markdown", "--table", "runs").stdout
    assert max(map(len, md.splitlines())) > 120 and md.count("| model |") == 1
    csv_text = invoke("report", *runs.values(), again, "--format", "csv", "--table", "runs").stdout
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert [r["label"] for r in rows if r["folder"]] == ["toy-q8 (toy-q8)", "llama-3.1-8b-q4", "toy-q8 (again)"]
    assert [r["model"] for r in rows if r["folder"]] == ["toy-q8", "llama-3.1-8b-q4", "toy-q8"]



@pytest.mark.parametrize("args", [
    ("run", "fake", "--backend", "fake"),  # every task's data missing, offline: one error for all
    ("run", "fake", "--backend", "fake", "--tasks", "discotex"),
    ("data", "pull", "discotex"),
    ("run", "fake", "--backend", "fake", "--data-dir", "/no/such/folder/" + "deep/" * 30),
    ("run", "mistral-7b-q4", "--tasks", "discotex", "--sample", "40", "--dry-run"),  # a dry run: the whole plan
    ("run", "mistral-7b-q4", "llama-3.1-70b-q4", "hf:someone/Some-Model-7B-GGUF", "--tasks", "discotex", "--dry-run",
     "--sample", "40"),  # 3 models' plans (of the whole release: the same lines, in 7 s)
])
def test_errors_and_the_dry_run_fit_120_columns_as_the_report_does(args, monkeypatch, discotex_dir):
    """Issue 30, item 10: lines of 344 to 951 characters; every one now within 120 columns (errors as a
    terminal shows them: folded there, whole in a pipe)."""
    monkeypatch.setattr("abricot_local.cli.app.FOLD", True)
    if "--dry-run" in args:
        args = (*args, "--data-dir", str(discotex_dir))
    r = invoke(*args)
    lines = r.output.splitlines()
    wide = [ln for ln in lines if len(ln) > 120 and len(ln.split()) > 1]  # a path longer than 120: kept whole, alone
    assert lines and not wide, wide


def test_a_real_runs_plan_lines_fit_120_columns(tmp_path, discotex_dir):
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--sample", "4", "--data-dir", discotex_dir,
               "--out", tmp_path / "o")
    plan = [ln for ln in r.stderr.splitlines() if ln.startswith(("plan:", "  "))]
    assert r.exit_code == 0 and plan and max(map(len, plan)) <= 120, plan


def test_plots_without_matplotlib_say_how_to_install(runs, tmp_path, monkeypatch):
    from abricot_local.report import plots

    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    doc = report.build([runs["toy-q8"]])
    with pytest.raises(UsageError, match=r'pip install "abricot-local\[plot\]"'):
        plots.write_plots(doc, tmp_path / "figs")


# -- quantization comparison --------------------------------------------------------------------
P = [0.5, 0.125, 0.125, 0.125, 0.125]


def write_run(folder: Path, name: str, logprobs: dict[str, list[float]], seed: int = 1234) -> Path:
    """A minimal finished DISCOTEX run folder holding the given per-item logprobs."""
    folder.mkdir(parents=True)
    samples = []
    for i, (item, lp) in enumerate(logprobs.items()):
        samples.append({"id": item, "source": "ted", "context": f"prompt {item}", "choices": list("ABCDE"),
                        "continuations": [" A", " B", " C", " D", " E"], "logprobs": lp,
                        "gold": 0, "pred": max(range(5), key=lambda k: lp[k]), "class": 1, "target_position": 0})
    (folder / "samples-discotex.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    acc = sum(s["pred"] == s["gold"] for s in samples) / len(samples)
    doc = {"schema_version": 1, "model": {"name": name, "alias": None, "path": None, "sha256": None},
           "config": {"backend": "fake", "seed": seed},
           "tasks": {"discotex": {"metrics": {"accuracy": acc, "accuracy_ci95": [0.0, 1.0]}, "n": len(samples),
                                  "config": {"seed": seed}, "samples_file": "samples-discotex.jsonl"}}}
    (folder / "results.json").write_text(json.dumps(doc))
    return folder


def test_quant_agreement_and_kl_by_hand(tmp_path):
    logp = [math.log(p) for p in P]
    q8 = write_run(tmp_path / "q8", "toy-q8", {"i1": logp, "i2": logp, "i3": logp, "i4": logp, "only8": logp})
    swapped = [logp[1], logp[0], *logp[2:]]
    q4 = write_run(tmp_path / "q4", "toy-q4", {
        "i1": [x - 3.0 for x in logp],  # shifted: the same distribution once renormalised
        "i2": logp,
        "i3": [math.log(0.2)] * 5,  # uniform: pred 0 (ties go to the first), KL = log 1.25
        "i4": swapped,  # pred 1: KL = 0.5 log 4 - 0.125 log 4
        "only4": logp,
    })
    doc = report.build([q4, q8])  # given low quant first: the Q8 run is still the reference
    (pair,) = doc.quant
    assert (pair.base, pair.task, pair.ref.quant, pair.other.quant) == ("toy", "discotex", "Q8", "Q4")
    assert pair.n_common == 4
    assert pair.agreement == 0.75
    assert pair.kl_mean == pytest.approx((math.log(1.25) + 0.375 * math.log(4)) / 4, abs=1e-12)
    assert pair.notes == ()
    data = json.loads(report.render(doc, "json"))["quant_comparison"]
    assert data[0]["agreement"] == 0.75 and data[0]["n_common"] == 4 and data[0]["ref_quant"] == "Q8"
    text = report.render(doc)
    assert "Quantization comparison" in text and "0.750" in text and f"{pair.kl_mean:.4f}" in text
    r = invoke("report", q8, q4, "--table", "quant", "--format", "csv")
    row = next(csv.DictReader(io.StringIO(r.stdout)))
    assert float(row["agreement"]) == 0.75 and float(row["kl_mean"]) == pair.kl_mean


def test_quant_pairs_use_the_registry_base(tmp_path, monkeypatch):
    """Aliases with no quant in their names pair up through the registry's base and quant."""
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "models.toml").write_text(
        '[alpha]\nsource = "local"\npath = "a.gguf"\nquant = "Q8_0"\nbase = "MyModel"\n\n'
        '[beta]\nsource = "local"\npath = "b.gguf"\nquant = "Q4_K_M"\nbase = "MyModel"\n\n'
        '[gamma]\nsource = "local"\npath = "c.gguf"\nquant = "Q4_K_M"\nbase = "Other"\n'
    )
    logp = [math.log(p) for p in P]
    a = write_run(tmp_path / "a", "alpha", {"x": logp, "y": logp})
    b = write_run(tmp_path / "b", "beta", {"x": logp, "y": [logp[2], logp[1], logp[0], *logp[3:]]}, seed=9)
    c = write_run(tmp_path / "c", "gamma", {"x": logp, "y": logp})
    doc = report.build([b, a, c], registry=load_registry())
    (pair,) = doc.quant
    assert (pair.base, pair.ref.label, pair.other.label) == ("MyModel", "alpha", "beta")
    assert pair.agreement == 0.5 and pair.notes == ("task config differs: seed",)
    assert pair.kl_mean == pytest.approx((0.5 - 0.125) * math.log(4) / 2, abs=1e-12)


def test_label_kl_properties():
    assert report.label_kl([0.0, -1.0, -2.0], [5.0, 4.0, 3.0]) == pytest.approx(0.0, abs=1e-15)
    assert report.label_kl([0.0, -math.inf], [0.0, -1.0]) == pytest.approx(math.log(1 + math.exp(-1)))
    assert report.label_kl([0.0, -1.0], [0.0, -math.inf]) == math.inf


def test_quant_names():
    assert quant_of("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf") == "Q4_K_M"
    assert quant_of("qwen2.5-0.5b-q8") == "Q8"
    assert quant_of("fake") == ""
    assert strip_quant("LLaMAntino-3-ANITA-8B-Inst-DPO-ITA.Q4_K_M") == "LLaMAntino-3-ANITA-8B-Inst-DPO-ITA"


# -- errors -------------------------------------------------------------------------------------
def test_missing_folder_is_a_clean_error(tmp_path):
    r = invoke("report", tmp_path / "nope")
    assert r.exit_code == 2
    assert r.stderr.strip() == f"error: run folder not found: {tmp_path / 'nope'}"
    with pytest.raises(ResultsError, match="run folder not found"):
        report.build([tmp_path / "nope"])


def test_folder_without_results_is_a_clean_error(tmp_path):
    (tmp_path / "empty").mkdir()
    r = invoke("report", tmp_path / "empty")
    assert r.exit_code == 2 and "holds no results.json" in r.stderr and "Traceback" not in r.output
    (tmp_path / "half" / ".checkpoint").mkdir(parents=True)
    r = invoke("report", tmp_path / "half")
    assert r.exit_code == 2 and "skipped" in r.stderr and "interrupted" in r.stderr  # tests/test_run_state.py
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "results.json").write_text('{"schema_version": 1, "model": {}}')
    r = invoke("report", bad)
    assert r.exit_code == 2 and "malformed" in r.stderr


def test_a_ladder_made_by_quantize_keeps_its_base_without_models(tmp_path):
    """quantize names a requantized ladder's rungs <stem>-<quant>-dequantized-<rung>: a report without
    --models shortened the base to "gemma-3-270m--dequantized" (the name without its quant tags)."""
    from invented_data import write_discotex

    import abricot_local as al

    data = write_discotex(tmp_path / "d", 4)
    base = "gemma-3-270m-q4_k_m-dequantized"  # quantize's own names (models/quantize.py)
    models = tmp_path / "models.toml"
    models.write_text("".join(f'[{base}-{q.lower()}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\n'
                              f'base = "{base}"\n\n' for q in ("F16", "Q4_0")), encoding="utf-8")
    out = tmp_path / "ladder"
    r = invoke("run", f"{base}-f16", "--models", models, "--quants", "F16,Q4_0", "--tasks", "discotex", "--data-dir",
               data, "--out", out)
    assert r.exit_code == 0, r.output
    ladder = json.loads(invoke("report", out, "--table", "quant", "--format", "json").stdout)["quant_ladder"]
    assert {x["base"] for x in ladder} == {base}
    assert {run.base for run in al.load_runs(out)} == {base}
