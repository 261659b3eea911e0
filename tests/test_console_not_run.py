"""A published task the run did not run (console.verdict, console.not_run): where its rows were published (every
source the registry entry names: the paper's and CALAMITA's), and why it was not run, in what happened: its data was
not here (a run given no --tasks skips such a task), or --tasks left it out."""

from __future__ import annotations

from click.testing import CliRunner

from abricot_local import console
from abricot_local.cli import cli
from abricot_local.cli.options import flags
from abricot_local.errors import render
from abricot_local.record import Published
from abricot_local.record.schema import SkippedTask

BOTH = "ABRICOT paper: llama-3.1-8b; CALAMITA leaderboard: Llama-3.1-8B-Instruct"
HOW = "get it: abricot-local data pull abricot; offline: --data abricot=FILE (dataset_it.csv, the ABRICOT release)"


def _published() -> Published:
    return Published(reproduces=BOTH, tasks_not_run=("abricot_abs", "abricot_inc"))


def _line(text: str, task: str) -> str:
    """``task``'s line of ``text``, its options named as the command line prints them (console names them with
    errors.opt)."""
    (line,) = [x for x in render(text, flags).splitlines() if x.startswith(f"  {task}: ")]
    return line


def test_a_task_skipped_for_lack_of_data_says_so_and_names_every_source():
    skipped = (SkippedTask(task="abricot_abs", reason="abricot_abs: no data", how=HOW),)
    text = console.verdict(_published(), skipped=skipped)
    line = _line(text, "abricot_abs")
    assert line == (f"  abricot_abs: published, but not run here: its data was not here, so the run left it out ({HOW}); "
                    "its rows of paper 3-shot, CALAMITA leaderboard are not checked")
    assert "--tasks" not in line
    # a task --tasks left out (not among the skipped) keeps the --tasks advice
    assert _line(text, "abricot_inc") == ("  abricot_inc: published, but not run here: --tasks left it out (add it to "
                                          "--tasks, with its data); its rows of paper 3-shot, CALAMITA leaderboard "
                                          "are not checked")


def test_not_knowing_why_says_both():
    line = _line(console.verdict(_published()), "abricot_abs")
    assert "its data was not here (give it with --data/--data-dir), or --tasks left it out" in line
    assert "CALAMITA leaderboard" in line


def test_a_run_given_no_tasks_without_abricot_data_does_not_only_blame_tasks(tmp_path, discotex_dir, monkeypatch):
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(tmp_path / "cache"))  # no ABRICOT data anywhere
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    models = tmp_path / "models.toml"
    models.write_text(f'[fake-as-llama]\nbackend = "fake"\nreproduces = "{BOTH}"\n', encoding="utf-8")
    r = CliRunner().invoke(cli, ["run", "fake-as-llama", "--models", str(models), "--data-dir", str(discotex_dir),
                                 "--sample", "8", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    line = _line(r.stdout, "abricot_abs")
    assert "its data was not here" in line and "CALAMITA leaderboard" in line, line


def test_the_api_says_why_in_its_own_words(tmp_path, discotex_dir, monkeypatch):
    """evaluate's warning is the same line (console.not_run), its options in Python's words: the skipped task's
    recorded how-to (written in the command line's) gives way to the keywords that give data."""
    import warnings

    from abricot_local import api

    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    models = tmp_path / "models.toml"
    models.write_text(f'[fake-as-llama]\nbackend = "fake"\nreproduces = "{BOTH}"\n', encoding="utf-8")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        api.evaluate("fake-as-llama", models_file=models, data_dir=discotex_dir, sample=8, out=tmp_path / "o",
                     progress=False)
    lines = [str(w.message) for w in said if issubclass(w.category, api.AbricotWarning)]
    line = next(x for x in lines if x.startswith("abricot_abs: published, but not run here"))
    assert "its data was not here, so the run left it out (give it with data/data_dir)" in line, line
    assert "--" not in line and "CALAMITA leaderboard" in line
