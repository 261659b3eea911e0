"""A run's recorded settings do not depend on the folder it was started from: DISCOTEX's `config.items` names its
data folder absolute (os.path.abspath, a link kept as given, as `data[].path` is), whichever folder a relative
`--data-dir`/`--data` was given from, and a --resume from another folder still takes the run; compare judges the
data by its SHA-256, never by that text (record/settings.py TASK_PROVENANCE), so a run recorded before, with the
folder as given, is the same setting as a new run of the same data. Fake backend, invented data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.analysis.differing import differing_settings
from abricot_local.analysis.loading import load_run
from abricot_local.cli import cli
from abricot_local.tasks import make_task
from abricot_local.tasks.base import TaskOptions
from invented_data import write_discotex


def run(*args):
    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", "discotex", *map(str, args)])
    assert r.exit_code == 0, r.output
    return r


def entry(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())["tasks"]["discotex"]


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """A work folder holding data/discotex (8 items), a link to it, and a sub-folder to start runs from."""
    work = tmp_path / "work"
    write_discotex(work / "data" / "discotex", 4)
    (work / "link").symlink_to(work / "data" / "discotex", target_is_directory=True)
    (work / "sub").mkdir()
    monkeypatch.chdir(work)
    return work


def test_items_name_the_folder_absolute_from_any_cwd_and_resume_takes_the_run(here, monkeypatch):
    run("--data-dir", "link", "--sample", "4", "--out", "A")
    monkeypatch.chdir(here / "sub")
    run("--data-dir", "../link", "--sample", "4", "--out", "../B")
    a, b = entry(here / "A"), entry(here / "B")
    folder = os.path.abspath(here / "link")  # the link as given, not resolved
    assert folder != os.path.realpath(folder)
    assert a["config"]["items"].endswith(f" in {folder}"), a["config"]["items"]
    assert a["config"] == b["config"] and a["data"] == b["data"]
    assert {os.path.dirname(f["path"]) for f in a["data"]} == {folder}  # the same form as data[].path
    run("--data-dir", "../link", "--sample", "6", "--out", "../A", "--resume")  # a grow, from another folder
    grown = entry(here / "A")
    assert grown["n"] == 6 and grown["config"]["items"] == a["config"]["items"]


def test_published_rows_name_their_folder_absolute(here):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    (here / "rows").mkdir()
    choices = [[f"Frase inventata {k}.{j}." for j in range(4)] + ["nessuna delle precedenti"] for k in range(3)]
    pq.write_table(pa.table({"text": [f"Paragrafo INVENTATO {k}." for k in range(3)], "choices": choices,
                             "label": pa.array([0, 4, 2], pa.int64())}), here / "rows" / "test-00000-of-00001.parquet")
    for given in (TaskOptions(data=(("discotex", "rows"),)), TaskOptions(data_dir="rows")):
        items = make_task("discotex", given).config()["items"]
        assert items == f"published rows: the folder {here / 'rows'}", items


def test_a_run_recorded_with_the_folder_as_given_is_the_same_setting(here, monkeypatch):
    monkeypatch.chdir(here / "sub")
    run("--data-dir", "../data/discotex", "--limit", "3", "--out", "../new")
    old = here / "old"  # as a run of an earlier version started in `here` recorded it: the folder as given
    old.mkdir()
    doc = json.loads((here / "new" / "results.json").read_text())
    items = doc["tasks"]["discotex"]["config"]["items"]
    doc["tasks"]["discotex"]["config"]["items"] = f"{items.rsplit(' in ', 1)[0]} in data/discotex"
    assert doc["tasks"]["discotex"]["config"]["items"] != items
    (old / "results.json").write_text(json.dumps(doc))
    (old / "samples-discotex.jsonl").write_bytes((here / "new" / "samples-discotex.jsonl").read_bytes())
    a, b = load_run(old), load_run(here / "new")
    assert differing_settings(a, b) == ()
    assert "discotex.config.items" not in b.settings and "discotex.config.seed" in b.settings
    doc["tasks"]["discotex"]["data"][0]["sha256"] = "0" * 64  # other data: a setting that differs, still said
    (old / "results.json").write_text(json.dumps(doc))
    assert [d.key for d in differing_settings(load_run(old), b)] == ["discotex.data_sha256"]
