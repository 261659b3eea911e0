"""`kld --data TASK=PATH` finds the runs' data as `run --data` does (run/check_data.py): the recorded file moved
away, kld refuses without it and measures with it; a key no task of the runs reads is refused by name."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner
from conftest import FIXTURE

from abricot_local.cli import cli


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_kld_finds_the_data_given_with_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "was").mkdir()
    shutil.copy(FIXTURE, tmp_path / "was" / FIXTURE.name)
    models = tmp_path / "models.toml"
    models.write_text("".join(f'[tiny-{k}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\nbase = "Tiny"\n\n'
                              for k, q in (("q8", "Q8_0"), ("q4", "Q4_K_M"))), encoding="utf-8")
    r = invoke("run", "tiny-q8", "--models", models, "--quants", "Q4_K_M,Q8_0", "--tasks", "abricot_abs", "--shots", 0,
               "--data", f"abricot={tmp_path / 'was' / FIXTURE.name}", "--limit", 2, "--out", "ladder")  # few tokens
    assert r.exit_code == 0, r.output
    (tmp_path / "was").rename(tmp_path / "now")  # the recorded path is gone: only --data finds the file
    runs = (tmp_path / "ladder" / "tiny-q8", tmp_path / "ladder" / "tiny-q4")
    r = invoke("kld", *runs, "--json")
    assert r.exit_code != 0 and "--data" in r.output and not (runs[1] / "kld.json").exists(), r.output
    r = invoke("kld", *runs, "--data", f"abricot={tmp_path / 'now' / FIXTURE.name}", "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)[0]["tasks"]["abricot_abs"]
    assert got["n_items"] == 2 and got["n_tokens"] > 0 and (runs[1] / "kld.json").is_file()
    r = invoke("kld", *runs, "--data", f"discotex={tmp_path / 'now'}")
    assert r.exit_code != 0 and "--data discotex=" in r.output and "no task of the run reads it" in r.output, r.output
