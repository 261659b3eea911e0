"""The API's manners beyond its results (docs/python.md, "Notebook manners"): what a run records as a task's
warning said as an AbricotWarning in the API's words (as the run made it: the record keeps its own words), at
the user's line; a failed run folder said as it is by load_run and load_runs alike (its error as the folder keeps
it); a call Python would refuse with a TypeError refused as a UsageError naming the
keyword; a data_dir that is a file said as such."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import abricot_local as api
from abricot_local.errors import DataError, ResultsError, UsageError
from conftest import FIXTURE

ARGS = dict(backend="fake", data={"abricot": str(FIXTURE)}, n_ctx=8192, progress=False)


def said(call, *a, **kw) -> tuple[object, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call(*a, **kw)
    return out, [w for w in caught if issubclass(w.category, api.AbricotWarning)]


def test_a_tasks_recorded_warnings_are_said_in_the_api_s_words_at_the_user_s_line(tmp_path):
    run, caught = said(api.evaluate, "fake", "abricot_inc", sample=2, out=tmp_path / "o", **ARGS)
    recorded = run.record.tasks["abricot_inc"].warnings
    assert any("a larger --sample N draws more" in w for w in recorded)  # the record's words, kept
    texts = [str(w.message) for w in caught]
    same_gold = [t for t in texts if "every scored item has the same gold answer" in t]
    assert len(same_gold) == 1 and same_gold[0].startswith("abricot_inc: every scored item has the same gold answer")
    assert same_gold[0].endswith("the metrics describe one class only; a larger sample=N draws more of the release")
    assert "abricot_inc: pearson is undefined (NaN): the gold labels are constant ('5')" in texts
    assert not any("--" in t for t in texts)  # no flag: every option a keyword
    assert {Path(w.filename).name for w in caught} == {Path(__file__).name}  # the user's line, not run/session.py
    html = run._repr_html_()  # where a notebook looks at the run later
    assert "warnings:" in html and "every scored item has the same gold answer" in html


def test_a_skipped_task_and_a_sweep_s_warnings_point_at_the_user_s_line(tmp_path):
    _, caught = said(api.evaluate, "fake", sample=2, out=tmp_path / "o", **ARGS)  # discotex: no data, skipped
    assert any(str(w.message).startswith("skipped discotex: no data") for w in caught)
    (where,) = {(w.filename, w.lineno) for w in caught}  # each at the line that called evaluate (in said())
    assert where[0] == __file__ and "out = call(*a, **kw)" in Path(__file__).read_text().splitlines()[where[1] - 1]


def test_a_note_said_as_the_run_goes_is_not_said_again_from_its_record(tmp_path):
    run, caught = said(api.evaluate, "fake", "abricot_abs", sample=100, out=tmp_path / "o", **ARGS)
    note = "abricot_abs: sample=100 asks for more items than the task has: all 18 are scored"
    assert [str(w.message) for w in caught].count(note) == 1  # was: once, in the command's words (--sample 100)
    assert "--sample 100 asks for more items" in run.record.tasks["abricot_abs"].warnings[0]


def test_a_failed_run_is_said_as_failed_by_load_run_and_load_runs_alike(tmp_path):
    with pytest.raises(api.AbricotError, match="n_ctx=16"):
        api.evaluate("fake", "abricot_abs", out=tmp_path / "f", **{**ARGS, "n_ctx": 16})
    assert (tmp_path / "f" / "FAILED").is_file()
    with pytest.raises(ResultsError) as one:
        api.load_run(tmp_path / "f")
    with pytest.raises(ResultsError) as below:
        api.load_runs(tmp_path)
    text = str(one.value)
    assert text == str(below.value)  # was: "holds an interrupted run ...; finish it with `run ... resume=True`"
    assert text.startswith(f"{tmp_path / 'f'} is not a finished run (failed, 0 of 18 items; ")
    assert "interrupted" not in text and "(--n-ctx 16)" in text  # the error as the folder keeps it: the record's words
    done = api.evaluate("fake", "abricot_abs", out=tmp_path / "ok", **ARGS)
    runs, caught = said(api.load_runs, tmp_path)
    assert [r.path for r in runs] == [done.path]
    assert [str(w.message) for w in caught] == [f"skipped {tmp_path / 'f'} ({text.partition(' (')[2]}"]


class PathObject:
    """An os.PathLike that is not a pathlib.Path."""

    def __init__(self, path):
        self.path = str(path)

    def __fspath__(self) -> str:
        return self.path


def test_calls_python_would_refuse_with_a_type_error_are_usage_errors_naming_the_keyword(tmp_path):
    run = api.evaluate("fake", "abricot_abs", out=tmp_path / "o", **ARGS)
    cases = [(lambda: api.compare(run, run, margn=0.1), r"compare\(\) has no keyword 'margn'\. Did you mean: margin\?"),
             (lambda: api.load_run(run.path, dta={}), r"load_run\(\) has no keyword 'dta'\. Did you mean: data\?"),
             (lambda: api.load_runs(tmp_path, datadir="x"), r"Did you mean: data_dir\? It takes: folder, data, data_dir$"),
             (lambda: api.plan("fake", "abricot_abs", 5), r"plan\(\) takes 2 positional arguments \(model, tasks\), got 3:"
                                                           r" give the others by keyword \(sample=\.\.\., limit=\.\.\."),
             (lambda: api.load_run(), r"load_run\(\): path is missing"),
             (lambda: api.load_run(run.path, path=run.path), r"load_run\(\): path given twice"),
             (lambda: api.evaluate("fake", "abricot_abs", limt=2, **ARGS), r"unknown option 'limt'\. Did you mean: limit\?")]
    for call, message in cases:
        with pytest.raises(UsageError, match=message):
            call()
    plan = api.plan(PathObject("fake"), "abricot_abs", **{k: v for k, v in ARGS.items() if k != "progress"})
    assert plan.models[0].tasks[0].items == 18  # was: TypeError: 'PathObject' object is not iterable
    assert run.task("nope") is None  # None is its contract (compare and population test for it); samples refuses


def test_a_data_dir_that_is_a_file_is_said_to_be_one(tmp_path):
    file = tmp_path / "data.tsv"
    file.write_text("x\n")
    message = rf"data_dir={file} is a file, not a folder: give the folder holding the tasks' data files"
    for call in (lambda: api.plan("fake", "discotex", backend="fake", data_dir=file),
                 lambda: api.load_runs(tmp_path, data_dir=file)):
        with pytest.raises(DataError, match=message):  # was: "data_dir=...: folder not found"
            call()


def test_load_runs_of_nothing_readable_is_an_error_not_an_empty_list(tmp_path):
    run = api.evaluate("fake", "abricot_abs", out=tmp_path / "o", **ARGS)
    out = run.to_lm_eval(tmp_path / "lm" / "out")
    next(out.glob("samples_*.jsonl")).write_text("{not json\n")
    with warnings.catch_warnings(record=True) as caught:  # nothing to hand back: the error says why, no warning
        warnings.simplefilter("always")
        with pytest.raises(ResultsError, match=r"samples_abricot_abs_.*\.jsonl: its last line \(1\) is cut short"):
            api.load_runs(tmp_path / "lm")
    assert not [w for w in caught if issubclass(w.category, api.AbricotWarning)]
