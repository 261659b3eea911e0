"""A grow of a finished run (`--resume` with a larger bound) cut after its first new item has removed results.json
(resume.reopen): its checkpoint keeps that record (`.checkpoint/grown-from.json`), so a --resume of the cut grow
keeps the looks the run's rules took (settle_record.earlier_in) and finishes as the uninterrupted grow does; a
`--sample` grow's note of the looks taken is kept however many grows later (settle_record.took_notes). Fake
backend, in-process."""

from __future__ import annotations

import json
import os
import shutil

from click.testing import CliRunner
from conftest import fail_after

from abricot_local.cli import cli

LOOKS = ("--until-settled", "--looks", "5,10")
TIMES = ("created", "wall_seconds")  # and per task: seconds, scored_now (this process's share of the work)


def run(out, models, data, *more):
    return CliRunner().invoke(cli, ["run", "fake-as-llama", "--models", str(models), "--tasks", "abricot_abs", "--data",
                                    f"abricot={data}", "--backend", "fake", "--n-ctx", "4096", "--margin", "0.3",
                                    *map(str, more), "--out", str(out)])


def untimed(out) -> dict:
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    for key in TIMES:
        doc.pop(key)
    for entry in doc["tasks"].values():
        entry.pop("seconds"), entry.pop("scored_now")
    return doc


def cut_grow(out, claims, abricot_file, monkeypatch, *grow):
    """The grow ``grow`` of the finished run in ``out`` stopped (Ctrl-C) after 3 new items."""
    with monkeypatch.context() as m:
        fail_after(m, 3, KeyboardInterrupt)
        assert run(out, claims, abricot_file, *grow, "--resume").exit_code == 130
    assert not (out / "results.json").exists() and (out / ".checkpoint" / "grown-from.json").is_file()


def test_an_interrupted_grow_resumed_is_the_uninterrupted_grow(tmp_path, claims, abricot_file, monkeypatch):
    """--max-items 15 (looks 5, 10, 15, open), grown to 30: cut, then resumed, it keeps the look at 15 (it planned
    5, 10, 30 afresh) and writes what the uninterrupted grow writes, save the times and this process's items."""
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert run(whole, claims, abricot_file, *LOOKS, "--max-items", 15).exit_code == 0
    shutil.copytree(whole, cut)
    assert run(whole, claims, abricot_file, *LOOKS, "--max-items", 30, "--resume").exit_code == 0
    cut_grow(cut, claims, abricot_file, monkeypatch, *LOOKS, "--max-items", 30)
    r = run(cut, claims, abricot_file, *LOOKS, "--max-items", 30, "--resume")
    assert r.exit_code == 0, r.output
    assert untimed(cut)["tasks"]["abricot_abs"]["sequential"]["planned"] == [5, 10, 15, 30]
    assert untimed(cut) == untimed(whole)
    assert (cut / "samples-abricot_abs.jsonl").read_bytes() == (whole / "samples-abricot_abs.jsonl").read_bytes()
    assert sorted(os.listdir(cut)) == ["results.json", "samples-abricot_abs.jsonl"]  # the kept record went too


def test_the_looks_note_of_a_sample_grow_is_kept_however_many_grows_later(tmp_path, claims, abricot_file,
                                                                          monkeypatch):
    """--sample 20 of a run whose rule took looks records the note; --sample 25 keeps it (it had nothing to read it
    from: a fixed-n record holds no rule), and so does --sample 30 cut and resumed (its checkpoint's record)."""
    out = tmp_path / "o"
    assert run(out, claims, abricot_file, *LOOKS, "--max-items", 15).exit_code == 0
    assert run(out, claims, abricot_file, "--sample", 20, "--resume").exit_code == 0
    note = [w for w in untimed(out)["tasks"]["abricot_abs"]["warnings"] if "took looks" in w]
    assert len(note) == 1 and "at 5, 10, 15 items before --sample 20" in note[0]
    r = run(out, claims, abricot_file, "--sample", 25, "--resume")
    assert r.exit_code == 0 and note[0] in r.stderr, r.output
    assert [w for w in untimed(out)["tasks"]["abricot_abs"]["warnings"] if "took looks" in w] == note
    cut_grow(out, claims, abricot_file, monkeypatch, "--sample", 30)
    assert run(out, claims, abricot_file, "--sample", 30, "--resume").exit_code == 0
    entry = untimed(out)["tasks"]["abricot_abs"]
    assert entry["n"] == 30 and [w for w in entry["warnings"] if "took looks" in w] == note


def test_a_kept_record_that_is_a_link_or_damaged_is_refused(tmp_path, claims, abricot_file, monkeypatch):
    """A kept record is read only as the run's own file: a link in its place is refused, and so is one that is no
    record (planned afresh, the rules would spend their looks' error again), saying what to do; nothing scored."""
    out = tmp_path / "o"
    assert run(out, claims, abricot_file, *LOOKS, "--max-items", 15).exit_code == 0
    cut_grow(out, claims, abricot_file, monkeypatch, *LOOKS, "--max-items", 30)
    kept = out / ".checkpoint" / "grown-from.json"
    os.replace(kept, tmp_path / "elsewhere.json")
    kept.symlink_to(tmp_path / "elsewhere.json")
    saved = (out / ".checkpoint" / "samples-abricot_abs.jsonl").read_bytes()
    r = run(out, claims, abricot_file, *LOOKS, "--max-items", 30, "--resume")
    assert r.exit_code != 0 and "symbolic link" in r.output, r.output
    assert (out / ".checkpoint" / "samples-abricot_abs.jsonl").read_bytes() == saved and kept.is_symlink()
    kept.unlink()
    kept.write_text("{", encoding="utf-8")
    r = run(out, claims, abricot_file, *LOOKS, "--max-items", 30, "--resume")
    assert r.exit_code != 0 and "grown-from.json is not valid JSON" in r.output and "remove it" in r.output, r.output
    assert (out / ".checkpoint" / "samples-abricot_abs.jsonl").read_bytes() == saved
