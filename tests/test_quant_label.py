"""A models.toml `quant` that its GGUF's own header contradicts (hob review, finding 3): the header's
general.file_type is the one truth; a run, its dry run and `--quants` refuse the entry at plan time, naming the
models file's `quant` line to fix, before the start line or a ladder could show the wrong quant. A header that
declares no file type, or one with no quant name, and a `quant` that is no llama.cpp file type are not refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.errors import UsageError
from abricot_local.models import locate as modellocate
from abricot_local.models.quants import ladder
from abricot_local.models.registry import load_registry
from gguf_synth import Synth, kv
from invented_data import write_discotex

F16, Q4_0, Q8_0 = 1, 2, 7  # llama.cpp's llama_ftype


def gguf(path: Path, file_type: int | None) -> Path:
    s = Synth()
    if file_type is not None:
        s.kvs.append(kv("general.file_type", "u32", file_type))
    return s.write(path)


def registry(tmp_path: Path, *entries: tuple[str, int | None, str]) -> Path:
    """Local entries of base "t": (alias, the file's general.file_type (None: no key), the `quant` written)."""
    toml, text = tmp_path / "models.toml", ""
    for alias, ftype, quant in entries:
        gguf(tmp_path / f"{alias}.gguf", ftype)
        text += f'["{alias}"]\nsource = "local"\npath = "{alias}.gguf"\nquant = "{quant}"\nbase = "t"\n\n'
    toml.write_text(text, encoding="utf-8")
    return toml


def assert_names_the_fix(said: str, toml: Path, alias: str, written: str, truth: str) -> None:
    assert f"[{alias}] in {toml}" in said and f'says quant = "{written}"' in said, said
    assert f"is {truth}" in said and f'quant = "{truth}"' in said and "`quant` line" in said, said


def test_a_run_of_an_entry_its_file_contradicts_is_refused_at_plan_time(tmp_path):
    toml = registry(tmp_path, ("t-q4", Q4_0, "Q8_0"))
    with pytest.raises(UsageError) as err:
        modellocate.locate("t-q4", models_file=toml)
    assert_names_the_fix(str(err.value), toml, "t-q4", "Q8_0", "Q4_0")
    out, data = tmp_path / "out", write_discotex(tmp_path / "d", 4)
    for more in (["--dry-run"], ["--out", str(out)]):  # the plan, and the run before its start line
        r = CliRunner().invoke(cli, ["run", "t-q4", "--models", str(toml), "--tasks", "discotex", "--data-dir",
                                     str(data), *more])
        assert r.exit_code == 2 and "contradicts its file" in r.output and "quant Q8_0" not in r.output, r.output
    assert not out.exists()


def test_quants_names_the_mislabelled_entry_instead_of_advice_it_cannot_follow(tmp_path):
    toml = registry(tmp_path, ("t-f16", F16, "F16"), ("t-q8", Q8_0, "Q8_0"), ("t-q4", Q4_0, "Q8_0"))
    reg = load_registry(toml)
    for asked in (["F16", "Q8_0"], ["F16", "Q4_0"], ["F16", "Q8_0", "Q4_0"]):
        with pytest.raises(UsageError) as err:
            ladder("t-f16", asked, reg)
        said = str(err.value)
        assert "give the alias" not in said and "has no Q4_0" not in said, said
        assert_names_the_fix(said, toml, "t-q4", "Q8_0", "Q4_0")
    assert ladder("t-f16", ["F16"], reg) == ("t-f16",)  # a ladder that does not take it runs
    r = CliRunner().invoke(cli, ["run", "t-f16", "--quants", "F16,Q8_0,Q4_0", "--models", str(toml), "--tasks",
                                 "discotex", "--dry-run"])
    assert r.exit_code == 2 and "contradicts its file" in r.output and "[t-q4]" in r.output, r.output


@pytest.mark.parametrize("ftype, quant", [(None, "Q8_0"), (99, "Q8_0"), (Q4_0, "UD-Q4_K_XL"), (15, "q4_k"),
                                          (Q4_0, "q4_0"), (Q4_0, "")])
def test_what_cannot_be_told_or_agrees_is_not_refused(tmp_path, ftype, quant):
    """No file type in the header, one with no quant name (99), a label of the user's own, Q4_K (= Q4_K_M, 15)
    in any case, the same quant in lower case, no `quant`."""
    toml = registry(tmp_path, ("t", ftype, quant))
    assert modellocate.locate("t", models_file=toml).path == tmp_path / "t.gguf"
