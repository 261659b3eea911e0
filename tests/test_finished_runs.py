"""The read side of finished runs (issues 44 item 4, 47 item 3, 48 items 1, 4 and 5): one type for a run
folder and an lm-eval output (analysis.runs.Run), the API's compare on the Runs it is given, files that
are not regular (a FIFO, a link to /dev/zero) refused before a byte is read, doctored lm-eval outputs,
verdicts and kld.json refused, lm-eval outputs read offline with the data given, labels that say what a
run scored. Fake-backend runs on the invented ABRICOT rows, in process (a subprocess where a hang or a
memory blow-up is what a regression would bring)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

import abricot_local as api
from abricot_local.analysis.loading import load_run
from abricot_local.cli import cli
from abricot_local.errors import AbricotError, ResultsError, UsageError
from conftest import FIXTURE, isolated_env

ARGS = ("--backend", "fake", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--tasks", "abricot_abs")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Finished fake runs (8 sampled items, 5 first items, all 18; one under a registry entry that
    reproduces the paper's row) and an lm-eval export of the first, made once for the module."""
    root = tmp_path_factory.mktemp("finished")
    models = root / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n',
                      encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in isolated_env(root).items():
            mp.setenv(key, value)
        for name, more in (("s8", ("--sample", "8")), ("l5", ("--limit", "5")), ("all", ()),
                           ("pub", ("--models", models))):
            model = "fake-as-llama" if name == "pub" else "fake"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = invoke("run", model, *ARGS, *more, "--out", root / "runs" / name)
            assert r.exit_code == 0, r.output
        lm = load_run(root / "runs" / "s8").to_lm_eval(root / "lm")
    return {"runs": root / "runs", "lm": lm, "root": root}


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _no_data_files(lm: Path, dst: Path) -> Path:
    """A copy of the export ``lm`` that names no data files (as lm-eval's own output): its data not found alone."""
    (results,) = _copy(lm, dst).glob("results_*.json")
    doc = json.loads(results.read_text(encoding="utf-8"))
    for config in doc["configs"].values():
        del config["metadata"]["data"]
    results.write_text(json.dumps(doc), encoding="utf-8")
    return dst


# -- one finished run ----------------------------------------------------------------------------------
def test_a_run_folder_and_an_lm_eval_output_are_one_type(made):
    from abricot_local.analysis.runs import Run

    run = api.load_run(made["runs"] / "s8")
    lm = api.load_run(made["lm"].parent, data={"abricot": str(FIXTURE)})  # the folder above lm-eval's own
    assert api.Run is Run and type(run) is Run and type(lm) is Run and lm.lm_eval and not run.lm_eval
    assert lm.tasks == run.tasks == ("abricot_abs",)
    assert [(s.id, s.logprobs) for s in lm.samples_of("abricot_abs")] == \
        [(s.id, s.logprobs) for s in run.samples_of("abricot_abs")]
    assert lm.metrics()["value"].tolist() == run.metrics()["value"].tolist()
    # a recorded task's options: one home, the task instance's
    t = run.task("abricot_abs")
    assert t.options.seed == run.record.config.seed and t.instance().key == "abricot_abs"


def test_compare_uses_the_runs_it_is_given(made, tmp_path):
    a = load_run(_copy(made["runs"] / "s8", tmp_path / "a"))
    b = load_run(_copy(made["runs"] / "all", tmp_path / "b"))
    for r in (a, b):
        r.samples_of("abricot_abs")  # read once; the folders then go
    shutil.rmtree(tmp_path / "a")
    shutil.rmtree(tmp_path / "b")
    c = api.compare(replace(a, label="mine"), b)
    assert c.labels == ("mine", "fake") and c.result.matches[0].n_common == 8


def test_record_settings_differences_are_typed():
    from abricot_local.record import Manifest, Provenance, RunConfig
    from abricot_local.record import settings as recorded

    a = Manifest(config=RunConfig(seed=1, extra={"n_batch": 64}), model_sha256="x")
    b = Manifest(config=RunConfig(seed=1, extra={"n_batch": 512}), model_sha256="x")
    assert [(d.key, d.a, d.b) for d in recorded.differences(a, b)] == [("config.n_batch", 64, 512)]
    assert [d.key for d in recorded.differences(a, b, depth=1)] == ["config"]
    laid = recorded.overlay(Provenance(backend="fake", extra={"threads": 2}), Provenance(extra={"threads": 4}))
    assert (laid.backend, laid.extra["threads"]) == ("fake", 4)


# -- files that are not regular -----------------------------------------------------------------------
SCRIPT = textwrap.dedent("""
    import json, resource, sys, warnings
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))  # a regression fails, it does not swap
    from click.testing import CliRunner
    import abricot_local as api
    from abricot_local.cli import cli
    from abricot_local.jsonfiles import read_json
    tree = sys.argv[1]
    r = CliRunner().invoke(cli, ["report", tree, "--format", "json"])
    out = {"code": r.exit_code, "report": r.stdout, "notes": r.stderr}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out["loaded"] = [x.path for x in api.load_runs(tree)]
    out["warnings"] = [str(w.message) for w in seen]
    try:
        read_json(tree + "/zero/results_x.json")
    except Exception as err:
        out["zero"] = str(err)
    print(json.dumps(out))
""")


# the tree SCRIPT reads, made in SCRIPT's own process before it: a finished fake run of 8 sampled items (as `made`
# makes "s8") and its lm-eval export, copied in beside a FIFO named results_x.json, a link to /dev/zero named so, and
# the export's samples file replaced by a FIFO
HOSTILE_TREE = textwrap.dedent("""
    import os, shutil, sys, warnings
    from pathlib import Path
    from click.testing import CliRunner
    from abricot_local.analysis.loading import load_run
    from abricot_local.cli import cli
    tree, root = Path(sys.argv[1]), Path(sys.argv.pop(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = CliRunner().invoke(cli, ["run", "fake", *sys.argv[2:], "--sample", "8", "--out", str(root / "s8")])
    assert made.exit_code == 0, made.output
    shutil.copytree(root / "s8", tree / "good")
    (tree / "zero").mkdir()
    (tree / "zero" / "results_x.json").symlink_to("/dev/zero")
    (tree / "fifo").mkdir()
    os.mkfifo(tree / "fifo" / "results_x.json")
    lm = shutil.copytree(load_run(root / "s8").to_lm_eval(root / "lm"), tree / "lm")
    (samples,) = Path(lm).glob("samples_*.jsonl")
    samples.unlink()
    os.mkfifo(samples)
""")


def early_children(tmp_path_factory) -> dict:
    """HOSTILE_TREE then SCRIPT in one fresh process (a private cache and config), started by conftest once the
    tests are collected, beside the other tests (conftest.start_early): SCRIPT's part is bounded as before."""
    from conftest import Early

    root = tmp_path_factory.mktemp("hostile")
    return {"tree": Early([sys.executable, "-c", HOSTILE_TREE + SCRIPT, str(root / "tree"), str(root / "made"), *ARGS],
                          timeout=60, cwd=root, env={**os.environ, **isolated_env(root)})}


@pytest.fixture(scope="module")
def hostile_tree(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    yield child
    child.close()


def test_a_tree_with_a_fifo_or_a_link_to_dev_zero_is_reported_within_seconds(hostile_tree):
    """`report` and `load_runs` on a tree holding a FIFO named results_x.json, a link to /dev/zero named
    so, and an lm-eval folder whose samples file is a FIFO: one line each, the real run reported."""
    r = hostile_tree.result()
    lm = Path(hostile_tree.args[3]) / "lm"  # the tree's, as HOSTILE_TREE copies it
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    assert got["code"] == 0, got["notes"]
    assert [Path(x["folder"]).name for x in json.loads(got["report"])["runs"]] == ["good"]
    notes = got["notes"]
    assert "zero/results_x.json is a character device, not a regular file" in notes
    assert "fifo/results_x.json is a FIFO (named pipe), not a regular file" in notes
    assert f"note: skipped {lm}" in notes and "is a FIFO (named pipe), not a regular file" in notes
    assert [Path(p).name for p in got["loaded"]] == ["good"]
    assert sum("not a regular file" in w for w in got["warnings"]) == 3
    assert "is a character device, not a regular file; nothing was read" in got["zero"]


def test_a_file_larger_than_any_of_its_kind_is_refused_unread(tmp_path, monkeypatch):
    from abricot_local import jsonfiles

    big = tmp_path / "results.json"
    big.write_text(json.dumps({"x": "a" * 5000}), encoding="utf-8")
    monkeypatch.setattr(jsonfiles, "MAX_JSON_BYTES", 4096)
    with pytest.raises(ResultsError, match=r"holds more than 4,096 bytes, more than any such file"):
        jsonfiles.read_json(big)
    monkeypatch.setattr(jsonfiles, "MAX_JSONL_BYTES", 100)
    lines = tmp_path / "s.jsonl"
    lines.write_text('{"a": 1}\n' * 20, encoding="utf-8")
    with pytest.raises(ResultsError, match="more than any such file"):
        jsonfiles.read_jsonl_lines(lines)


# -- doctored files -----------------------------------------------------------------------------------
def _edit_lm(made, tmp_path, change_doc=None, change_line=None) -> Path:
    lm = _copy(made["lm"], tmp_path / "lm")
    (results,) = lm.glob("results_*.json")
    if change_doc:
        doc = json.loads(results.read_text(encoding="utf-8"))
        change_doc(doc)
        results.write_text(json.dumps(doc), encoding="utf-8")
    if change_line:
        (samples,) = lm.glob("samples_*.jsonl")
        rows = [json.loads(x) for x in samples.read_text(encoding="utf-8").splitlines()]
        change_line(rows[0])
        samples.write_text("".join(json.dumps(x) + "\n" for x in rows), encoding="utf-8")
    return lm


@pytest.mark.parametrize("value", ["5.0", "1e308"])
def test_lm_eval_log_likelihoods_above_zero_are_refused(made, tmp_path, value):
    def above(row):
        row["resps"][0][0][0] = value
        row["filtered_resps"][0][0] = value

    lm = _edit_lm(made, tmp_path, change_line=above)
    with pytest.raises(ResultsError, match=r"line 1: log-likelihood .* is above 0") as err:
        load_run(lm, data=(("abricot", str(FIXTURE)),))
    assert "\n" not in str(err.value)


def test_an_lm_eval_date_no_clock_shows_is_one_line(made, tmp_path):
    lm = _edit_lm(made, tmp_path, change_doc=lambda doc: doc.update(date=1e300))
    with pytest.raises(ResultsError, match=r"its date 1e\+300 is no time a clock shows") as err:
        load_run(lm, data=(("abricot", str(FIXTURE)),))
    assert "\n" not in str(err.value)


def test_report_verify_refuses_an_edited_verdict(made, tmp_path):
    run = _copy(made["runs"] / "pub", tmp_path / "pub")
    r = invoke("report", run, "--verify")
    said = "the published verdicts of 1 of them match those made again from their metrics and the published rows"
    assert r.exit_code == 0 and said in r.output, r.output
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    check = doc["published"]["checks"][0]
    was = check["verdict"]
    check["verdict"] = edited = "differs" if was == "reproduced" else "reproduced"
    (run / "results.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    r = invoke("report", run, "--verify")
    assert r.exit_code == 1 and "verified:" not in r.output, r.output
    assert (f"published verdict differs: {run} published.checks[0] (llama-3.1-8b, abricot_abs.pearson) verdict: "
            f'recorded "{edited}", made again "{was}"') in r.output


def test_an_lm_eval_export_inside_a_run_is_refused(made, tmp_path):
    run = _copy(made["runs"] / "s8", tmp_path / "run")
    r = invoke("report", run, "--format", "lm-eval", "-o", run)
    assert r.exit_code != 0 and "is inside the run folder" in r.output, r.output
    r = invoke("report", run, "--format", "lm-eval", "-o", run / "deep" / "er")
    assert r.exit_code != 0 and "is inside the run folder" in r.output
    assert sorted(p.name for p in run.iterdir()) == sorted(p.name for p in (made["runs"] / "s8").iterdir())
    loaded = api.load_run(run)
    with pytest.raises(UsageError, match="is inside the run folder"):
        loaded.to_lm_eval(run)
    with pytest.raises(AbricotError, match=r"^to_lm_eval\(\): folder must be text or a path, got 5 \(int\)$"):
        loaded.to_lm_eval(5)


def test_kld_json_values_and_its_rung_are_checked(made, tmp_path):
    from abricot_local.analysis import kld
    from abricot_local.record import Model

    good = {"n_tokens": 10, "mean": 0.01, "ci95": [0.005, 0.015], "median": 0.008, "p99": 0.05, "p99_9": 0.06,
            "max": 0.07, "same_top": 0.9, "n_items": 2}
    assert kld.KldStats.from_dict(good).mean == 0.01
    for bad, why in (({"mean": -5}, "KLD mean -5 is below 0"), ({"same_top": 7.0}, "same-top share 7 is not within"),
                     ({"n_tokens": -3}, "n_tokens -3 is less than 1"),
                     ({"ci95": [0.015, 0.005]}, "does not hold the mean"), ({"max": float("nan")}, "not a finite")):
        with pytest.raises(ResultsError, match=why):
            kld.KldStats.from_dict({**good, **bad}, "RUN/kld.json")
    folder = tmp_path / "rung"
    folder.mkdir()
    ref, rung = Model(name="ref", sha256="a" * 64), Model(name="rung", sha256="b" * 64)
    entry = {"model_sha256": "c" * 64, "tasks": {"discotex": good}}
    (folder / kld.FILE).write_text(json.dumps({"kind": kld.KIND, "version": 1, "references": {"a" * 64: entry}}))
    with pytest.raises(ResultsError, match="was measured for the model cccc"):
        kld.kld_of(folder, ref, rung)
    entry["model_sha256"] = "b" * 64
    (folder / kld.FILE).write_text(json.dumps({"kind": kld.KIND, "version": 1, "references": {"a" * 64: entry}}))
    assert kld.kld_of(folder, ref, rung)["discotex"].n_tokens == 10


# -- lm-eval outputs offline: --data, --data-dir, and the API as the CLI ----------------------------
def test_report_and_compare_take_the_data_of_an_lm_eval_folder(made, tmp_path):
    lm = _no_data_files(made["lm"], tmp_path / "lm")
    r = invoke("report", lm)
    assert r.exit_code != 0 and "the data of abricot_abs is not here" in r.output
    assert "give it with --data abricot=PATH or --data-dir DIR" in r.output
    r = invoke("report", lm, "--data", f"abricot={FIXTURE}", "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["runs"][0]["tasks"]["abricot_abs"]["n"] == 8
    data = tmp_path / "data"
    data.mkdir()
    (data / "dataset_it.csv").symlink_to(FIXTURE)
    other = _copy(lm, tmp_path / "other")
    r = invoke("compare", lm, other, "--data-dir", data, "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["verdicts"][0]["kind"] == "identical", r.output


def test_the_api_reads_lm_eval_folders_as_the_cli_does(made, recwarn, tmp_path):
    lm_above = _no_data_files(made["lm"], tmp_path / "lm" / made["lm"].name).parent  # the model's folder below it
    c = api.compare(str(made["runs"] / "s8"), str(lm_above))  # the data: the run's recorded file
    assert c.result.matches[0].n_common == 8 and c.verdicts[0].kind == "identical"
    with pytest.raises(ResultsError, match=r'give it: data=\{"abricot": PATH\} or data_dir=DIR'):
        api.load_run(lm_above)
    (run,) = api.load_runs(lm_above, data={"abricot": str(FIXTURE)})
    assert run.lm_eval and run.tasks == ("abricot_abs",)
    assert api.load_run(lm_above, data=f"abricot={FIXTURE}").tasks == ("abricot_abs",)


def test_labels_name_what_each_run_scored(made):
    from abricot_local.analysis.runs import labelled

    runs = labelled([load_run(made["runs"] / n) for n in ("s8", "l5", "all")])
    assert [r.label for r in runs] == ["fake (sample 8)", "fake (limit 5)", "fake (all 18)"]
    lm = load_run(made["lm"], data=(("abricot", str(FIXTURE)),))
    # an export of the --sample 8 run records its sample (it was read as all of 8)
    assert [r.label for r in labelled([lm, load_run(made["runs"] / "l5")])] == ["fake (sample 8)", "fake (limit 5)"]
