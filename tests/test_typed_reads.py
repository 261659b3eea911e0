"""compare's readers take a run's facts from its typed record (analysis/changes.py, analysis/population.py): the
model's SHA-256 (``record.model.sha256``), its quant (``Run.quant``), each task's data SHA-256 (``entry.data``) and
what selected its items (``record.config``, record.settings.SUBSET), never from the flat dotted settings, whose key
naming is record.settings.settings' own business: with those settings empty every answer stays the same."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from abricot_local.analysis import runs as runs_module
from abricot_local.analysis.changes import compared
from abricot_local.analysis.loading import load_run
from abricot_local.analysis.population import GivenData, counted, drawn, whole
from abricot_local.cli import cli
from abricot_local.record import Model, Record, RunConfig
from abricot_local.record.settings import ITEM_SELECTION, SUBSET, subset

TASK = "abricot_inc"


@pytest.fixture()
def no_flat_settings(monkeypatch):
    """Every Run's flat settings empty: a reader that still looks a fact up there finds nothing."""
    monkeypatch.setattr(runs_module.Run, "settings", property(lambda self: {}))


def bare(label: str, quant: str, sha: str | None) -> runs_module.Run:
    return runs_module.Run(f"/runs/{label}", Record(schema_version=1, model=Model(name=label, sha256=sha), tasks={}),
                           quant=quant, base="gemma")


def test_a_pair_s_kind_reads_the_model_s_sha256_and_quant(no_flat_settings):
    assert compared(bare("a", "Q8_0", "s1"), bare("b", "Q4_0", "s2")) == "quants"
    assert compared(bare("a", "Q8_0", "s1"), bare("b", "Q8_0", "s1")) == "one model"
    assert compared(bare("a", "Q8_0", "s1"), bare("b", "Q8_0", "s2")) == "two models"


def test_data_of_another_sha256_counts_nothing_whatever_the_flat_settings(tmp_path, monkeypatch, abricot_file,
                                                                          no_flat_settings):
    """The SHA-256 guard reads the task entry's recorded data files: a copy one row short counts no N."""
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    data = tmp_path / "d" / abricot_file.name
    data.parent.mkdir()
    shutil.copy2(abricot_file, data)
    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--n-ctx", "8192", "--tasks", TASK, "--data",
                                 f"abricot={data}", "--sample", "4", "--out", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    short = tmp_path / "short.csv"
    short.write_text("".join(data.read_text(encoding="utf-8").splitlines(keepends=True)[:-1]), encoding="utf-8")
    (tmp_path / "d").rename(tmp_path / "moved")
    run = load_run(tmp_path / "run")
    moved = GivenData(data=(("abricot", str(tmp_path / "moved" / data.name)),))
    assert counted(run, TASK, moved) == run.record.tasks[TASK].available
    assert counted(run, TASK, GivenData(data=(("abricot", str(short)),))) is None
    assert whole(run, TASK) is False and drawn(run)  # --sample: a draw of the task, not all of it


def test_one_list_of_the_options_that_select_items():
    assert ITEM_SELECTION == ("tasks", *SUBSET) and SUBSET == ("limit", "sample", "shard")
    assert subset(RunConfig(limit=5, shard="1/2")) == ("limit", "shard") and subset(None) == subset(RunConfig()) == ()
