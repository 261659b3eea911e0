"""A --resume of a folder holding a finished run needs no data (run.plan: a task whose data is not here takes what the
plan needs of it from the record, tasks.selection.select's ``held``; nothing is downloaded): both doors say what they
say with the data here, and write nothing. What needs the data still refuses: data here but changed (another
SHA-256), and a --resume that grows the run (its data fetched as any run's). Fake backend, the invented ABRICOT rows, offline (conftest)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import abricot_local
from abricot_local.cli import cli
from abricot_local.errors import AbricotError
from conftest import FIXTURE

ARGS = ("--backend", "fake", "--tasks", "abricot_abs", "--n-ctx", "8192")


def invoke(out: Path, *more):
    return CliRunner().invoke(cli, ["run", "fake-as-llama", "--models", str(out.parent / "models.toml"), *ARGS,
                                    *map(str, more), "--out", str(out)])


@pytest.fixture
def finished(tmp_path, monkeypatch):
    """A finished --sample 6 run whose data came from the cache (where `data pull` puts it), the cache's file, and the
    tasks whose data a download was asked for since (offline: refused)."""
    (tmp_path / "models.toml").write_text('[fake-as-llama]\nbackend = "fake"\n'
                                          'reproduces = "ABRICOT paper: llama-3.1-8b"\n', encoding="utf-8")
    data = tmp_path / "cache" / "data" / "abricot" / "abricot_fixture.csv"
    data.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURE, data)
    out = tmp_path / "run"
    r = invoke(out, "--sample", 6)
    assert r.exit_code == 0, r.output

    from abricot_local.tasks import data as found

    asked, real = [], found.pull

    def pull(task, **kw):
        asked.append(task.name)
        return real(task, **kw)

    monkeypatch.setattr(found, "pull", pull)
    return out, data, asked


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_command_line_resumes_a_finished_run_without_its_data_as_with_it(finished, tmp_path):
    out, data, asked = finished
    before = files(out)
    here = invoke(out, "--sample", 6, "--resume")
    assert here.exit_code == 0 and "complete: nothing to score" in here.output, here.output
    data.rename(tmp_path / "away.csv")
    gone = invoke(out, "--sample", 6, "--resume")
    assert gone.exit_code == 0, gone.output
    assert gone.output == here.output and files(out) == before and not asked


def test_the_api_resumes_a_finished_run_without_its_data(finished, tmp_path):
    out, data, asked = finished
    before = files(out)
    said = []
    for _ in ("here", "gone"):
        with pytest.warns(abricot_local.AbricotWarning) as caught:
            run = abricot_local.evaluate("fake-as-llama", "abricot_abs", models_file=str(tmp_path / "models.toml"),
                                         backend="fake", n_ctx=8192, sample=6, out=out, resume=True, progress=False)
        said.append([str(w.message) for w in caught])
        assert Path(run.path) == out and run.record == abricot_local.load_run(out).record and files(out) == before
        if data.exists():
            data.rename(tmp_path / "away.csv")
    assert said[0] == said[1] and not asked


def test_a_data_file_given_and_gone_is_not_needed_either(finished, tmp_path):
    """The run named its file (--data); the --resume names it again where it no longer is."""
    out, data, asked = finished
    given = tmp_path / "mine.csv"
    shutil.copyfile(data, given)
    other = tmp_path / "other"
    assert invoke(other, "--sample", 6, "--data", f"abricot={given}").exit_code == 0
    given.unlink()
    r = invoke(other, "--sample", 6, "--data", f"abricot={given}", "--resume")
    assert r.exit_code == 0 and "complete: nothing to score" in r.output and not asked, r.output


def test_changed_data_is_refused_not_judged_again(finished):
    """Data here whose SHA-256 is not the recorded one: the resume refuses (as it did), --margin too: the verdict is
    not judged again against other data."""
    out, data, asked = finished
    before = files(out)
    data.write_bytes(data.read_bytes() + b"\n")
    for more in ((), ("--margin", 0.2)):
        r = invoke(out, "--sample", 6, "--resume", *more)
        assert r.exit_code != 0 and "its data differs from the recorded run" in r.output, r.output
    assert files(out) == before


def test_a_new_margin_is_judged_from_the_record_without_the_data(finished, tmp_path):
    """--margin on a finished run: its verdict judged again from its samples, the same with the data gone."""
    out, data, asked = finished
    twin = tmp_path / "twin"
    shutil.copytree(out, twin)
    here = invoke(twin, "--sample", 6, "--resume", "--margin", 0.2)
    assert here.exit_code == 0 and "judged again at --margin 0.2" in here.output, here.output
    data.rename(tmp_path / "away.csv")
    gone = invoke(out, "--sample", 6, "--resume", "--margin", 0.2)
    assert gone.exit_code == 0 and files(out) == files(twin) and not asked, gone.output


def test_a_grow_fetches_its_data_as_any_run(finished, tmp_path):
    """A --resume that scores new items needs their data: it is fetched as any run's (offline here: refused with
    the run's own words), and the folder is left as it was."""
    out, data, asked = finished
    before = files(out)
    data.rename(tmp_path / "away.csv")
    r = invoke(out, "--sample", 8, "--resume")
    assert r.exit_code != 0 and files(out) == before
    assert "could not be downloaded: offline" in r.output and asked == ["abricot_abs"], r.output
    asked.clear()
    with pytest.raises(AbricotError, match="could not be downloaded: offline"):
        abricot_local.evaluate("fake-as-llama", "abricot_abs", models_file=str(tmp_path / "models.toml"), backend="fake",
                               n_ctx=8192, sample=8, out=out, resume=True, progress=False)
    assert files(out) == before and asked == ["abricot_abs"]


def test_an_until_settled_run_resumes_without_its_data(finished, tmp_path):
    """Its rule is not made again (it reads the task's few-shot draw from the data): run/settle.stages_of."""
    _, data, asked = finished
    out = tmp_path / "settled"
    rule = ("--until-settled", "--looks", "5,10", "--max-items", 10)
    assert invoke(out, *rule).exit_code == 0
    before = files(out)
    here = invoke(out, *rule, "--resume")
    data.rename(tmp_path / "away.csv")
    gone = invoke(out, *rule, "--resume")
    assert here.exit_code == gone.exit_code == 0 and "complete: nothing to score" in gone.output, gone.output
    assert gone.output == here.output and files(out) == before and not asked
    grow = invoke(out, "--until-settled", "--looks", "5,10,15", "--max-items", 15, "--resume")
    assert grow.exit_code != 0 and "could not be downloaded: offline" in grow.output and files(out) == before


@pytest.mark.filterwarnings("ignore::abricot_local.AbricotWarning")  # (its skipped task, its verdict's few items)
def test_no_tasks_given_takes_the_finished_runs_tasks_whose_data_is_gone(finished, tmp_path):
    """The API's default (tasks=None: every task whose data is here): a task the finished run holds whose data is not
    here is one of them for its --resume."""
    _, data, asked = finished
    kw = dict(backend="fake", n_ctx=8192, sample=6, out=tmp_path / "all", progress=False)
    made = abricot_local.evaluate("fake", **kw)
    assert sorted(made.record.tasks) == ["abricot_abs", "abricot_inc"]
    before = files(tmp_path / "all")
    asked.clear()  # (discotex's, by the run made with no --tasks: its data is not here)
    data.rename(tmp_path / "away.csv")
    again = abricot_local.evaluate("fake", resume=True, **kw)
    assert again.record == made.record and files(tmp_path / "all") == before and not asked
