"""A printed or stored command names its MODEL so it works from any folder: a MODEL that names a file by a path
relative to the folder the run was started in (a file here, a .gguf name with a folder in it) is written absolute in
the resume command (terminal and INTERRUPTED) and the advice's grow and settle commands; a registry alias, a store
reference and a bare file name found in llama.cpp's cache or a --model-dir (found again from anywhere) stay as
written. The MODELs are those click parses, not an option's value. Synthetic GGUF scored by the fake backend."""

from __future__ import annotations

import shlex
import sys
import types
from pathlib import Path

from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.cli.run import grow_command, resume_command, settle_command
from gguf_synth import Synth
from invented_data import write_discotex
from tests.conftest import fail_after
import test_dry_agrees

scored = test_dry_agrees.scored  # the fixture: the models each run loads, scored by the fake backend


def invoke(monkeypatch, args: list[str]):
    """`abricot-local ARGS` as a shell runs it: sys.argv is what its printed commands replay."""
    monkeypatch.setattr(sys, "argv", ["abricot-local", *args])
    return CliRunner().invoke(cli, args)


def said(r) -> str:
    return next(ln for ln in r.output.splitlines() if "resume with: " in ln).split("resume with: ", 1)[1]


def test_an_interrupted_run_of_a_model_here_resumes_from_another_folder(tmp_path, scored, monkeypatch):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir(), elsewhere.mkdir()
    Synth().write(work / "gemma.gguf")
    write_discotex(work / "dd" / "discotex", 4)
    monkeypatch.chdir(work)
    run = ["run", "gemma.gguf", "--tasks", "discotex", "--data-dir", "dd", "--limit", "4"]
    with monkeypatch.context() as m:
        fail_after(m, 2, KeyboardInterrupt)
        r = invoke(monkeypatch, [*run, "--out", "rel"])
    assert r.exit_code == 130, r.output
    line = said(r)
    assert shlex.split(line) == ["abricot-local", "run", str(work / "gemma.gguf"), "--tasks", "discotex",
                                 "--data-dir", str(work / "dd"), "--limit", "4", "--out", str(work / "rel"), "--resume"], line
    state = (work / "rel" / "INTERRUPTED").read_text()
    assert f"resume: {line}\n" in state, state
    monkeypatch.chdir(elsewhere)  # pasted in another folder (was: model file not found: gemma.gguf ...)
    r = invoke(monkeypatch, shlex.split(line)[1:])
    assert r.exit_code == 0 and (work / "rel" / "results.json").is_file(), r.output
    monkeypatch.chdir(work)
    assert invoke(monkeypatch, [*run, "--out", "ref"]).exit_code == 0
    name = "samples-discotex.jsonl"
    assert (work / "rel" / name).read_bytes() == (work / "ref" / name).read_bytes()
    assert scored == ["gemma"] * 3


def test_only_models_that_name_a_file_from_this_folder_are_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "md").mkdir()
    Synth().write(tmp_path / "here.gguf")
    Synth().write(tmp_path / "md" / "cached.gguf")  # a bare name found in a --model-dir, not here
    (tmp_path / "plain").write_bytes(b"")  # a bare name of a file here, no .gguf
    models = ["here.gguf", "./here.gguf", "sub/later.gguf", "plain", "cached.gguf", "gemma-2b", "hf:o/r:Q4_K_M",
              "~/m.gguf", str(tmp_path / "here.gguf")]
    argv = ["run", *models, "--model-dir", "md", "--prompt-variant", "here.gguf", "--sample", "10", "--out", "o"]
    monkeypatch.setattr(sys, "argv", ["abricot-local", *argv])
    fixed = [str(tmp_path / "here.gguf")] * 2 + [str(tmp_path / "sub/later.gguf"), str(tmp_path / "plain"),
                                                 *models[4:]]
    rest = ["--model-dir", str(tmp_path / "md"), "--prompt-variant", "here.gguf"]  # an option's value: not a MODEL
    resumed = shlex.split(resume_command(Path("o"), ("discotex",)))
    assert resumed == ["abricot-local", "run", *fixed, *rest, "--sample", "10", "--out", str(tmp_path / "o"),
                       "--tasks", "discotex", "--resume"], resumed
    grown = shlex.split(grow_command(Path("o"), 20, types.SimpleNamespace(sample=10, tasks=("discotex",))))
    assert grown[:2 + len(fixed)] == ["abricot-local", "run", *fixed], grown
    drawn = shlex.split(grow_command(Path("o"), 20, types.SimpleNamespace(sample=None, tasks=("discotex",))))
    assert drawn[:2 + len(fixed)] == ["abricot-local", "run", *fixed] and "--out" not in drawn, drawn
    settle = shlex.split(settle_command(Path("o"), 40, types.SimpleNamespace(tasks=("discotex",))))
    assert settle[:2 + len(fixed)] == ["abricot-local", "run", *fixed], settle
    monkeypatch.setattr(sys, "argv", ["abricot-local", "run", "./here.gguf", "--backend", "fake", "--out", "o"])
    assert shlex.split(resume_command(Path("o")))[2] == "./here.gguf"  # a synthetic backend's label: no file
