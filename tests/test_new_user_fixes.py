"""A new user's findings: `labels` takes its task as documented (--task; --tasks refused, naming --task) and only
the backend options a vocabulary-only load uses; `data pull --tests` offline names every file it needs and where
the tests look; `runs r20 .` lists r20 once."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.tasks import test_data


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def both_tasks(tmp_path, discotex_dir, abricot_file):
    """A --data-dir holding both tasks' data (DIR/discotex/, DIR/abricot/): the default task is not discotex."""
    d = tmp_path / "data"
    (d / "abricot").mkdir(parents=True)
    (d / "discotex").symlink_to(discotex_dir)
    (d / "abricot" / abricot_file.name).symlink_to(abricot_file)
    return d


def test_labels_refuses_tasks_and_names_task(both_tasks):
    for flag in ("--tasks", "-t"):
        r = invoke("labels", "fake", "--backend", "fake", "--data-dir", both_tasks, flag, "discotex")
        assert r.exit_code != 0 and "--task discotex" in r.output, r.output
    r = invoke("labels", "fake", "--backend", "fake", "--data-dir", both_tasks, "--task", "discotex")
    assert r.exit_code == 0, r.output
    assert "task: discotex" in r.output


@pytest.mark.parametrize("flag", [("--threads", 2), ("--rpc", "127.0.0.1:50052"), ("--n-gpu-layers", 1),
                                  ("--engine", "batched"), ("--n-batch", 64), ("--parallel", 2), ("--flash-attn", "on")])
def test_labels_offers_no_option_a_vocabulary_load_ignores(flag, discotex_dir):
    r = invoke("labels", "fake", "--backend", "fake", "--data-dir", discotex_dir, *flag)
    assert r.exit_code != 0 and "No such option" in r.output and flag[0] in r.output, r.output
    assert flag[0] not in invoke("labels", "--help").output


def test_labels_n_ctx_still_counts(discotex_dir):
    r = invoke("labels", "fake", "--backend", "fake", "--data-dir", discotex_dir, "--n-ctx", 64)
    assert r.exit_code != 0 and "--n-ctx 64" in r.output, r.output


def test_data_pull_tests_offline_names_every_file_and_where_tests_look():
    r = invoke("data", "pull", "--tests")  # isolated_home: offline, an empty cache
    assert r.exit_code != 0 and "Traceback" not in r.output
    out = r.output
    for url, name, _ in test_data.discotex_files():
        assert name in out and url.rsplit("/", 1)[0] in out
    from abricot_local.tasks import abricot_data

    assert abricot_data.RELEASE_FILE in out and abricot_data.RELEASE_URL.rsplit("/", 1)[0] in out
    assert test_data.SDIST_URL.rsplit("/", 1)[1] in out and test_data.SDIST_MODELS in out
    for name, _ in test_data.VOCAB_FILES:
        assert name in out
    for place in ("data/discotex", "data/abricot", "test-data/vocab", "$ABRICOT_TEST_DATA", "a shared/ folder"):
        assert place in out, place


def test_runs_lists_a_run_folder_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r20").mkdir()
    (tmp_path / "r20" / ".lock").write_text("")
    r = invoke("runs", "r20", ".")
    assert r.exit_code == 0, r.output
    lines = [line for line in r.output.splitlines() if line.split() and line.split()[0].endswith("r20")]
    assert len(lines) == 1 and lines[0].startswith("r20 "), r.output
    r = invoke("runs", tmp_path / "r20", "r20")
    assert len([line for line in r.output.splitlines() if "r20" in line]) == 1, r.output
