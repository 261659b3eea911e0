"""`run FILE.gguf --quants Q8_0`: the file given and the rung asked for beside it are a two-file ladder, named
as the command to run (as `quantize ... --out rungs` names its files: lower-case quant tags)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.errors import UsageError, shell_line
from abricot_local.models.quants import ladder


@pytest.fixture
def rungs(tmp_path):
    folder = tmp_path / "rungs"
    folder.mkdir()
    for q in ("f16", "q8_0", "q4_0"):
        (folder / f"gemma-3-270m-{q}.gguf").write_bytes(b"GGUF")  # never opened: their names are read
    (folder / "other-q8_0.gguf").write_bytes(b"GGUF")  # another model's rung: not listed
    return folder


def said(model, quants: tuple[str, ...]) -> str:
    with pytest.raises(UsageError) as err:
        ladder(str(model), quants, {})
    return str(err.value)


def test_the_file_given_and_the_rung_asked_for_are_named(rungs):
    f16, q8, q4 = (rungs / f"gemma-3-270m-{q}.gguf" for q in ("f16", "q8_0", "q4_0"))
    assert f"(`abricot-local run {shell_line([str(f16), str(q8)])}`, with your other options)" in said(f16, ("Q8_0",))
    assert f"`abricot-local run {shell_line([str(f16), str(q8)])}`" in said(f16, ("F16", "q8_0"))  # as before
    assert f"`abricot-local run {shell_line([str(q8), str(f16), str(q4)])}`" in said(q8, ("F16", "Q4_0"))
    out = said(f16, ("Q8_0", "Q2_K"))  # a rung not beside it: said, no command made up
    assert "`abricot-local run FILE FILE ...`" in out and out.endswith("; no Q2_K file of that name is beside it"), out


def test_the_command_line_says_it_in_its_words(rungs, monkeypatch):
    monkeypatch.chdir(rungs.parent)
    r = CliRunner().invoke(cli, ["run", "rungs/gemma-3-270m-f16.gguf", "--quants", "Q8_0", "--dry-run"])
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and "without --quants (`abricot-local run rungs/gemma-3-270m-f16.gguf " \
        "rungs/gemma-3-270m-q8_0.gguf`, with your other options)" in out, r.output
