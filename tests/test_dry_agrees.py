"""The dry run says what the run will do, and the run refuses for the cause it has (senior review, F13):

1. A sweep's pin check holds every model of the sweep, one whose run a --resume finds finished too (that model's own
   --resume holds it to its pin as well): a pin edited wrong since refuses the whole sweep before any item, its dry
   run too (a hash it remembers: nothing read), in the run's words; the finished run is left as it is.
2. --until-settled on data that is not the release: the dry run sees it (its data hashed as the run hashes it, in
   the dry run's looks, run.dry_run) and refuses as the run does, and the refusal names the data and the release.
3. A --resume of a finished run asked with other options, its data gone, gets the resume's refusal of other options
   (tasks.selection keeps a task the record lacks with its problem), as with its data here.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local import backends, hashing
from abricot_local.cli import cli
from abricot_local.run import execute
from gguf_synth import Synth
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def said(r) -> str:
    return " ".join(r.output.split())


def entries(tmp_path: Path, wrong: tuple[str, ...] = ()) -> Path:
    """Two local models g1, g2 (synthetic GGUFs), each pinned to its file's SHA-256 but those in ``wrong``."""
    text = ""
    for name in ("g1", "g2"):
        path = tmp_path / f"{name}.gguf"
        if not path.exists():
            Synth().write(path)
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        text += (f'["{name}"]\nsource = "local"\npath = "{path.name}"\nsha256 = "{"1" * 64 if name in wrong else sha}"'
                 '\nquant = "Q8_0"\n\n')
    toml = tmp_path / "models.toml"
    toml.write_text(text, encoding="utf-8")
    return toml


@pytest.fixture
def scored(monkeypatch):
    """The models each run loads, scored by the fake backend (their files are headers only)."""
    ran = []

    def fake(plan, **_):
        ran.append(plan.model_label)
        return backends.open_backend("fake", plan.model_label, backends.backend_options("fake", {}))

    monkeypatch.setattr(execute, "open_backend", fake)
    return ran


def test_a_resumed_sweep_holds_a_finished_model_to_its_pin_as_its_own_resume_does(tmp_path, scored):
    data, out = write_discotex(tmp_path / "d", 4), tmp_path / "sw"
    args = ("--tasks", "discotex", "--data-dir", data, "--sample", 2, "--out", out)
    r = invoke("run", "g1", "g2", "--models", entries(tmp_path), *args)
    assert r.exit_code == 0 and scored == ["g1", "g2"], r.output
    shutil.rmtree(out / "g2")  # g1's run finished; g2's to score again
    held = (out / "g1" / "results.json").read_bytes()
    bad = entries(tmp_path, wrong=("g1",))  # g1's pin edited wrong since
    assert hashing.remembered(tmp_path / "g1.gguf")  # (its hash remembered: a dry run holds the pin to it)
    own = invoke("run", "g1", "--models", bad, *args[:-1], out / "g1", "--resume")  # g1's own --resume
    assert own.exit_code == 2 and "error: model 'g1': sha256 mismatch" in own.output, own.output
    for more in ((), ("--dry-run",)):
        r = invoke("run", "g1", "g2", "--models", bad, *args, "--resume", *more)
        assert r.exit_code == 2 and "error: model 'g1': sha256 mismatch" in r.output, (more, r.output)
        assert f"[g1] in {bad}" in said(r) and "== g2" not in r.output
    assert scored[2:] == [] and not (out / "g2").exists() and (out / "g1" / "results.json").read_bytes() == held
    for more in ((), ("--dry-run",)):  # g1 planned (a new sweep): the whole sweep refused, the dry run so too
        r = invoke("run", "g1", "g2", "--models", bad, *args[:-1], tmp_path / "sw2", *more)
        assert r.exit_code == 2 and "error: model 'g1': sha256 mismatch" in r.output, (more, r.output)
        assert f"[g1] in {bad}" in said(r) and "== g2" not in r.output and "cannot be planned" not in r.output
    assert scored[3:] == [] and not (tmp_path / "sw2").exists()


def test_until_settled_on_data_not_the_release_is_refused_by_the_dry_run_as_by_the_run(tmp_path, monkeypatch):
    from dataclasses import replace

    from abricot_local.tasks.abricot import AbricotTask
    from abricot_local.tasks.abricot_data import RELEASE_SHA256
    from conftest import FIXTURE

    monkeypatch.setattr(AbricotTask, "data", replace(AbricotTask.data, release=(RELEASE_SHA256,)))  # the real alone
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n')
    args = ("run", "fake-as-llama", "--models", models, "--backend", "fake", "--tasks", "abricot_abs", "--n-ctx",
            8192, "--data", f"abricot={FIXTURE}", "--until-settled", "--out", tmp_path / "u")
    dry, r = invoke(*args, "--dry-run"), invoke(*args)
    for one in (dry, r):
        assert one.exit_code == 2 and "nothing to settle for --until-settled" in one.output, one.output
        assert "(their protocols and settings, and data)" in said(one), one.output
        assert f"; data {FIXTURE} is not the release (sha256" in said(one), one.output
    assert "cannot tell yet" not in dry.output and not (tmp_path / "u").exists()


@pytest.mark.parametrize("other", [("--protocol", "calamita"), ("--tasks", "abricot_abs,abricot_inc")])
def test_a_resume_asked_otherwise_is_refused_for_its_options_its_data_here_or_not(tmp_path, monkeypatch, other):
    from conftest import FIXTURE

    models = tmp_path / "models.toml"
    models.write_text('[fake-a]\nbackend = "fake"\n')
    base = ("run", "fake-a", "--models", models, "--backend", "fake", "--tasks", "abricot_abs", "--n-ctx", 8192,
            "--sample", 4, "--out", tmp_path / "r")
    assert invoke(*base, "--data", f"abricot={FIXTURE}").exit_code == 0
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    words = []
    for data in (("--data", f"abricot={FIXTURE}"), ("--data-dir", tmp_path / "none")):  # here, then gone
        (tmp_path / "none").mkdir(exist_ok=True)
        r = invoke(*base, "--resume", *data, *other)
        assert r.exit_code == 2 and "error: cannot resume" in r.output, (data, r.output)
        assert "no data in" not in r.output and "data pull" not in r.output, r.output
        words.append(r.output.strip().splitlines()[-1])
    assert words[0] == words[1] and "its config differs from the recorded run" in words[0], words
