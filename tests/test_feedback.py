"""What a user sees while and after a run (issue 10, items 2 and 4): --limit's caution, data
warnings on the terminal and in results.json, a start line, and plain progress lines off a
terminal (CliRunner's output is not a tty), for `run` and `check` alike."""

from __future__ import annotations

import json
import re
import sys

from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.console import ProgressLine
from invented_data import write_discotex

SAME_GOLD = "every scored item has the same gold answer ('E. nessuna delle precedenti')"


def run_fake(data, out, *extra, env=None):
    return CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir",
                                    str(data), "--out", str(out), *map(str, extra)], env=env)


def test_limit_prints_a_caution_and_one_class_is_warned(tmp_path):
    data = write_discotex(tmp_path / "d", 6, classes=(0,))  # every gold is E, as in the release's first rows
    r = run_fake(data, tmp_path / "o", "--limit", 4)
    assert r.exit_code == 0, r.output
    assert "caution: --limit 4 scores the first 4 items of each task in release order" in r.stderr
    warnings = json.loads((tmp_path / "o" / "results.json").read_text())["tasks"]["discotex"]["warnings"]
    assert any(w.startswith(SAME_GOLD) for w in warnings)
    assert "no item from source(s) wiki was scored" in warnings
    for w in warnings:  # the summary prints every one
        assert f"warning: {w}" in r.stdout


def data_warnings(lines: list[str]) -> list[str]:
    """The warning lines, but the note that invented release-shaped files are not the release."""
    return [ln for ln in lines if "warning:" in ln and "differs from the DisCoTEX release" not in ln]


def test_a_balanced_sample_has_no_data_warning(tmp_path):
    data = write_discotex(tmp_path / "d", 8)
    r = run_fake(data, tmp_path / "o", "--sample", 12)
    assert r.exit_code == 0, r.output
    assert "caution" not in r.output and not data_warnings(r.stdout.splitlines())
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    recorded = doc["tasks"]["discotex"]["warnings"]
    assert not data_warnings([f"warning: {w}" for w in recorded]) and len(recorded) == 2  # invented: not the release
    assert {s["source"] for s in map(json.loads, (tmp_path / "o" / "samples-discotex.jsonl").open())} == {"ted", "wiki"}


def test_start_line_and_plain_progress_off_a_terminal(tmp_path):
    data = write_discotex(tmp_path / "d", 4)
    r = run_fake(data, tmp_path / "o", "--n-ctx", 1024, env={"ABRICOT_PROGRESS_SECONDS": "0"})
    assert r.exit_code == 0, r.output
    err = r.stderr.splitlines()
    start = [ln for ln in err if ln.startswith("run: ")]
    assert len(start) == 1
    assert "tasks: discotex (8 items)" in start[0] and "backend fake" in start[0] and "engine prefix" in start[0]
    progress = [ln for ln in err if ln.startswith("discotex: ")]
    assert progress[0] == "discotex: 0/8 items"
    assert progress[-1].startswith("discotex: 8/8 items, ")
    assert len(progress) == 9  # interval 0: a line per item
    assert all(re.fullmatch(r"discotex: \d/8 items, \d+\.\d\d items/s(, ETA \d+ s)?", ln) for ln in progress[1:])
    assert err.index(start[0]) < err.index(progress[0])  # the start line comes first


def test_default_interval_prints_start_and_end_only(tmp_path):
    data = write_discotex(tmp_path / "d", 4)
    r = run_fake(data, tmp_path / "o")
    progress = [ln for ln in r.stderr.splitlines() if ln.startswith("discotex: ")]
    assert progress[0] == "discotex: 0/8 items" and progress[-1].startswith("discotex: 8/8 items") and len(progress) == 2


def test_check_shows_progress_like_run(tmp_path):
    data = write_discotex(tmp_path / "d", 4)
    assert run_fake(data, tmp_path / "o").exit_code == 0
    r = CliRunner().invoke(cli, ["check", str(tmp_path / "o")], env={"ABRICOT_PROGRESS_SECONDS": "0"})
    assert r.exit_code == 0, r.output
    progress = [ln for ln in r.stderr.splitlines() if ln.startswith("discotex: ")]
    assert progress[0] == "discotex: 0/8 items" and progress[-1].startswith("discotex: 8/8 items") and len(progress) == 9
    assert "reproduced" in r.stdout


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_progress_line_paces_itself_on_a_clock():
    clock = Clock()
    p = ProgressLine(30, clock=clock)
    assert p.update("t", 0, 100) == "t: 0/100 items"
    clock.t += 10
    assert p.update("t", 5, 100) is None  # within the interval
    clock.t += 20
    assert p.update("t", 10, 100) == "t: 10/100 items, 0.33 items/s, ETA 4 min 30 s"
    clock.t += 29
    assert p.update("t", 20, 100) is None
    clock.t += 1
    assert p.update("t", 30, 100) == "t: 30/100 items, 0.50 items/s, ETA 2 min 20 s"
    clock.t += 1
    assert p.update("t", 100, 100) == f"t: 100/100 items, {100 / 61:.2f} items/s"  # the end always prints
    # a resumed task counts its rate from where it resumed
    assert p.update("u", 40, 50) == "u: 40/50 items (resumed)"
    clock.t += 30
    assert p.update("u", 43, 50) == "u: 43/50 items, 0.10 items/s, ETA 70 s"
    clock.t += 7170  # slow: seconds per item, hours left
    assert p.update("u", 44, 50) == "u: 44/50 items, 1800 s/item, ETA 3 h 00 min"


def readme_quickstart() -> list[str]:
    """The first command of the README's Run section."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    block = text.split("\n## Run\n", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return block.strip().splitlines()[0].split()


def test_readme_quickstart_draws_a_sample_that_sees_every_class(tmp_path):
    """The release lists each source's CLASS 0 rows first: --limit 40 sees gold E only, the
    README's --sample 40 sees both classes and both sources (here on release-shaped data)."""
    cmd = readme_quickstart()
    assert cmd[:2] == ["abricot-local", "run"] and "--sample" in cmd and "--limit" not in cmd
    data = write_discotex(tmp_path / "d", 100, classes=(0,) * 50 + (1,) * 50)
    args = [a for a in cmd[3:]] + ["--backend", "fake", "--data-dir", str(data), "--out", str(tmp_path / "s")]
    r = CliRunner().invoke(cli, ["run", "fake", *args])
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in (tmp_path / "s" / "samples-discotex.jsonl").read_text().splitlines()]
    assert {x["class"] for x in rows} == {0, 1} and {x["source"] for x in rows} == {"ted", "wiki"}
    assert not data_warnings(r.stdout.splitlines())
    limited = run_fake(data, tmp_path / "l", "--limit", 40)
    assert SAME_GOLD in limited.stdout


def test_a_terminal_gets_one_tqdm_bar_per_task(monkeypatch):
    import io

    from abricot_local.cli.progress import progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    import tqdm as tq

    class Loud(tq.tqdm):  # tqdm read the suite's TQDM_DISABLE (conftest) when it was first imported
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "disable": False})

    err = Terminal()
    monkeypatch.setattr(tq, "tqdm", Loud)
    monkeypatch.setattr(sys, "stderr", err)
    bar, close = progress()
    bar("discotex", 0, 3)
    bar("discotex", 2, 3)
    bar("abricot_abs", 1, 2)
    close()
    text = err.getvalue()
    assert "discotex:  67%" in text and "2/3" in text and "abricot_abs:  50%" in text and "1/2" in text
