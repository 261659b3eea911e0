"""Two small mends from a review:

1. A data file given by a task's name (``--data abricot_abs=PATH``, ``data={"abricot_abs": PATH}``) that is missing
   or not a file was named in the error by the task's data key (``--data abricot=PATH``), an option the user had
   not typed (and, the narrower pair winning, one that would not have replaced theirs); a missing file was not
   named as given at all. The error names the pair as given, in each door's words (tasks/data.py).
2. The HTML report's forest figure drew its chance label with a ``fill`` attribute, which the page's
   ``svg text`` rule overrides: the label was black beside its red line. It is red (a class of its own in
   report.css; report/forest.py).

Fake backend, the invented ABRICOT fixture; nothing is scored."""

from __future__ import annotations

import html

import pytest
from click.testing import CliRunner

import abricot_local as al
from abricot_local.cli import cli
from abricot_local.errors import MissingDataError
from abricot_local.report import forest
from abricot_local.report.html import asset
from conftest import FIXTURE


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def run_abs(data: str, tmp_path):
    return invoke("run", "fakeA", "--backend", "fake", "--tasks", "abricot_abs", "--data", data, "--n-ctx", 8192,
                  "--out", tmp_path / "o")


# -- 1. the data option named as the user gave it ----------------------------------------------------
@pytest.mark.parametrize("kind", ["missing", "a folder"])
def test_a_bad_data_path_given_by_task_name_is_named_by_that_name_in_either_door(tmp_path, kind):
    path = tmp_path / "nonexistent.csv" if kind == "missing" else tmp_path
    r = run_abs(f"abricot_abs={path}", tmp_path)
    assert r.exit_code == 2 and f"(given with --data abricot_abs={path})" in r.output, r.output
    assert f"--data abricot={path}" not in r.output, r.output
    with pytest.raises(MissingDataError) as err:
        al.evaluate("fakeA", "abricot_abs", backend="fake", n_ctx=8192, data={"abricot_abs": str(path)},
                    out=str(tmp_path / "api"))
    said = str(err.value)
    assert f'(given with data={{"abricot_abs": "{path}"}})' in said and f'"abricot": "{path}"' not in said, said


def test_a_bad_data_path_given_by_data_key_is_still_named_by_the_key(tmp_path):
    path = tmp_path / "nonexistent.csv"
    r = run_abs(f"abricot={path}", tmp_path)
    assert r.exit_code == 2 and f"data file not found: {path} (given with --data abricot={path})" in r.output, \
        r.output


def test_a_folder_of_several_files_given_by_task_name_asks_for_one_by_that_name(tmp_path):
    for name in ("abricot_a.csv", "abricot_b.csv"):
        (tmp_path / name).write_bytes(FIXTURE.read_bytes())
    r = run_abs(f"abricot_abs={tmp_path}", tmp_path)
    assert r.exit_code != 0 and "pick one with --data abricot_abs=FILE" in r.output, r.output


# -- 2. the chance label drawn red ----------------------------------------------------------------------
@pytest.mark.real  # a browser
def test_the_chance_label_is_drawn_in_the_chance_line_s_red(browser):
    fig = forest.figure({"key": "t.m", "task": "t", "metric": "m", "chance": 0.2},
                        [{"label": "run", "kind": "run", "cells": {"t.m": [0.5, 0.3, 0.7]}}])
    (label,) = [s for s in fig["shapes"] if s[0] == "text" and s[2].startswith("chance ")]
    attrs = " ".join(f'{k}="{html.escape(str(v))}"' for k, v in label[1].items())
    page = browser.new_page()
    page.set_content(f"<style>{asset('report.css')}</style><svg width='300' height='60'>"
                     f"<text id='chance' {attrs}>{label[2]}</text><text id='other' x='4' y='40'>t</text></svg>")
    fill = page.eval_on_selector("#chance", "e => getComputedStyle(e).fill")
    other = page.eval_on_selector("#other", "e => getComputedStyle(e).fill")
    page.close()
    assert fill == "rgb(207, 34, 46)" and other == "rgb(31, 35, 40)", (fill, other)  # #cf222e; the others --fg
