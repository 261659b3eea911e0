"""A --prompt-variant naming none of a task's wordings is "not used" by it: the task keeps the wording its protocol
resolves (ABRICOT under --protocol calamita: CALAMITA's), not the task's first (the paper's, which it scored under
calamita's name: samples filed as abricot_abs@calamita with the paper prompt, recorded prompt_variant paper). The
CLI and the API score the same prompts as a run without the option, record the wording used, and the dry run plans
the same tokens; the task that has the variant (DISCOTEX) still gets it. Fake backend, the invented ABRICOT fixture."""

from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import FIXTURE

import abricot_local as al
from abricot_local.cli import cli
from abricot_local.errors import recorded_words, render
from abricot_local.tasks import make_task
from abricot_local.tasks.base import TaskOptions

ABS = "abricot_abs@calamita"
NOTE = ("--prompt-variant ita-bench does not apply to abricot_abs (abricot_abs's prompt variants are paper, "
        "calamita): not used")


def _cli(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


def _samples(out) -> bytes:
    return (out / f"samples-{ABS}.jsonl").read_bytes()


def test_the_cli_keeps_calamitas_wording_and_records_it(tmp_path, discotex_dir):
    base = ["run", "fake", "--backend", "fake", "--protocol", "calamita", "--n-ctx", 8192, "--data",
            f"abricot={FIXTURE}", "--limit", 3]
    _cli(*base, "--tasks", "abricot_abs", "--out", tmp_path / "cal")
    mixed = [*base, "--tasks", "abricot_abs,discotex", "--prompt-variant", "ita-bench", "--data-dir", discotex_dir]
    _cli(*mixed, "--out", tmp_path / "mix")
    assert _samples(tmp_path / "mix") == _samples(tmp_path / "cal")
    assert b"La prola" not in _samples(tmp_path / "mix")  # the paper prompt's typo
    cal, mix = (json.loads((tmp_path / d / "results.json").read_text())["tasks"] for d in ("cal", "mix"))
    assert mix[ABS]["config"] == cal[ABS]["config"]
    assert mix[ABS]["config"]["prompt_variant"] == "calamita" and mix[ABS]["config"]["protocol_differences"] == []
    assert mix[ABS]["prompt_hash"] == cal[ABS]["prompt_hash"] and NOTE in mix[ABS]["warnings"]
    assert mix["discotex"]["config"]["prompt_variant"] == "ita-bench"
    # the dry run plans the prompts the run scores: ABRICOT's line as without the option
    row = [next(ln for ln in _cli(*args, "--dry-run").splitlines() if ABS in ln)
           for args in ([*base, "--tasks", "abricot_abs"], mixed)]
    assert row[0].split()[-7:] == row[1].split()[-7:], row


def test_the_api_keeps_calamitas_wording(tmp_path, discotex_dir):
    common = dict(backend="fake", protocol="calamita", n_ctx=8192, data={"abricot": str(FIXTURE)}, limit=3,
                  progress=False)
    al.evaluate("fake", "abricot_abs", out=str(tmp_path / "cal"), **common)
    al.evaluate("fake", "abricot_abs,discotex", prompt_variant="ita-bench", data_dir=str(discotex_dir),
                out=str(tmp_path / "mix"), **common)
    assert _samples(tmp_path / "mix") == _samples(tmp_path / "cal")
    doc = json.loads((tmp_path / "mix" / "results.json").read_text())["tasks"]
    assert doc[ABS]["config"]["prompt_variant"] == "calamita" and doc["discotex"]["config"]["prompt_variant"] == "ita-bench"


def test_each_protocol_keeps_its_own_wording_when_the_variant_is_not_the_tasks():
    for key, protocol, want in (("abricot_abs", None, "paper"), ("abricot_abs", "calamita", "calamita"),
                                ("abricot_abs@calamita", "paper,calamita", "calamita"),
                                ("abricot_abs", "paper,calamita", "paper")):
        task = make_task(key, TaskOptions(data=(("abricot", str(FIXTURE)),), protocol=protocol,
                                          prompt_variant=("ita-bench",)))
        assert (task.resolved_variant(), task.config()["prompt_variant"]) == (want, want), key
        assert task.config()["protocol_differences"] == [], key
        assert tuple(render(n, recorded_words) for n in task.option_notes) == (NOTE,), key
    # a variant it has is still used as given (against the protocol's: said so)
    task = make_task("abricot_abs", TaskOptions(data=(("abricot", str(FIXTURE)),), protocol="calamita",
                                                prompt_variant=("paper",)))
    assert task.config()["prompt_variant"] == "paper"
    assert task.config()["protocol_differences"] == ["prompt_variant paper, published calamita"]
