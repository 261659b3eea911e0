"""Three findings on the words of an error at each door:

1. `abricot-local lm-eval`'s context-overflow error named an internal digest (``item ctx-280fe1f3d6``) where `run`
   names the item (``task_1_ted_test_1``): it names the document as lm-eval knows it (the task and its doc_id) and,
   where the document is one of the shipped tasks' (lm_eval/tasks/loaders.py), the item of abricot-local's it is
   (lm_eval/requests.py doc_label; lm_eval/model.py labels).
2. A path was echoed bare inside the JSON or Python a message shows (``--metadata '{"data_dir": /nonexist}'``,
   ``TaskManager(metadata={"data_dir": /nonexist})``, the API's ``data={"abricot": /nonexistent.csv}``), which cannot
   be pasted: it is written as its literal (errors.literal: json.dumps), the ``--metadata`` JSON quoted for the
   shell; a placeholder (``FILE``, ``DIR``, ``...``) stays as it is.
3. The command line's type errors were click's three-line usage block (``Error: Invalid value for '--shots': 'two'
   is not a valid integer.``): one line ``error: --shots: expected an integer, got 'two'``, in the words of
   lm-eval's door for a bad type, exit status 2 (cli/app.py usage_error); another bad value, a missing argument,
   an unknown option: one line too.

Fake backend; the DISCOTEX release (conftest's discotex_dir), the invented ABRICOT fixture; real lm-eval for 1 and 2.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex

os.environ["HF_DATASETS_OFFLINE"] = "1"  # lm-eval reads its data through `datasets` (its cache: conftest.py)
os.environ["HF_HUB_OFFLINE"] = "1"

import pytest  # noqa: E402
from click.testing import CliRunner  # noqa: E402

import abricot_local as al  # noqa: E402
from abricot_local.cli import cli  # noqa: E402
from abricot_local.errors import MissingDataError, keywords, opt, render  # noqa: E402
from conftest import ours_only, require_lm_eval  # noqa: E402


def invoke(*args, code: int = 2):
    r = CliRunner().invoke(cli, [str(a) for a in args], prog_name="abricot-local")
    assert r.exit_code == code and "Traceback" not in r.output, r.output + repr(r.exception)
    return r.output


def lm_eval_says(monkeypatch, *args) -> str:
    require_lm_eval()
    ours_only(monkeypatch)
    out = invoke("lm-eval", "fake", *args)
    return out[out.index("error: "):]


# -- 1. the lm-eval door names the document, and abricot-local's item where it is one ----------------------------
def test_lm_eval_names_the_overflowing_document_by_task_doc_id_and_item(monkeypatch, discotex_dir):
    from abricot_local.tasks import make_task
    from abricot_local.tasks.base import TaskOptions

    said = lm_eval_says(monkeypatch, "--tasks", "discotex_card", "--num_fewshot", 2, "--limit", 12,
                        "--model_args", "backend=fake", "--metadata", json.dumps({"data_dir": str(discotex_dir)}))
    got = re.match(r"error: item (\S+) \(discotex_card doc_id (\d+)\): the prompt is \d+ tokens but the context "
                   r"window holds 2048 \(model_args n_ctx=2048\)", said)
    assert got and "ctx-" not in said, said
    rows, _ = make_task("discotex", TaskOptions(data_dir=str(discotex_dir), allow_download=False)).rows_and_pool()
    assert got[1] == rows[int(got[2])].id  # the item `run` names: the doc_id-th of the test split


def test_lm_eval_names_a_document_of_no_shipped_task_by_task_and_doc_id():
    require_lm_eval()
    from lm_eval.api.instance import Instance

    from abricot_local.errors import ContextOverflowError
    from abricot_local.lm_eval.model import AbricotLM

    lm = AbricotLM(model="fake", backend="fake", n_ctx=64)
    try:
        long = Instance("loglikelihood", {"q": "x"}, ("parola " * 200, " sì"), 0, ("my_task", 7, 1))
        short = Instance("loglikelihood", {"q": "y"}, ("breve", " sì"), 0, ("my_task", 8, 1))
        with pytest.raises(ContextOverflowError) as err:
            lm.loglikelihood([short, long])
        assert str(err.value).startswith("item my_task doc_id 7: the prompt is ") and "ctx-" not in str(err.value)
        bare = Instance("loglikelihood", {}, ("parola " * 200, " sì"), 0)  # no task, no doc_id: the digest
        with pytest.raises(ContextOverflowError, match=r"^item ctx-[0-9a-f]{10}: "):
            lm.loglikelihood([bare])
    finally:
        lm.close()


# -- 2. a path inside the JSON or Python a message shows is its literal ---------------------------------------------
def test_lm_eval_metadata_echo_is_json_that_pastes(monkeypatch, tmp_path):
    where = str(tmp_path / "no'pe \"dir\"")
    said = lm_eval_says(monkeypatch, "--tasks", "discotex_card", "--limit", 1, "--model_args", "backend=fake",
                        "--metadata", json.dumps({"data_dir": where})).splitlines()[0]
    shell = re.match(r"error: --metadata (.+) \(simple_evaluate's TaskManager\(metadata=(.+)\)\): folder not found$",
                     said)
    assert shell, said
    assert shlex.split(shell[1]) == [json.dumps({"data_dir": where}, ensure_ascii=False)]  # the shell gives it back
    assert ast.literal_eval(shell[2]) == json.loads(shell[2]) == {"data_dir": where}  # Python's and JSON's
    assert """offline: --metadata '{"data_dir": DIR}'""" in lm_eval_says(  # a placeholder stays as it is
        monkeypatch, "--tasks", "discotex_card", "--limit", 1, "--model_args", "backend=fake")


def test_api_data_echo_is_python_that_pastes_and_the_command_line_keeps_its_words(tmp_path):
    path = str(tmp_path / 'no pe"s.csv')
    with pytest.raises(MissingDataError) as err:
        al.plan("fake", "abricot_abs", backend="fake", data={"abricot": path})
    said = str(err.value)
    given = re.search(r"\(given with data=(\{.*\})\)", said)
    assert given and ast.literal_eval(given[1]) == {"abricot": path}, said
    assert 'offline: data={"abricot": FILE}' in said  # the placeholder as it was
    said = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={path}",
                  "--out", tmp_path / "o")
    assert f"(given with --data abricot={path})" in said, said  # the command line's own words, unchanged
    from abricot_local.errors import literal

    assert render(opt("data", ("abricot", "FILE")), keywords) == 'data={"abricot": FILE}'
    assert [literal(v) for v in ("DIR", "HOST:PORT", "K/N", "...", "/x", "città")] == \
        ["DIR", "HOST:PORT", "K/N", "...", '"/x"', '"città"']


# -- 3. the command line's bad values in one line --------------------------------------------------------------------
@pytest.mark.parametrize("flag, value, kind", [("--shots", "two", "an integer"), ("--sample", "abc", "an integer"),
                                               ("--n-ctx", "big", "an integer")])
def test_a_value_click_cannot_read_is_one_line_in_the_doors_words(flag, value, kind):
    assert invoke("run", "fake", "--backend", "fake", flag, value) == f"error: {flag}: expected {kind}, got {value!r}\n"


def test_other_bad_values_and_usage_errors_are_one_line_too():
    assert invoke("compare", "a", "b", "--alpha", "x") == "error: --alpha: expected a number, got 'x'\n"
    assert invoke("check", "nowhere", "--atol", "-1") == "error: --atol: -1.0 is not in the range x>=0\n"
    assert invoke("report", "--format", "xx").startswith("error: --format: 'xx' is not one of 'table', ")
    assert invoke("run") == ("error: Missing argument 'MODEL [MODEL ...]'; usage: abricot-local run [OPTIONS] "
                             "MODEL [MODEL ...]\n")  # the usage kept
    assert invoke("report", "--html") == "error: No such option '--html'. Did you mean '--format html'?\n"
    assert invoke("--bogus").startswith("error: No such option '--bogus'; usage: abricot-local [OPTIONS] COMMAND")
    assert "Usage: abricot-local data [OPTIONS] COMMAND" in invoke("data")  # no arguments: its help, as before
    assert invoke("run", "--help", code=0).startswith("Usage: abricot-local run [OPTIONS] MODEL [MODEL ...]")


def test_a_users_value_that_looks_like_a_number_or_a_literal_is_still_quoted():
    """The senior read's: a data folder named 2024 was shown bare, JSON for an integer, not a path;
    a placeholder and a typed number stay as they are."""
    from abricot_local.errors import literal

    assert [literal(v) for v in ("2024", "'q'", "True")] == ['"2024"', '"\'q\'"', '"True"']
    assert literal('{"a": FILE}') == '{"a": FILE}'  # a dict written already
    assert [literal(v) for v in ("FILE", "HOST:PORT", "...", 3, 0.5, True, None)] == \
        ["FILE", "HOST:PORT", "...", "3", "0.5", "True", "None"]
