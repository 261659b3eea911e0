"""The Python API (abricot_local.evaluate, plan, load_run(s), compare; Run, Comparison) on fake-backend runs
of the invented ABRICOT fixture: the same path as the commands (byte-identical files, the same plan, the
same refusals), notebook manners (no output, warnings, AbricotError, Ctrl-C then resume), the frames,
and lm-eval's results layout checked against lm-eval's own schema and file-name readers."""

from __future__ import annotations

import html
import json
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

import abricot_local as api
from abricot_local.cli import cli
from abricot_local.errors import AbricotError, ModelError, UsageError, opt
from conftest import FIXTURE, fail_after

ARGS = dict(backend="fake", data={"abricot": str(FIXTURE)}, n_ctx=8192, progress=False)
CLI = ["--backend", "fake", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def quiet_evaluate(*a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return api.evaluate(*a, **{**ARGS, **kw})


def test_evaluate_writes_what_run_writes_byte_for_byte(tmp_path, capfd):
    run = api.evaluate("fake", "abricot_abs", out=tmp_path / "api", sample=8, **ARGS)
    assert capfd.readouterr() == ("", "")  # nothing printed (progress=False)
    r = invoke("run", "fake", "--tasks", "abricot_abs", "--sample", "8", *CLI, "--out", tmp_path / "cli")
    assert r.exit_code == 0, r.output
    name = "samples-abricot_abs.jsonl"
    assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    assert run.path == str(tmp_path / "api") and run.record == api.load_run(tmp_path / "api").record
    cli_rec = json.loads((tmp_path / "cli" / "results.json").read_text())
    assert run.record.tasks["abricot_abs"].metrics == cli_rec["tasks"]["abricot_abs"]["metrics"]
    assert run.record.config.to_dict() == cli_rec["config"]


def test_frames_hold_the_record(tmp_path):
    run = quiet_evaluate("fake", "abricot", out=tmp_path / "o", sample=6)
    m = run.metrics()
    assert list(m.columns) == ["task", "metric", "value", "ci_low", "ci_high", "chance", "n"]
    entry = run.record.tasks["abricot_abs"]
    row = m[(m.task == "abricot_abs") & (m.metric == "pearson")].iloc[0]
    assert row.n == entry.n == 6 and row.chance == entry.chance["pearson"]
    assert (row.ci_low, row.ci_high) == tuple(entry.metrics["pearson_ci95"]) or row.ci_low != row.ci_low
    s = run.samples("abricot_abs")
    assert len(s) == 6 and list(s.columns[:8]) == ["task", "id", "source", "gold", "pred", "gold_label",
                                                     "pred_label", "correct"]
    lines = [json.loads(x) for x in (Path(run.path) / "samples-abricot_abs.jsonl").read_text().splitlines()]
    assert s.id.tolist() == [x["id"] for x in lines]
    k = len(lines[0]["logprobs"])
    assert s[[f"logprob_{i}" for i in range(k)]].values.tolist() == [x["logprobs"] for x in lines]
    own = set(lines[0]) - {"id", "source", "gold", "pred", "gold_label", "pred_label", "logprobs", "context",
                           "choices", "continuations", "continuation_tokens"}
    assert own and own <= set(s.columns)  # the task's own fields
    assert len(run.samples()) == sum(e.n for e in run.record.tasks.values())
    with pytest.raises(AbricotError, match="no task 'nope'"):
        run.samples("nope")
    html = run._repr_html_()
    assert "<table>" in html and "abricot_abs" in html and "kernels:" in html
    assert run.kernels.runtime == "fake"


def test_a_metric_over_part_of_the_items_shows_their_count():
    """DISCOTEX's accuracy_ted and accuracy_wiki are over one source's items (21 and 19 of 40): n was the task's 40."""
    run = api.load_run(Path(__file__).parent / "reference" / "gemma-3-270m")
    m = run.metrics().set_index("metric")
    s = run.samples("discotex")
    assert m.loc["accuracy", "n"] == m.loc["binary_accuracy", "n"] == len(s) == 40
    assert (m.loc["accuracy_ted", "n"], m.loc["accuracy_wiki", "n"]) == ((s.source == "ted").sum(),
                                                                         (s.source == "wiki").sum()) == (21, 19)


def test_published_rows_with_their_verdict(tmp_path):
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n')
    run = quiet_evaluate("fake-as-llama", "abricot_abs", models_file=models, out=tmp_path / "o")
    p = run.published()
    check = run.record.published.checks[0]
    assert p.reference.tolist() == ["llama-3.1-8b"] and p.published.tolist() == [check.published]
    # the verdict as the run recorded it: the task's margin (ABRICOT's pearson: 0.05); every item of the (invented)
    # task scored, so the run's value is the set's and the verdict exact (issue 47), items like these a second reason
    assert check.verdict == "reproduced" and check.margin == 0.05 and check.items_total == check.n
    assert abs(check.difference) + 0.005 < 0.05 and "on all 18 items of the task (exact" in p.reasons[0]
    assert p.verdict.tolist() == ["reproduced within 0.05"] and "items like these" in p.reasons[0]
    wide = quiet_evaluate("fake-as-llama", "abricot_abs", models_file=models, margin=2.5, out=tmp_path / "m")
    assert wide.record.published.margin == 2.5  # run --margin: r - 0.30 always lies inside +-2.5: no verdict
    assert wide.published().verdict.tolist() == ["cannot tell"] and "covers every value" in wide.published().reasons[0]
    again = quiet_evaluate("fake-as-llama", "abricot_abs", models_file=models, shots=0, out=tmp_path / "z")
    assert again.published().verdict.tolist() == ["not comparable"]
    assert "shots 0, published 3" in again.published().differences[0]


def test_refusals_are_abricot_errors_with_the_commands_messages(tmp_path):
    with pytest.raises(UsageError, match=r"unknown option 'thread'\. Did you mean: threads\?") as err:
        api.evaluate("fake", "abricot", thread=2, **ARGS)
    assert "n_ctx" in str(err.value) and "shots" in str(err.value)
    assert all(len(line) <= 120 for line in str(err.value).splitlines())
    # the command's message, its flags written as the API's keywords (issue 39 item 6)
    cases = [(dict(limit=0), "--limit must be at least 1", "limit must be at least 1"),
             (dict(resume=True), "--resume needs the --out folder", "resume=True needs the out folder"),
             (dict(shard="3/2"), "--shard expects K/N", "shard expects K/N")]
    for kw, text, words in cases:
        with pytest.raises(UsageError, match=words):
            api.evaluate("fake", "abricot", **{**ARGS, **kw})
        r = invoke("run", "fake", *CLI, *[f"--{k}={v}" if v is not True else f"--{k}" for k, v in kw.items()])
        assert r.exit_code == 2 and text in r.output
    with pytest.raises(AbricotError, match="unknown task"):
        api.evaluate("fake", "nosuchtask", **ARGS)
    with pytest.raises(AbricotError):
        api.evaluate("no-such-model-xyz", "abricot", **{**ARGS, "backend": "llama.cpp"})
    quiet_evaluate("fake", "abricot_abs", out=tmp_path / "o")
    with pytest.raises(AbricotError, match="resume=True"):  # a finished folder is not started over
        quiet_evaluate("fake", "abricot_abs", out=tmp_path / "o", seed=9)


def test_warnings_are_python_warnings(tmp_path):
    with pytest.warns(api.AbricotWarning, match=r"caution: limit=3 .*\(use sample=N for a seeded draw\)"):
        api.evaluate("fake", "abricot_abs", limit=3, out=tmp_path / "o", **ARGS)


def test_a_task_skipped_for_lack_of_data_is_said_in_the_api_s_words_and_recorded_in_the_record_s(tmp_path):
    with pytest.warns(api.AbricotWarning, match=r"skipped discotex: no data \(get it: .*; offline: data_dir=DIR "):
        run = api.evaluate("fake", sample=2, out=tmp_path / "o", **ARGS)  # was: offline: --data-dir DIR
    (skipped,) = run.record.skipped
    assert "offline: --data-dir DIR" in skipped.how  # the record keeps the words records always had


def test_ctrl_c_leaves_a_run_that_resume_continues(tmp_path, monkeypatch):
    ref = quiet_evaluate("fake", "abricot_abs", out=tmp_path / "ref")
    with pytest.MonkeyPatch.context() as m:
        fail_after(m, 5, KeyboardInterrupt)
        with pytest.raises(KeyboardInterrupt) as err:
            quiet_evaluate("fake", "abricot_abs", out=tmp_path / "o")
    assert "resume=True" in str(err.value) and (tmp_path / "o" / "INTERRUPTED").is_file()
    assert not (tmp_path / "o" / "results.json").exists()
    with pytest.warns(api.AbricotWarning, match=r"o \(interrupted, 5 of 18 items; resume=True continues"):
        assert [r.path for r in api.load_runs(tmp_path)] == [ref.path]  # was "resumeTrue": the markers unrendered
    run = quiet_evaluate("fake", "abricot_abs", out=tmp_path / "o", resume=True)
    name = "samples-abricot_abs.jsonl"
    assert (Path(run.path) / name).read_bytes() == (Path(ref.path) / name).read_bytes()
    assert run.record.tasks["abricot_abs"].scored_now == 18 - 5
    with pytest.MonkeyPatch.context() as m:  # a finished folder resumed: handed back, nothing scored
        fail_after(m, 0, AssertionError("scored again"))
        assert quiet_evaluate("fake", "abricot_abs", out=tmp_path / "o", resume=True).record == run.record


def test_progress_is_a_tqdm_auto_bar_and_none_without_it(tmp_path, monkeypatch):
    import tqdm.auto

    made = []

    class Bar:
        def __init__(self, **kw):
            made.append(kw["desc"])
            self.n = 0

        def refresh(self):
            pass

        def close(self):
            pass

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    quiet_evaluate("fake", "abricot_abs", out=tmp_path / "a", progress=True)
    assert made == ["abricot_abs"]
    quiet_evaluate("fake", "abricot_abs", out=tmp_path / "b", progress=False)
    assert made == ["abricot_abs"]


def test_plan_is_the_dry_run(tmp_path):
    plan = api.plan("fake", "abricot_abs", sample=8, **{k: v for k, v in ARGS.items() if k != "progress"})
    r = invoke("run", "fake", "--tasks", "abricot_abs", "--sample", "8", *CLI, "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    api_text, cli_text = json.dumps(plan.to_json()), r.stdout
    # the same plan; the options it names (errors.opt) in each door's words, and nothing else differs
    assert "shard=K/2 (each part)" in api_text and "--shard K/2 (each part)" in cli_text
    assert "with calibrate=True measures" in api_text and "with --calibrate measures" in cli_text
    in_python = cli_text.replace("--shard K/", "shard=K/").replace("--calibrate", "calibrate=True") \
        .replace("--dry-run with", "plan(...) with")
    assert plan.to_json() == json.loads(in_python)
    # shown as the command prints it (in the API's words), in one line as a repr, as the text in a notebook
    text = invoke("run", "fake", "--tasks", "abricot_abs", "--sample", "8", *CLI, "--dry-run").stdout
    table = text[text.index("(a dry run"):].replace("--shard K/", "shard=K/").replace("--calibrate", "calibrate=True") \
        .replace("--dry-run with", "plan(...) with")
    assert str(plan).split() == table.split() and "shard=K/2 (each part)" in str(plan)  # (folded where it fits)
    assert repr(plan) == "Plan(fake: 8 items, time unknown)" and isinstance(plan, api.Plan)
    assert plan._repr_html_() == f"<pre>{html.escape(str(plan))}</pre>"


def test_a_sweep_and_compare(tmp_path):
    runs = quiet_evaluate(["fake", "fake-q8"], "abricot_abs", out=tmp_path / "sw", sample=8)
    assert [Path(r.path).name for r in runs] == ["fake", "fake-q8"]
    c = api.compare(*runs)
    again = api.compare(tmp_path / "sw")  # a folder holding runs, as `compare` takes it
    assert again.to_frame().equals(c.to_frame())
    f = c.to_frame()
    assert len(f) == len(c.result.metrics) > 0 and set(f.task) == {"abricot_abs"}
    assert f.verdict.tolist() == [c.verdicts[0].kind] * len(f)
    r = invoke("compare", tmp_path / "sw" / "fake", tmp_path / "sw" / "fake-q8")
    assert r.exit_code == 0 and c.verdicts[0].line in r.output and str(c).splitlines()[-1] in r.output
    with pytest.MonkeyPatch.context() as m, pytest.raises(api.SweepError, match="1 model.s. failed:\n  b: boom"
                                                            ) as err:
        fail_after(m, 8, ModelError(f"boom ({opt('n_ctx', 4096)})"))  # the second model fails, the first is kept
        quiet_evaluate(["fake", "b"], "abricot_abs", out=tmp_path / "sw2", sample=8)
    assert [Path(r.path).name for r in err.value.runs] == ["fake"]
    assert err.value.failed == [("b", "boom (n_ctx=4096)")]  # the option it names in Python's words
    with pytest.raises(UsageError, match="at least two finished runs"):
        api.compare(runs[0])
    with pytest.raises(UsageError, match="alpha must be between 0 and 1"):
        api.compare(*runs, alpha=2)


def test_lm_eval_layout_reads_as_lm_evals(tmp_path):
    from lm_eval import utils
    from lm_eval.result_schema import EvalResults, SampleResult

    run = quiet_evaluate("fake", "abricot", out=tmp_path / "o", sample=6)
    where = run.to_lm_eval(tmp_path / "lm")
    files = sorted(str(p) for p in where.iterdir())
    results = utils.get_results_filenames(files)
    samples = utils.get_sample_results_filenames(files)
    assert len(results) == 1 and len(samples) == 2
    doc = json.loads(open(results[0]).read())
    assert set(doc) <= set(EvalResults.__annotations__)
    assert {"results", "configs", "versions", "n-samples", "n-shot", "higher_is_better"} <= set(doc)
    tasks = {utils.get_file_task_name(p.rsplit("/", 1)[1]) for p in samples}
    assert tasks == set(doc["results"]) == {"abricot_abs", "abricot_inc"}
    assert utils.get_file_datetime(samples[0]) == utils.get_file_datetime(results[0]).removesuffix(".json")
    entry = run.record.tasks["abricot_abs"]
    assert doc["results"]["abricot_abs"]["pearson,none"] == pytest.approx(entry.metrics["pearson"], nan_ok=True)
    assert doc["n-samples"]["abricot_abs"] == {"original": 6, "effective": 6}
    lines = [json.loads(x) for x in open(next(p for p in samples if "abricot_abs" in p))]
    mine = run.samples("abricot_abs")
    required = {k for k in SampleResult.__annotations__}
    hashes = ""
    for i, (x, lp) in enumerate(zip(lines, mine.filter(like="logprob_").values.tolist())):
        assert required <= set(x) and x["doc_id"] == i and x["filter"] == "none"
        assert [float(r[0][0]) for r in x["resps"]] == lp  # every log-prob, exactly
        assert x["target"] == str(mine.gold[i]) and x["acc"] == float(mine.correct[i])
        assert x["prompt_hash"] == utils.hash_string(x["arguments"]["gen_args_0"]["arg_0"])
        assert x["doc_hash"] == utils.hash_string(json.dumps(x["doc"], indent=2, ensure_ascii=False))
        hashes += x["doc_hash"] + x["prompt_hash"] + x["target_hash"]
    assert doc["task_hashes"]["abricot_abs"] == utils.hash_string(hashes)
    r = invoke("report", run.path, "--format", "lm-eval", "-o", tmp_path / "cli")
    assert r.exit_code == 0, r.output
    for p in where.iterdir():
        assert (tmp_path / "cli" / where.name / p.name).read_bytes() == p.read_bytes()
    r = invoke("report", run.path, "--format", "lm-eval")
    assert r.exit_code == 2 and "-o DIR" in r.output


@pytest.mark.parametrize("call", ["evaluate", "plan", "load_run", "load_runs", "compare", "out"])
def test_a_path_the_file_system_refuses_is_one_error_line(call, tmp_path):
    """A path with a name over 255 bytes, given to each entry point, is its one-line AbricotError (the path
    shortened, its length said, why), as the command line says it: not an OSError (paths.path_error)."""
    long = tmp_path / ("x" * 300)
    args = {"evaluate": (f"{long}.gguf", "discotex"), "plan": (f"{long}.gguf", "discotex"), "load_run": (long,),
            "load_runs": (long,), "compare": (long, tmp_path / "y"), "out": ("fake", "abricot_abs")}[call]
    with pytest.raises(AbricotError) as err:
        getattr(api, "evaluate" if call == "out" else call)(*args, **(dict(ARGS, out=long) if call == "out" else {}))
    text = str(err.value)
    assert "\n" not in text and "bytes)" in text and "longer than the file system allows" in text, text
