"""The shipped lm-eval tasks' data named in both of lm-eval's doors.

A task's message cannot know whether lm-eval's command line or ``lm_eval.simple_evaluate`` loaded it, so it
names the data both ways, as the shots are named (``--num_fewshot 2 (simple_evaluate's num_fewshot=2)``): the
command line's ``--metadata '{"data_dir": DIR}'``, then the ``TaskManager(metadata=...)`` that a
simple_evaluate user gives the shipped tasks (simple_evaluate's own ``metadata=`` reaches only a TaskManager
it makes itself: docs/lm-eval.md). Was the command line's ``--metadata`` alone. An lm-eval output without
samples files names lm-eval's ``log_samples`` both ways too (was ``--log_samples`` alone).
"""

from __future__ import annotations

import json
import logging

import pytest
from invented_data import write_discotex

from abricot_local.errors import AbricotError, opt, render

DATA_DIR = """--metadata '{"data_dir": DIR}' (simple_evaluate's TaskManager(metadata={"data_dir": DIR}))"""
DISCOTEX = ("""--metadata '{"data": {"discotex": DIR}}' (simple_evaluate's """
            """TaskManager(metadata={"data": {"discotex": DIR}}))""")


@pytest.fixture
def loaders():
    from abricot_local.lm_eval.tasks import loaders

    loaders._discotex.cache_clear()
    yield loaders
    loaders._discotex.cache_clear()


def test_the_door_names_the_tasks_data_in_both_of_lm_eval_s_doors():
    from abricot_local.lm_eval.requests import door_words

    assert render(f"give {opt('data_dir', 'DIR')}", door_words) == f"give {DATA_DIR}"
    assert render(opt("data", ("discotex", "DIR")), door_words) == DISCOTEX
    bare = """--metadata data (simple_evaluate's TaskManager(metadata={"data": ...}))"""
    assert render(opt("data"), door_words) == bare


def test_missing_data_says_how_to_give_it_in_both_doors(loaders, tmp_path, monkeypatch):
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(tmp_path / "empty"))  # no DISCOTEX here
    with pytest.raises(AbricotError) as err:
        loaders.discotex()
    (offline,) = [line for line in str(err.value).splitlines() if "offline:" in line]
    assert offline.strip().startswith(f"offline: {DATA_DIR}")


def test_no_few_shot_pool_says_how_to_give_it_in_both_doors(loaders, tmp_path, caplog, monkeypatch):
    folder = write_discotex(tmp_path / "discotex", 4)  # the test files only: no train split
    monkeypatch.setattr(loaders, "_dataset", lambda splits: splits)  # the splits, not `datasets`' (slow to import)
    with caplog.at_level(logging.WARNING, logger="abricot_local.lm_eval"):
        assert len(loaders.discotex(data_dir=str(tmp_path))["train"]) == 0
    (said,) = [r.getMessage() for r in caplog.records if "no few-shot pool" in r.getMessage()]
    assert DISCOTEX in said and str(folder) in said


def test_one_path_for_every_task_refused_in_both_doors(loaders, tmp_path):
    one = tmp_path / "dataset_it.csv"
    one.write_text("not discotex\n", encoding="utf-8")
    with pytest.raises(AbricotError) as err:
        loaders.discotex(data=str(one))
    said = str(err.value)
    assert said.endswith("""give each task its own: --metadata '{"data": {"abricot": FILE, "discotex": DIR}}' """
                         """(simple_evaluate's TaskManager(metadata={"data": {"abricot": FILE, "discotex": DIR}}))""")
    assert str(one) in said and "simple_evaluate's TaskManager(metadata={\"data\": PATH})" in said


def test_an_output_without_samples_names_log_samples_in_both_doors(tmp_path):
    from abricot_local.analysis.lm_eval_input import read
    from abricot_local.errors import ResultsError

    (tmp_path / "results_2026-01-01T00-00-00.json").write_text(json.dumps({"results": {"discotex_card": {}}}))
    with pytest.raises(ResultsError) as err:
        read(tmp_path)
    assert str(err.value).endswith("run lm-eval with --log_samples (simple_evaluate's log_samples=True) to compare "
                                   "its items")
