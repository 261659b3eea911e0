"""`run --dry-run --resume` counts the saved items as the resume keeps them (run/saved.py's kept_lines, called by
both): a saved line its item does not give (edited), an id saved twice with other content, a damaged middle line
and a torn last one are scored again, a whole duplicate and a line of an item not in the plan are not counted
twice, a line that is no sample is refused alike; each case's dry-run numbers are checked against what the resume
then scores (fake backend, real DISCOTEX data, 6 items)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import fail_after

N = 6
SAMPLES = "samples-discotex.jsonl"


@pytest.fixture
def base(discotex_dir):
    return ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(discotex_dir),
            "--n-ctx", "4096"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def interrupted(tmp_path: Path, monkeypatch, base, saved: int, n: int = N) -> Path:
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        fail_after(m, saved, KeyboardInterrupt)
        assert invoke(*base, "--limit", n, "--out", out).exit_code == 130
    return out


def rows_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def planned(base, out: Path, n: int = N) -> int:
    """How many items the dry run's one task has left to score (its JSON's ``items``; the text's "(k saved)")."""
    r = invoke(*base, "--limit", n, "--out", out, "--resume", "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    (task,) = json.loads(r.stdout)["models"][0]["tasks"]
    return task["items"]


def resumed(base, out: Path, n: int = N) -> int:
    """How many items the resume scored (results.json's scored_now)."""
    r = invoke(*base, "--limit", n, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    return json.loads((out / "results.json").read_text())["tasks"]["discotex"]["scored_now"]


def edit(path: Path, number: int, change) -> None:
    """Line ``number`` (1-based) of ``path`` made ``change(line as dict)``'s."""
    lines = rows_of(path)
    row = json.loads(lines[number - 1])
    change(row)
    lines[number - 1] = json.dumps(row, ensure_ascii=False) + "\n"
    path.write_text("".join(lines), encoding="utf-8")


def _context(row):
    row["context"] = row["context"].replace("a", "e", 1)


def _gold(row):
    row["gold"] = (row["gold"] + 1) % len(row["choices"])


@pytest.mark.parametrize("change", [_context, _gold], ids=["context", "gold"])
def test_an_edited_line_is_counted_as_the_resume_scores_it(tmp_path, monkeypatch, base, change):
    out = interrupted(tmp_path, monkeypatch, base, 4)
    edit(out / ".checkpoint" / SAMPLES, 2, change)
    before = (out / ".checkpoint" / SAMPLES).read_bytes()
    assert planned(base, out) == N - 3
    assert (out / ".checkpoint" / SAMPLES).read_bytes() == before  # the dry run writes nothing
    assert resumed(base, out) == N - 3


def test_an_id_saved_twice_with_other_content_is_counted_as_scored_again(tmp_path, monkeypatch, base):
    out = interrupted(tmp_path, monkeypatch, base, 4)
    path = out / ".checkpoint" / SAMPLES
    lines = rows_of(path)
    row = json.loads(lines[0])
    row["logprobs"] = [x - 1.0 for x in row["logprobs"]]  # another scoring of the item: which one is right is unknown
    path.write_text("".join(lines) + json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    assert planned(base, out) == N - 3
    assert resumed(base, out) == N - 3


def test_a_line_saved_twice_whole_is_counted_once(tmp_path, monkeypatch, base):
    out = interrupted(tmp_path, monkeypatch, base, 4)
    path = out / ".checkpoint" / SAMPLES
    lines = rows_of(path)
    path.write_text("".join(lines) + lines[1], encoding="utf-8")
    assert planned(base, out) == N - 4
    assert resumed(base, out) == N - 4


@pytest.mark.parametrize("where", ["middle", "last"])
def test_a_damaged_line_is_counted_as_scored_again(tmp_path, monkeypatch, base, where):
    """A damaged middle line (with a duplicate id after it: both set aside) and a torn last line."""
    out = interrupted(tmp_path, monkeypatch, base, 4)
    path = out / ".checkpoint" / SAMPLES
    lines = rows_of(path)
    if where == "middle":
        row = json.loads(lines[0])
        row["logprobs"] = [x - 1.0 for x in row["logprobs"]]
        lines[1] = "{garbage\n"
        lines.append(json.dumps(row, ensure_ascii=False) + "\n")  # item 1 again, other content: both set aside
        kept = 2
    else:
        lines[-1] = lines[-1][: len(lines[-1]) // 2]  # cut mid-write
        kept = 3
    path.write_text("".join(lines), encoding="utf-8")
    assert planned(base, out) == N - kept
    assert resumed(base, out) == N - kept


def test_lines_of_items_not_in_the_plan_are_not_counted(tmp_path, monkeypatch, base):
    """A checkpoint holding an item the plan does not (a smaller --limit now is refused, so: a line of an id not in
    the task, added) counts only the plan's items, as the resume scores them."""
    out = interrupted(tmp_path, monkeypatch, base, 3)
    path = out / ".checkpoint" / SAMPLES
    lines = rows_of(path)
    row = json.loads(lines[0])
    row["id"] = "not-an-item"
    path.write_text("".join(lines) + json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    assert planned(base, out) == N - 3
    assert resumed(base, out) == N - 3


def test_a_line_that_is_no_sample_is_refused_by_both(tmp_path, monkeypatch, base):
    out = interrupted(tmp_path, monkeypatch, base, 4)
    path = out / ".checkpoint" / SAMPLES
    lines = rows_of(path)
    lines[1] = json.dumps({"id": json.loads(lines[1])["id"], "note": "by hand"}) + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    said = []
    for extra in (("--dry-run",), ()):
        r = CliRunner().invoke(cli, [*base, "--limit", str(N), "--out", str(out), "--resume", *extra])
        assert r.exit_code != 0, (extra, r.output)
        said.append(" ".join(r.output.split()))
    assert f"{SAMPLES} line 2" in said[0] and "the checkpoint was changed" in said[0], said[0]
    assert "the checkpoint was changed" in said[1], said[1]


def test_under_a_chat_template_the_saved_lines_are_vouched_for_without_the_model(tmp_path, monkeypatch, base):
    """A dry run renders no chat template (no model loaded): each line is vouched for in the context it records,
    the rest of it against its item, so an edited gold is scored again and the whole lines are kept."""
    chat = [*base, "--chat-template"]
    out = interrupted(tmp_path, monkeypatch, chat, 4)
    assert "<|user|>" in rows_of(out / ".checkpoint" / SAMPLES)[0]  # the lines hold the rendered turn
    assert planned(chat, out) == N - 4
    edit(out / ".checkpoint" / SAMPLES, 3, _gold)
    assert planned(chat, out) == N - 3
    assert resumed(chat, out) == N - 3


def test_a_finished_run_is_counted_as_its_resume_takes_it(tmp_path, base):
    """The same run again: nothing to score (the resume returns it as it is, an edited line or not); grown to more
    items with a line edited: refused by both, as the finished run was changed."""
    out = tmp_path / "f"
    assert invoke(*base, "--sample", 4, "--out", out).exit_code == 0
    edit(out / SAMPLES, 1, _gold)
    r = invoke(*base, "--sample", 4, "--out", out, "--resume", "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["models"][0]["tasks"][0]["items"] == 0
    said = []
    for extra in (("--dry-run",), ()):
        r = CliRunner().invoke(cli, [*base, "--sample", "6", "--out", str(out), "--resume", *extra])
        assert r.exit_code != 0, (extra, r.output)
        said.append(" ".join(r.output.split()))
    for text in said:
        assert "is not what its item gives" in text and f"the finished run in {out} was changed" in text, text
