"""Small refusals and a signal's last window: a --models file the user named is read even by a synthetic
backend (a broken default registry does not stop `check` of a recorded run); Ctrl-C or SIGTERM as a run's
summary is said, or a sweep's comparison, exits 130 saying which runs are complete; `check --atol` refuses
NaN and infinities as it refuses a negative value; an empty --out is refused, never read as no --out; a shard
with no item says how many parts the items allow."""

from __future__ import annotations

import os
import signal

import pytest
from click.testing import CliRunner

import abricot_local as api
from abricot_local.cli import cli
from abricot_local.errors import UsageError
from abricot_local.models.given import Given
from abricot_local.models.locate import open_model, resolve_model_ref
from invented_data import write_discotex

BAD_TOML = "[a\nb = \n"


@pytest.fixture
def data(tmp_path):
    return write_discotex(tmp_path / "d", 5)  # 10 items


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_line(r) -> str:
    return " ".join(r.output.split())


def run_fake(data, *extra):
    return invoke("run", "m1", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, *extra)


# -- 1. a --models file the user named is read, whatever the backend ---------------------------------
@pytest.mark.parametrize("content, why", [(BAD_TOML, "not valid TOML"), (None, "models file not found")])
def test_a_models_file_the_user_named_is_read_by_a_synthetic_backend_too(tmp_path, data, content, why):
    models = tmp_path / "m.toml"
    if content is not None:
        models.write_text(content)
    out = tmp_path / "g"
    for extra in ((), ("--dry-run",)):  # the run as its dry run: refused before any folder
        r = run_fake(data, "--models", models, "--out", out, *extra)
        assert r.exit_code == 2 and why in r.output and "Traceback" not in r.output, (extra, r.output)
        assert not out.exists()
    for backend, name in (("fake", "m1"), ("llama.cpp", "x.gguf"), ("llama.cpp", "hf:org/repo")):
        with pytest.raises(UsageError, match=why):  # read first, whatever the name (a path: before its file)
            resolve_model_ref(name, backend=backend, models_file=models)
        with pytest.raises(UsageError, match=why):
            open_model(name, Given(backend), models_file=models)


def test_a_broken_default_registry_does_not_stop_check_of_a_recorded_synthetic_run(tmp_path, data):
    """Why `_synthetic` keeps a broken *default* registry's error to itself: `check` finds a recorded fake
    run's model again through it (as run.held reads the published rows), and must not depend on the user's
    registry file; a run of a path does the same (`_same_file`)."""
    out = tmp_path / "g"
    assert run_fake(data, "--out", out).exit_code == 0
    config = tmp_path / "config"  # conftest's ABRICOT_CONFIG_DIR
    config.mkdir(exist_ok=True)
    (config / "models.toml").write_text(BAD_TOML)
    r = invoke("check", out)
    assert r.exit_code == 0 and "reproduced" in r.output, r.output


# -- 2. a signal after results.json is written: 130, the run(s) complete ------------------------------
def signalled(monkeypatch, target, name: str, signum: int) -> None:
    """``target.name`` sends ``signum`` to this process before doing its work (a real signal, at a fixed place)."""
    real = getattr(target, name)

    def sending(*a, **kw):
        os.kill(os.getpid(), signum)
        return real(*a, **kw)

    monkeypatch.setattr(target, name, sending)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_summary_is_said_exits_0_with_the_run_complete(tmp_path, data, monkeypatch, signum):
    from abricot_local import console

    out = tmp_path / "g"
    signalled(monkeypatch, console, "summary", signum)  # in the `done` hook (cli.run._said), after results.json
    r = run_fake(data, "--out", out)
    assert r.exit_code == 0, r.output  # every run written: nothing lost, a scheduler's job not failed
    if signum == signal.SIGINT:  # Ctrl-C: the summary cut, said so
        assert f"interrupted: the run in {out} is complete (results.json is written)" in one_line(r)
    else:  # SIGTERM once every run is written stops nothing: the summary is said whole
        assert "interrupted" not in r.output and f"wrote {out / 'results.json'}" in one_line(r)
    assert "Aborted" not in r.output and "resume with" not in r.output
    assert sorted(os.listdir(out)) == ["results.json", "samples-discotex.jsonl"]
    assert invoke("check", out).exit_code == 0


def test_ctrl_c_in_a_sweep_says_which_runs_are_complete_and_how_to_go_on(tmp_path, data, monkeypatch):
    from abricot_local.cli import run as cli_run

    out = tmp_path / "sweep"
    real, calls = cli_run._said, []

    def said(step):  # Ctrl-C as the first model's summary is said
        calls.append(step)
        if len(calls) == 1:
            raise KeyboardInterrupt
        real(step)

    with monkeypatch.context() as m:
        m.setattr(cli_run, "_said", said)
        r = invoke("run", "m1", "m2", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--out", out)
    text = one_line(r)
    assert r.exit_code == 130 and f"the sweep in {out} holds 1 of 2 runs complete (results.json is written)" in text
    assert "resume with: abricot-local " in text and f"{out} --resume" in text  # (argv: pytest's, in-process)
    assert (out / "m1" / "results.json").exists() and not (out / "m2").exists()

    with monkeypatch.context() as m:  # Ctrl-C as the comparison is said: every run is complete
        m.setattr("abricot_local.report.sweep.compared", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
        r = invoke("run", "m1", "m2", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--out", out,
                   "--resume")
    assert r.exit_code == 0 and f"the sweep in {out} holds its 2 runs, complete" in one_line(r), r.output
    assert "resume with" not in r.output and (out / "m2" / "results.json").exists()


# -- 3. check --atol: a finite number, at least 0 --------------------------------------------------
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1"])
def test_check_refuses_a_nan_infinite_or_negative_atol_before_reading_the_run(value):
    r = invoke("check", "nowhere", "--atol", value)  # refused before the (missing) run is looked at
    assert r.exit_code == 2 and "error: --atol: " in r.output and "nowhere" not in r.output, r.output


# -- 4. an empty output path -----------------------------------------------------------------------
def test_an_empty_out_is_refused_naming_the_option(tmp_path, data):
    for extra in ((), ("--dry-run",), ("--resume",)):
        r = run_fake(data, "--out", "", *extra)
        assert r.exit_code == 2 and "error: --out is empty" in r.output, (extra, r.output)
    assert not (tmp_path / "results").exists()
    r = invoke("merge", "--out", "", tmp_path / "s1", tmp_path / "s2")
    assert r.exit_code == 2 and "error: --out is empty" in r.output, r.output
    for args, flag in ((("report", tmp_path, "-o", ""), "--output"), (("report", tmp_path, "--plot", ""), "--plot"),
                       (("compare", tmp_path, tmp_path, "-o", ""), "--output"),
                       (("quantize", "m1", "--to", "Q8_0", "--out", ""), "--out")):
        r = invoke(*args)  # were stdout, nothing, stdout and the cache folder
        assert r.exit_code == 2 and f"error: {flag} is empty" in r.output, (args, r.output)
    with pytest.raises(UsageError, match="^out is empty"):  # the API names its keyword
        api.evaluate("fake", "discotex", out="", backend="fake", data_dir=str(data))
    assert not (tmp_path / "results").exists()


def test_a_shard_with_no_item_says_how_many_parts_the_items_allow(data, tmp_path):
    r = run_fake(data, "--sample", 4, "--shard", "5/5", "--out", tmp_path / "e")
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "shard 5/5 holds no item (4 items in all): split them into at most 4 parts (--shard K/4)" in one_line(r)
    assert not (tmp_path / "e").exists()
    with pytest.raises(UsageError, match=r"at most 4 parts \(shard=K/4\)"):
        api.evaluate("m1", backend="fake", tasks="discotex", data_dir=data, sample=4, shard="5/5", out=tmp_path / "f")
    assert run_fake(data, "--sample", 4, "--shard", "4/4", "--out", tmp_path / "g").exit_code == 0
