"""A sweep's folder, as one model's: --out itself a link is refused (run, dry run, API) in one model's words before
anything is written (a link further up is not); a sweep without --out stopped by Ctrl-C (or a full disk, a lost
device) names the call that resumes the sweep, its folder results/sweep-<stamp>, and that call, run as printed,
finishes it; its verdict's advice too; an --until-settled run grown says its bound, --max-items. Fake backend."""

from __future__ import annotations

import json
import shlex
import sys
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

import abricot_local as api
from abricot_local.cli import cli
from abricot_local.errors import ResultsError
from conftest import fail_after
from invented_data import write_discotex

MODELS = ("fake-a", "fake-b")


@pytest.fixture
def data(tmp_path):
    return write_discotex(tmp_path / "d", 4)  # 8 items


def argv(data, *extra, models=MODELS) -> list[str]:
    return [str(a) for a in ("run", *models, "--backend", "fake", "--tasks", "discotex", "--data-dir", data, *extra)]


def invoke(args: list[str]):
    return CliRunner().invoke(cli, args)


def error_line(r) -> str:
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error: ")]
    assert r.exit_code == 2 and len(errors) == 1, r.output
    return errors[0]


def tree(root: Path) -> list:
    """Every path under ``root`` with its time, but the test's user cache (conftest: the tool's, made on first use)."""
    return sorted((str(p), p.lstat().st_mtime_ns) for p in root.rglob("*") if "cache" not in p.relative_to(root).parts)


@pytest.mark.parametrize("finished", [False, True], ids=["empty", "a-sweep-made-before"])
def test_a_sweep_s_out_that_is_a_link_is_refused_as_one_model_s_before_anything_is_written(tmp_path, data, finished):
    real = tmp_path / "real"
    if finished:
        assert invoke(argv(data, "--out", real)).exit_code == 0
    else:
        real.mkdir()
    (tmp_path / "ln").symlink_to(real)
    link = tmp_path / "ln"
    before = tree(tmp_path)
    one = error_line(invoke(argv(data, "--out", link, models=("fake-a",))))  # one model's refusal
    assert "is a symbolic link" in one and str(link) in one
    for extra in ((), ("--resume",)):
        for dry in ((), ("--dry-run",)):
            assert error_line(invoke(argv(data, "--out", link, *extra, *dry))) == one, (extra, dry)
    with pytest.raises(ResultsError, match="is a symbolic link") as err, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        api.evaluate(list(MODELS), "discotex", backend="fake", data_dir=str(data), out=str(link), progress=False)
    assert str(err.value) == f"{link} is a symbolic link: abricot-local reads and writes only files it made, never " \
        "through a link; choose another out"  # (evaluate's words for the option)
    assert tree(tmp_path) == before  # nothing made, locked, tidied or written through the link


def test_a_link_further_up_than_a_sweep_s_out_is_not_refused(tmp_path, data):
    (tmp_path / "real").mkdir()
    (tmp_path / "ln").symlink_to(tmp_path / "real")
    r = invoke(argv(data, "--out", tmp_path / "ln" / "sweep"))
    assert r.exit_code == 0, r.output
    assert all((tmp_path / "real" / "sweep" / m / "results.json").is_file() for m in MODELS)


def test_a_sweep_without_out_names_the_call_that_resumes_the_sweep_and_it_does(tmp_path, data, monkeypatch):
    from abricot_local.cli.run import resume_command
    from abricot_local.run.run_folder import RunFolder

    ref = tmp_path / "ref"
    assert invoke(argv(data, "--out", ref)).exit_code == 0
    monkeypatch.chdir(tmp_path)
    args = argv(data)
    monkeypatch.setattr(sys, "argv", ["abricot-local", *args])  # the command line resume_command repeats
    with monkeypatch.context() as m:
        fail_after(m, 8 + 3, KeyboardInterrupt)  # fake-a's 8 items, then 3 of fake-b's
        r = invoke(args)
    assert r.exit_code == 130, r.output
    (root,) = Path("results").iterdir()  # results/sweep-<stamp>
    said = r.output[r.output.index("\nresume with: ") + len("\nresume with: "):].splitlines()[0]
    assert said == shlex.join(["abricot-local", *args, "--out", str(tmp_path / root), "--resume"])  # absolute
    interrupted = (root / "fake-b" / "INTERRUPTED").read_text(encoding="utf-8")
    assert f"--out {tmp_path / root} --resume" in interrupted and "fake-b --resume" not in interrupted
    # a full disk's, a lost device's words (RunFolder.go_on): the sweep's call too
    on = RunFolder(root / "fake-b", hint=resume_command, totals={"discotex": 8}, within=root).go_on("it is back")
    assert on.endswith(f"resume with: {said}"), on
    again = invoke(shlex.split(said)[1:])  # run as printed
    assert again.exit_code == 0 and f"{root / 'fake-a'} holds this run, complete: nothing to score" in again.output, again.output
    assert sorted(p.name for p in root.iterdir()) == list(MODELS)  # no sweep made inside a model's folder
    for m in MODELS:
        name = "samples-discotex.jsonl"
        assert (root / m / name).read_bytes() == (ref / m / name).read_bytes()


def test_the_api_s_resume_call_of_a_sweep_names_the_sweep_s_folder(tmp_path, data, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with monkeypatch.context() as m, warnings.catch_warnings(), pytest.raises(KeyboardInterrupt) as err:
        warnings.simplefilter("ignore")
        fail_after(m, 8 + 3, KeyboardInterrupt)
        api.evaluate(list(MODELS), "discotex", backend="fake", data_dir=str(data), progress=False)
    (root,) = Path("results").iterdir()
    assert str(err.value).endswith(f"resume with: abricot_local.evaluate(..., out={str(tmp_path / root)!r}, "
                                   "resume=True)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = api.evaluate(list(MODELS), "discotex", backend="fake", data_dir=str(data), out=str(root), resume=True,
                            progress=False)
    assert [Path(r.path).name for r in runs] == list(MODELS) and sorted(p.name for p in root.iterdir()) == list(MODELS)


def claims_run(models: Path, data: Path, *more) -> list[str]:
    return [str(a) for a in ("run", *more, "--models", models, "--tasks", "abricot_abs", "--data", f"abricot={data}",
                             "--backend", "fake", "--n-ctx", "4096", "--margin", "0.3")]


def test_a_sweep_s_grow_advice_without_out_grows_the_sweep(tmp_path, abricot_file, monkeypatch):
    models = tmp_path / "models.toml"
    models.write_text("".join(f'[{m}]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n' for m in MODELS),
                      encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    args = [*claims_run(models, abricot_file, *MODELS), "--sample", "10"]
    monkeypatch.setattr(sys, "argv", ["abricot-local", *args])
    r = invoke(args)
    assert r.exit_code == 0, r.output
    (root,) = Path("results").iterdir()
    advised = {ln.strip() for ln in r.output.splitlines() if ln.strip().startswith("abricot-local run ")}
    assert advised == {shlex.join(["abricot-local", *args[:-2], "--sample", "20", "--out", str(tmp_path / root),
                                   "--resume"])}
    grown = invoke(shlex.split(advised.pop())[1:])
    assert grown.exit_code == 0, grown.output
    for m in MODELS:
        assert json.loads((root / m / "results.json").read_text())["tasks"]["abricot_abs"]["n"] == 20
    assert sorted(p.name for p in root.iterdir()) == list(MODELS)


def test_an_until_settled_run_grown_says_its_bound_max_items(tmp_path, claims, abricot_file):
    out = tmp_path / "o"
    settle = ("--until-settled", "--looks", "5,10")
    assert invoke([*claims_run(claims, abricot_file, "fake-as-llama", *settle, "--max-items", 15),
                   "--out", str(out)]).exit_code == 0
    r = invoke([*claims_run(claims, abricot_file, "fake-as-llama", *settle, "--max-items", 30), "--out", str(out),
                "--resume"])
    assert r.exit_code == 0, r.output
    assert f"resume: the run in {out} grows from the 15 items it holds to --max-items 30: " in r.output, r.output
    assert "--sample" not in r.output.split("grows from")[1].split("\n")[0]
