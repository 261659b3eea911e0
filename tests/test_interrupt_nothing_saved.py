"""A signal while llama.cpp does not return, before the run saved an item (hobbyist review 67, finding 1): the
watchdog's path (RunFolder.stuck) leaves what Ctrl-C's does, by one rule (RunFolder._stopped): a new run's folder
and files removed and no resume command said; a --resume's folder INTERRUPTED with the items an earlier run saved;
and a folder an earlier abricot-local left INTERRUPTED with nothing saved taken by a plain run, afresh. Finding 6:
`runs` counts a checkpoint by the rule a --resume reads it by, and says a line the resume refuses.

The call that never returns is played in-process: the fake backend's call runs the watchdog's handlers (what
interrupts._abandon does from its thread while the main one is inside llama.cpp), the folder is read then (the
process ends there with os._exit), and the call leaves with SystemExit."""

from __future__ import annotations

import json
import signal

import pytest
from click.testing import CliRunner

from abricot_local.backends.fake import FakeBackend
from abricot_local.backends.llama_cpp import interrupts
from abricot_local.cli import cli
from invented_data import write_discotex


@pytest.fixture
def data(tmp_path):
    return write_discotex(tmp_path / "d", 4)


def _args(data, out, limit=4):
    return ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(data), "--limit", str(limit),
            "--out", str(out)]


def _stuck_at(monkeypatch, at: int) -> dict:
    """The fake backend's call number ``at`` (0: the first) never returns: the watchdog's handlers run, what the
    folder holds then is kept in the dict returned (``files``), and the process ends (SystemExit)."""
    real, seen = FakeBackend.score_many, {"n": 0}

    def score_many(self, reqs):
        out = []
        for req in reqs:
            if seen["n"] == at:
                for handler in list(interrupts._stuck):
                    handler(signal.SIGTERM)
                seen["files"] = sorted(str(p.relative_to(seen["out"])) for p in seen["out"].rglob("*")) \
                    if seen["out"].exists() else None
                raise SystemExit(130)
            seen["n"] += 1
            out += real(self, [req])
        return out

    monkeypatch.setattr(FakeBackend, "score_many", score_many)
    return seen


def test_a_new_run_stuck_before_its_first_item_leaves_nothing(tmp_path, data, monkeypatch):
    out = tmp_path / "o"
    seen = _stuck_at(monkeypatch, 0)
    seen["out"] = out
    r = CliRunner().invoke(cli, _args(data, out))
    assert r.exit_code == 130, r.output
    assert seen["files"] is None and not out.exists(), seen  # the folder it made: gone
    assert "nothing scored yet, nothing to resume" in r.output and "run the same command again" in r.output
    assert "resume with" not in r.output and "--resume" not in r.output.split("nothing scored yet")[1]


def test_a_folder_it_did_not_make_is_left_empty(tmp_path, data, monkeypatch):
    out = tmp_path / "o"
    out.mkdir()
    seen = _stuck_at(monkeypatch, 0)
    seen["out"] = out
    r = CliRunner().invoke(cli, _args(data, out))
    assert r.exit_code == 130 and seen["files"] == [] and out.is_dir(), (r.output, seen)
    assert "nothing scored yet, nothing to resume; run the same command again" in r.output


def test_a_resume_stuck_before_a_new_item_keeps_the_saved_ones(tmp_path, data, monkeypatch):
    out = tmp_path / "o"
    seen = _stuck_at(monkeypatch, 2)
    seen["out"] = out
    assert CliRunner().invoke(cli, _args(data, out)).exit_code == 130
    assert "INTERRUPTED" in seen["files"], seen  # two items saved
    # (the count stays at 2: the resume's first call never returns)
    r = CliRunner().invoke(cli, [*_args(data, out), "--resume"])
    assert r.exit_code == 130, r.output
    assert "interrupted: 2 of 4 items (discotex 2/4) saved in" in r.output and "resume with:" in r.output
    ck = out / ".checkpoint" / "samples-discotex.jsonl"
    assert len(ck.read_text().splitlines()) == 2 and (out / "INTERRUPTED").is_file()


def test_a_folder_left_interrupted_with_nothing_saved_is_run_again(tmp_path, data, monkeypatch):
    """What a --resume stopped before its first item leaves (and what the stuck path left before this fix: only
    .checkpoint/run.json and INTERRUPTED): a plain run of other options starts afresh there, its dry run too."""
    out = tmp_path / "o"
    out.mkdir()
    seen = _stuck_at(monkeypatch, 0)
    seen["out"] = out
    r = CliRunner().invoke(cli, [*_args(data, out), "--resume"])
    assert r.exit_code == 130 and "interrupted: no item saved in" in r.output, r.output
    assert seen["files"] == [".checkpoint", ".checkpoint/run.json", "INTERRUPTED"], seen
    monkeypatch.undo()
    r = CliRunner().invoke(cli, [*_args(data, out, 2), "--dry-run"])
    assert r.exit_code == 0 and "interrupted run" not in r.output, r.output
    r = CliRunner().invoke(cli, _args(data, out, 2))
    assert r.exit_code == 0, r.output
    assert json.loads((out / "results.json").read_text())["tasks"]["discotex"]["n"] == 2
    assert sorted(p.name for p in out.iterdir()) == ["results.json", "samples-discotex.jsonl"]


def test_runs_counts_what_a_resume_keeps_and_names_a_line_it_refuses(tmp_path, data, monkeypatch):
    from abricot_local.run.kept import read_saved
    from abricot_local.run.states import run_state

    out = tmp_path / "o"
    seen = _stuck_at(monkeypatch, 3)
    seen["out"] = out
    assert CliRunner().invoke(cli, _args(data, out)).exit_code == 130
    ck = out / ".checkpoint" / "samples-discotex.jsonl"
    lines = ck.read_text().splitlines()
    other = json.loads(lines[0])
    low = other["logprobs"].index(min(other["logprobs"]))
    other["logprobs"][low] -= 0.5  # item 1 again, other content (its prediction the same): both lines set aside
    ck.write_text("\n".join([*lines, json.dumps(other), "not json"]) + "\n")
    state = run_state(out)
    assert state.done == len(read_saved(ck, repair=False)[0]) == 2, state
    assert "damaged" not in state.detail and "continues" in state.detail

    with ck.open("a") as fh:
        fh.write('{"foo": 1}\n')  # JSON, no sample: a --resume refuses it
    state = run_state(out)
    assert state.done == 2 and state.state == "interrupted", state
    assert f"damaged: {ck} line 6 is malformed: id is missing" in state.detail and "refuses it" in state.detail
    r = CliRunner().invoke(cli, ["runs", str(out)])
    assert r.exit_code == 0 and "2 of 4 items" in r.output and "--resume refuses it" in r.output, r.output
