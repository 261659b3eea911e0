"""A --protocol list is checked by one rule (tasks.selection.refuse_options) at the run, the dry run and plan():
a protocol no task of the run has is refused by all three (the dry run printed a plan), and so is a protocol named
twice, naming it (it was refused as "no protocol 'paper,paper'"). Fake backend, the real ABRICOT release (only its
task names are needed: the refusal comes before any item is read)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import abricot_local
from abricot_local.cli import cli
from abricot_local.errors import UsageError

CASES = [("paper,nope", "no task of this run has a protocol 'nope' (abricot_abs's are paper, calamita)"),
         ("paper,paper", "names the protocol 'paper' twice: give each protocol once"),
         ("calamita, paper,calamita", "names the protocol 'calamita' twice")]


@pytest.mark.parametrize("protocol, said", CASES)
def test_the_run_and_its_dry_run_refuse_it_alike(abricot_file, tmp_path, protocol, said):
    base = ["run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={abricot_file}",
            "--n-ctx", "8192", "--protocol", protocol, "--out", str(tmp_path / "o")]
    for extra in (["--dry-run"], []):
        r = CliRunner().invoke(cli, base + extra, catch_exceptions=False)
        assert r.exit_code == 2 and f"error: --protocol {protocol}" in r.output and said in r.output, r.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("protocol, said", CASES)
def test_plan_refuses_it(abricot_file, protocol, said):
    for given in (protocol, [p.strip() for p in protocol.split(",")]):
        with pytest.raises(UsageError, match=said.replace("(", r"\(").replace(")", r"\)")):
            abricot_local.plan("fake", "abricot_abs", protocol=given, backend="fake", data={"abricot": str(abricot_file)})


def test_a_list_of_distinct_protocols_is_planned(abricot_file):
    made = abricot_local.plan("fake", "abricot_abs", protocol=["calamita", "paper"], backend="fake",
                              data={"abricot": str(abricot_file)}, sample=2)
    tasks = made.to_json()["models"][0]["tasks"]
    assert [(t["task"], t["items"]) for t in tasks] == [("abricot_abs", 2), ("abricot_abs@calamita", 2)]
