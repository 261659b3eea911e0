"""What a hostile user broke, round 5 (issue 38, items 4, 6, 7, 9) and a new user's smaller
ones (issue 39, item 8): every case one line a user can act on, never a traceback, and wrong
data refused instead of taken silently. All on the fake backend and invented data."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import abricot_local
from abricot_local.backends.base import schedule
from abricot_local.cli import cli
from abricot_local.core import Request
from abricot_local.errors import AbricotError, ContextOverflowError, DataError
from abricot_local.report.safe import cell
from abricot_local.tasks.abricot_data import load_rows
from conftest import FIXTURE
from invented_data import write_discotex


def invoke(*args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


def clean(r) -> str:
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit), r.output
    return r.output


def fixture_frame() -> pd.DataFrame:
    return pd.read_csv(FIXTURE, dtype=str, keep_default_na=False)


def write(df: pd.DataFrame, path: Path) -> Path:
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True, force_ascii=False)
    else:
        df.to_parquet(path, index=False)
    return path


def tasks_data(path: Path):
    return invoke("tasks", "--data", f"abricot={path}")


# -- item 4: tracebacks where one line belongs ---------------------------------------------------
@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
@pytest.mark.parametrize("begin", ["inf", "1e400", "1e999"])
def test_an_abricot_begin_past_any_integer_is_a_bad_span_not_an_overflow(tmp_path, suffix, begin):
    df = fixture_frame()
    if suffix == ".csv":
        df.loc[0, "begin"] = begin
    else:
        df["begin"] = df["begin"].astype(float)
        df.loc[0, "begin"] = float(begin)
    path = write(df, tmp_path / f"abricot{suffix}")
    if suffix == ".jsonl":  # pandas writes inf as null: the number itself, as a hostile file holds it
        lines = path.read_text(encoding="utf-8").splitlines()
        literal = {"inf": "Infinity"}.get(begin, begin)  # JSON's spelling (Python's reader takes it)
        lines[0] = json.dumps({**json.loads(lines[0]), "begin": 0}).replace('"begin": 0', f'"begin": {literal}')
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows, bad = load_rows(path)
    assert len(rows) == len(df) and bad == 1
    r = tasks_data(path)
    assert r.exit_code == 0 and "abricot_abs" in clean(r)


def test_a_jsonl_line_nested_100000_deep_is_one_line_in_run_and_tasks(tmp_path):
    path = write(fixture_frame(), tmp_path / "abricot.jsonl")
    with path.open("a", encoding="utf-8") as fh:
        fh.write("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(DataError, match=r"line 19 nests lists or objects deeper than 64 levels"):
        load_rows(path)
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={path}",
               "--out", tmp_path / "o")
    assert r.exit_code == 2 and "line 19 nests lists or objects deeper" in clean(r)
    r = tasks_data(path)
    assert "unreadable:" in clean(r) and "line 19 nests lists or objects deeper" in r.output


def test_a_data_folder_that_cannot_be_searched_is_one_line(tmp_path, monkeypatch):
    data = write_discotex(tmp_path / "d", 3)
    real = Path.stat

    def stat(self, *a, **kw):  # as for a non-root user after chmod a-x DIR (root reads anything)
        if self.parent == data:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "stat", stat)
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data", f"discotex={data}",
               "--out", tmp_path / "o")
    out = clean(r)
    assert r.exit_code == 2 and "Permission denied" in out and "PermissionError" not in out, out


@pytest.fixture(scope="module")
def two_tasks(tmp_path_factory):
    """A finished fake run of 4 DISCOTEX and 4 ABRICOT items, copied by each test that edits it."""
    root = tmp_path_factory.mktemp("two")
    data = write_discotex(root / "d", 4)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex,abricot_abs", "--data-dir", data,
                   "--data", f"abricot={FIXTURE}", "--limit", 4, "--out", root / "run")
    assert r.exit_code == 0, r.output
    return root / "run", data


def edited(src: Path, dst: Path, change) -> Path:
    shutil.copytree(src, dst)
    doc = json.loads((dst / "results.json").read_text())
    change(doc)
    (dst / "results.json").write_text(json.dumps(doc))
    return dst


def test_a_samples_file_naming_another_tasks_file_is_refused_by_every_reader(two_tasks, tmp_path):
    run = edited(two_tasks[0], tmp_path / "run",
                 lambda d: d["tasks"]["abricot_abs"].update(samples_file="samples-discotex.jsonl"))
    want = "tasks.abricot_abs.samples_file 'samples-discotex.jsonl' is not this task's samples file"
    for args in (("check", run), ("report", run, "--verify"), ("report", run, "--format", "html", "-o", tmp_path / "p.html"),
                 ("report", run, "--format", "lm-eval", "-o", tmp_path / "lm"), ("compare", two_tasks[0], run)):
        r = invoke(*args)
        assert r.exit_code != 0 and want in clean(r), (args, r.output)
    for call in (lambda: abricot_local.load_run(run).samples(), lambda: abricot_local.load_run(run).to_lm_eval(
            tmp_path / "lm2"), lambda: abricot_local.compare(two_tasks[0], run)):
        with pytest.raises(AbricotError, match=want):
            call()


def test_another_tasks_samples_under_this_tasks_name_are_one_line(two_tasks, tmp_path):
    run = edited(two_tasks[0], tmp_path / "run", lambda d: None)
    shutil.copy(run / "samples-abricot_abs.jsonl", run / "samples-discotex.jsonl")
    for args in (("check", run), ("report", run, "--verify")):
        r = invoke(*args)
        assert r.exit_code != 0 and "the samples of task discotex lack its field 'class'" in clean(r), r.output


def test_compare_refuses_a_negative_seed_an_infinite_margin_and_a_nan_tolerance(two_tasks, tmp_path):
    run, other = two_tasks[0], edited(two_tasks[0], tmp_path / "b", lambda d: None)
    for flag, value, want in (("--seed", -1, "--seed must be between 0 and"), ("--margin", "inf", "--margin must be"),
                              ("--tolerance", "nan", "--tolerance must be"), ("--near-tie", "inf", "--near-tie must")):
        r = invoke("compare", run, other, flag, value)
        assert r.exit_code == 2 and want in clean(r), (flag, r.output)
    # the API names its keyword, not the flag (errors.opt: str(err) writes the keyword)
    with pytest.raises(AbricotError, match=r"^margin must be a finite number more than 0 \(in the metric's own "
                                           r"units\), got inf"):
        abricot_local.compare(run, other, margin=float("inf"))


def test_ctrl_c_during_check_exits_130(two_tasks, monkeypatch):
    from abricot_local.run import check

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(check, "check_run", interrupted)
    r = invoke("check", two_tasks[0])
    assert r.exit_code == 130 and "check interrupted" in r.output


@pytest.fixture
def discotex_data(tmp_path):
    return write_discotex(tmp_path / "d", 5)


WRONG = [  # (call, keyword): the 17 wrong-type calls, and more of the same kind
    (dict(tasks=5), "tasks"), (dict(sample="3"), "sample"), (dict(sample=True), "sample"), (dict(limit=2.5), "limit"),
    (dict(out=123), "out"), (dict(shots="3"), "shots"), (dict(prompt_variant=[1]), "prompt_variant"),
    (dict(shard=(1, 2)), "shard"), (dict(seed="1"), "seed"), (dict(n_ctx="512"), "n_ctx"), (dict(resume="yes"), "resume"),
    (dict(data=5), "data"), (dict(data_dir=3), "data_dir"), (dict(protocol=1), "protocol"), (dict(quants=4), "quants"),
]


@pytest.mark.parametrize("kwargs,name", WRONG, ids=[n + "-" + type(next(iter(k.values()))).__name__ for k, n in WRONG])
@pytest.mark.parametrize("call", ["evaluate", "plan"])
def test_the_api_refuses_a_wrong_type_at_entry_naming_the_keyword(discotex_data, kwargs, name, call):
    if call == "plan" and name in ("out", "resume"):
        return
    args = dict(tasks="discotex", backend="fake", data_dir=str(discotex_data))
    if call == "evaluate":
        args["progress"] = False
    with pytest.raises(AbricotError, match=rf"^{call}\(\): {name} must be .*, got "):
        getattr(abricot_local, call)("fake", **{**args, **kwargs})


def test_the_api_refuses_model_none_load_run_none_and_a_text_margin(tmp_path):
    with pytest.raises(AbricotError, match=r"evaluate\(\): model must be a model name or a .gguf path .*got None"):
        abricot_local.evaluate(None, "discotex", backend="fake")
    with pytest.raises(AbricotError, match=r"load_run\(\): path must be text or a path, got None"):
        abricot_local.load_run(None)
    with pytest.raises(AbricotError, match=r"load_runs\(\): folder must be"):
        abricot_local.load_runs(5)
    with pytest.raises(AbricotError, match=r"compare\(\): margin must be a number or None, got 'x'"):
        abricot_local.compare(tmp_path, tmp_path, margin="x")
    with pytest.raises(AbricotError, match=r"compare\(\): seed must be an integer"):
        abricot_local.compare(tmp_path, tmp_path, seed=1.5)


def test_the_api_takes_data_as_a_pair_a_string_or_a_mapping(discotex_data):
    for data in ([("discotex", discotex_data)], f"discotex={discotex_data}", {"discotex": discotex_data},
                 (f"discotex={discotex_data}",)):
        plan = abricot_local.plan("fake", "discotex", backend="fake", data=data, prompt_variant=["card", "ita-bench"])
        assert [t.items for t in plan.models[0].tasks] == [10, 10], data


# -- item 6: wrong data accepted silently --------------------------------------------------------
def test_parquet_null_or_list_text_is_refused(tmp_path):
    df = fixture_frame()
    df["text"] = df["text"].astype(object)
    df.loc[2, "text"] = None
    with pytest.raises(DataError, match=r"row 3, column text: empty"):
        load_rows(write(df, tmp_path / "null.parquet"))
    df["text"] = [[t] for t in fixture_frame()["text"]]
    with pytest.raises(DataError, match=r"row 1, column text: an array \(\[\"Il cane del vicino.*where text is"):
        load_rows(write(df, tmp_path / "list.parquet"))


def test_a_csv_saved_with_two_byte_order_marks_keeps_its_ids(tmp_path):
    path = tmp_path / "abricot.csv"
    path.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbf" + FIXTURE.read_bytes())
    rows, _ = load_rows(path)
    assert [r.id for r in rows][:2] == ["inv-01", "inv-02"]


def test_a_misspelt_data_key_is_refused_with_did_you_mean(tmp_path, discotex_data):
    for args in (("tasks", "--data", f"abricto={FIXTURE}"),
                 ("run", "fake", "--backend", "fake", "--data", f"abricto={FIXTURE}", "--data-dir", discotex_data)):
        r = invoke(*args)
        assert r.exit_code == 2 and "no task reads data named 'abricto'. Did you mean: abricot?" in clean(r)


def test_an_infinite_std_is_refused_so_no_sample_holds_infinity(tmp_path):
    df = fixture_frame()
    df.loc[1, "abstractness std"] = "inf"
    with pytest.raises(DataError, match=r"row 2, column abstractness std: 'inf' is not a finite number"):
        load_rows(write(df, tmp_path / "abricot.csv"))


def test_the_samples_csv_neutralises_spreadsheet_formulas(tmp_path):
    df = fixture_frame()
    df.loc[0, "ID"] = "=cmd|' /C calc'!A0"
    df.loc[1, "ID"] = "@SUM(1)"
    df.loc[2, "ID"] = "-2+3"
    data = write(df, tmp_path / "abricot.csv")
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={data}",
               "--limit", 3, "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    out = invoke("report", tmp_path / "o", "--table", "samples", "--format", "csv").output
    frame = pd.read_csv(__import__("io").StringIO(out), dtype=str)
    assert list(frame["id"]) == ["'=cmd|' /C calc'!A0", "'@SUM(1)", "'-2+3"]
    assert [cell(x) for x in ("-0.5", "+1", "1e-3", "\tx", "\rx", "a=b")] == ["-0.5", "+1", "1e-3", "'\tx", "'\rx", "a=b"]


# -- item 7: an item longer than the context window --------------------------------------------
def test_a_context_far_past_the_window_is_refused_without_tokenizing_it_whole():
    seen = []

    def tokenize(text):
        seen.append(len(text))
        return [ord(c) for c in text]

    text = "parola " * 500_000  # 3.5 MB
    with pytest.raises(ContextOverflowError, match=r"the prompt is 3,500,000 characters, at least .* tokens"):
        schedule(Request(text, (" A", " B")), tokenize, 512)
    assert max(seen) < 100_000
    ok = schedule(Request("parola " * 100, (" A", " B")), tokenize, 4096)  # short: scheduled as before
    assert ok.seqs[0] == tuple(ord(c) for c in "parola " * 100 + " A")


def test_a_paragraph_of_megabytes_is_refused_in_seconds(tmp_path):
    df = fixture_frame()
    df.loc[0, "text"] = "Il cane del vicino abbaia. " + "La notte era lunga e silenziosa. " * 100_000
    data = write(df, tmp_path / "big.parquet")
    start = time.perf_counter()
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={data}",
               "--out", tmp_path / "o")
    assert time.perf_counter() - start < 30
    assert r.exit_code != 0 and "item inv-01: the prompt is" in clean(r) and "context window holds" in r.output


# -- item 9: smaller ones ----------------------------------------------------------------------
def test_a_seed_of_46_digits_is_refused_at_the_start(tmp_path, discotex_data):
    seed = "1" * 46
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", discotex_data, "--seed", seed,
               "--out", tmp_path / "o")
    assert r.exit_code == 2 and "--seed must be at most 18446744073709551615" in clean(r)
    assert not (tmp_path / "o").exists()


def test_a_sample_run_of_one_class_is_not_told_to_stop_using_limit(tmp_path):
    data = write_discotex(tmp_path / "d", 6, classes=(0,))
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--sample", 3,
               "--out", tmp_path / "o")
    assert r.exit_code == 0 and "the same gold answer" in r.output and "instead of --limit" not in r.output


def test_data_that_is_not_a_folder_or_not_a_file_is_named_as_such(tmp_path, discotex_data):
    pq = tmp_path / "rows.parquet"
    pq.write_bytes(b"PAR1")
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data", f"discotex={pq}")
    assert r.exit_code == 2 and f"(given with --data discotex={pq}) is a file, not a folder holding" in clean(r)
    assert "data folder not found" not in r.output
    name = "discotex_1_ted_test_set_release.tsv"
    (discotex_data / name).unlink()
    os.mkfifo(discotex_data / name)
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data", f"discotex={discotex_data}")
    assert r.exit_code == 2 and f"{name} (a FIFO (named pipe), not a file)" in clean(r)
    (discotex_data / name).unlink()
    os.symlink(name, discotex_data / name)
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data", f"discotex={discotex_data}")
    assert r.exit_code == 2 and f"{name} (a symlink that loops)" in clean(r)


def test_an_unclosed_csv_quote_names_the_line_it_opens_on(tmp_path):
    rows = [f"r{k},cane,Il cane {k} abbaia.,0.5,0.5" for k in range(200)]
    rows[3] = rows[3].replace("Il cane", '"Il cane')
    path = tmp_path / "abricot.csv"
    path.write_text("ID,target token,text,abstractness mean,inclusiveness mean\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataError, match=r"abricot.csv, line 5: a quoted field .* is never closed"):
        load_rows(path)


# -- issue 39, item 8 ----------------------------------------------------------------------------
def test_the_abricot_save_by_hand_block_is_printed_once(monkeypatch):
    import socket
    import urllib.error

    def urlopen(request, timeout=None):
        raise urllib.error.URLError(socket.gaierror(-3, "Temporary failure in name resolution"))

    monkeypatch.delenv("ABRICOT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("urllib.request.urlopen", urlopen)
    r = invoke("run", "fake", "--backend", "fake")  # every task: their errors joined into one
    assert r.exit_code == 2 and "no task has its data here: abricot_abs, abricot_inc, discotex" in clean(r)
    assert r.output.count("      dataset_it.csv\n") == 1 and r.output.count("by hand into") == 2, r.output


def test_sample_and_limit_are_refused_with_the_part_that_applies(tmp_path, discotex_data):
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--sample", 40, "--limit", 40)
    assert r.exit_code == 2 and "--sample 40 and --limit 40 cannot be combined" in r.output
    assert "at least 1" not in r.output
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--sample", 0)
    assert r.exit_code == 2 and "--sample must be at least 1, got 0" in r.output and "combined" not in r.output


def test_a_name_short_of_an_alias_suggests_the_alias():
    r = invoke("run", "smollm2-135m", "--dry-run")
    assert r.exit_code != 0 and "smollm2-135m-pypi" in clean(r)


def test_an_offline_dry_run_plans_a_download_and_says_the_run_would_refuse_it(tmp_path):
    discotex_data = write_discotex(tmp_path / "d5", 5)
    r = invoke("run", "llama-3.1-70b-q4", "--tasks", "discotex", "--data-dir", discotex_data, "--dry-run",
               env={"HF_HUB_OFFLINE": "1"})
    out = clean(r)
    assert r.exit_code == 0, out
    assert "download:" in out and "offline: the run itself would refuse this download" in out
    r = invoke("run", "llama-3.1-70b-q4", "--tasks", "discotex", "--data-dir", discotex_data, "--dry-run", "--json")
    doc = json.loads(r.output)
    assert doc["models"][0]["download"]["refused_offline"]


def test_planning_a_large_task_shows_progress(tmp_path):
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={FIXTURE}",
               "--dry-run", env={"ABRICOT_PROGRESS_SECONDS": "0"})
    assert r.exit_code == 0, r.output
    assert "plan: counting abricot_abs's tokens, 1 of 18 items ..." in r.stderr, r.stderr
    quiet = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={FIXTURE}",
                   "--dry-run")
    assert "plan: counting" not in quiet.stderr  # a small file is counted in well under the interval


def test_an_abricot_file_that_is_a_fifo_is_named_as_such(tmp_path):
    fifo = tmp_path / "abricot.csv"
    os.mkfifo(fifo)
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={fifo}")
    assert r.exit_code == 2 and "a FIFO (named pipe), not a file" in clean(r)


def test_a_sample_holding_nan_or_infinity_in_a_tasks_field_is_not_written():
    from abricot_local.errors import ResultsError
    from abricot_local.record import Sample, check_line

    good = Sample(id="a", logprobs=(-1.0, -2.0), gold=1, pred=0, extra={"human_std": 0.1, "shots": [1, 2]})
    assert check_line(good, "x").fields["human_std"] == 0.1
    for extra, where in (({"human_std": float("inf")}, "human_std (inf)"),
                         ({"t": {"u": [0.5, float("nan")]}}, "t.u[1] (nan)")):
        with pytest.raises(ResultsError, match=re.escape(f"{where} is not a finite number")):
            check_line(Sample(id="b", logprobs=(-1.0, -2.0), gold=1, pred=0, extra=extra), "x")


def test_lm_eval_export_maps_a_protocol_and_a_prompt_variant_apart(tmp_path):
    """issue 38 item 9: `abricot_abs@calamita` and `abricot_abs~calamita` (a --prompt-variant all run
    under both protocols) both sanitize to `abricot_abs_calamita`; the export spells their separators out."""
    from abricot_local.analysis.lm_eval_output import task_names

    r = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={FIXTURE}",
               "--protocol", "all", "--prompt-variant", "all", "--limit", "2", "--n-ctx", "8192",
               "--out", tmp_path / "run")
    assert r.exit_code == 0, r.output
    r = invoke("report", tmp_path / "run", "--format", "lm-eval", "-o", tmp_path / "lm")
    assert r.exit_code == 0, r.output
    (results,) = (tmp_path / "lm").glob("*/results_*.json")
    aliases = {name: v["alias"] for name, v in json.loads(results.read_text())["results"].items()}
    assert aliases["abricot_abs_at_calamita"] == "abricot_abs@calamita"
    assert aliases["abricot_abs_v_calamita"] == "abricot_abs~calamita"
    assert len(set(aliases.values())) == len(aliases) == len(list(results.parent.glob("samples_*.jsonl")))
    assert task_names(["discotex", "abricot_abs@calamita"]) == {"discotex": "discotex",
                                                                "abricot_abs@calamita": "abricot_abs_calamita"}
    with pytest.raises(AbricotError, match="all become"):
        task_names(["a_at_b", "a@b", "a_b"])
