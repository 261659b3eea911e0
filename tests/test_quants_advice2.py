"""`run MODEL --quants` advice that works as printed (findings of the review of c2456a1): the `quantize` command
carries the --models file that names its SOURCE, names no rung above the SOURCE's precision (that rung would be the
SOURCE in disguise: a higher quant needs a higher-precision source) and is given only where the SOURCE is a GGUF file
(no synthetic entry); the model-file advice only for a .gguf file here: a store's reference gets the plain refusal,
a path to no file is said missing."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.errors import UsageError, shell_word
from abricot_local.models.quants import ladder
from abricot_local.models.registry import load_registry

PLAIN = "is neither a registry alias nor a registry `base` (models.toml); `abricot-local models` lists them"


def files(tmp_path, *quants: str) -> str:
    """Entries of base Tiny, each a local .gguf (never opened: the refusal comes first)."""
    out = ""
    for q in quants:
        (tmp_path / f"tiny-{q}.gguf").write_bytes(b"")
        out += (f'[tiny-{q.lower()}]\nsource = "local"\npath = "{tmp_path / f"tiny-{q}.gguf"}"\nquant = "{q}"\n'
                'base = "Tiny"\n\n')
    return out


def refused(models, model: str, quants: str) -> str:
    r = CliRunner().invoke(cli, ["run", model, "--quants", quants, "--models", str(models), "--tasks", "discotex",
                                 "--dry-run"])
    assert r.exit_code == 2, r.output
    return " ".join(r.output.split())  # the error folded to the terminal's width, read as one line


@pytest.fixture
def models(tmp_path):
    def write(text: str):
        path = tmp_path / "my models.toml"  # a space: the file is quoted as a shell reads it back
        path.write_text(text, encoding="utf-8")
        return path
    return write


def test_the_quantize_command_carries_the_models_file_that_names_its_source(tmp_path, models):
    path = models(files(tmp_path, "Q4_K_M"))
    out = refused(path, "tiny-q4_k_m", "Q4_K_M,Q2_K")
    assert (f"make this ladder here with `abricot-local quantize tiny-q4_k_m --to Q4_K_M,Q2_K --models "
            f"{shell_word(str(path))} --allow-requantize` (tiny-q4_k_m is a Q4_K_M:") in out, out
    out = refused(models(files(tmp_path, "Q4_K_M", "F16")), "tiny-q4_k_m", "Q4_K_M,Q2_K")  # unquantized: as it is
    assert f"`abricot-local quantize tiny-f16 --to Q4_K_M,Q2_K --models {shell_word(str(path))}`, which" in out, out


def test_a_shipped_entry_needs_no_models_file(models):
    out = refused(models(""), "gemma-3-270m", "Q4_K_M,Q3_K_M")
    assert "`abricot-local quantize gemma-3-270m --to Q4_K_M,Q3_K_M --allow-requantize`" in out, out
    assert "--models" not in out


def test_no_rung_above_the_source_is_advised(tmp_path, models):
    path = models(files(tmp_path, "Q4_K_M"))
    out = refused(path, "tiny-q4_k_m", "Q4_K_M,Q8_0")  # the one rung to make is above: no command at all
    assert "quantize" not in out, out
    assert ("Q8_0 is above Q4_K_M, the highest precision the registry has of Tiny: made from tiny-q4_k_m, it would "
            "be its Q4_K_M in disguise") in out and "a higher quant needs a higher-precision source" in out
    out = refused(path, "tiny-q4_k_m", "F16,Q8_0,Q4_K_M,Q2_K")  # the rungs at or below it: made; those above: said
    assert ("make its rungs up to Q4_K_M here with `abricot-local quantize tiny-q4_k_m --to Q4_K_M,Q2_K --models "
            f"{shell_word(str(path))} --allow-requantize`") in out, out
    assert out.endswith("F16, Q8_0 are above Q4_K_M, the highest precision the registry has of Tiny: made from "
                        "tiny-q4_k_m, each would be its Q4_K_M in disguise (no more than its weights hold); a higher "
                        "quant needs a higher-precision source (an F16, BF16 or F32 GGUF of the model, or a higher "
                        'quant: add its entry to your models.toml with `base = "Tiny"` and its `quant`)'), out


def test_a_synthetic_entry_gets_no_quantize_command(models):
    fake = "".join(f'[fake-{q.lower()}]\nbackend = "fake"\nbase = "fakebase"\nquant = "{q}"\n\n' for q in ("Q8_0",
                                                                                                           "Q2_K"))
    out = refused(models(fake), "fake-q2_k", "Q8_0,Q4_K_M")
    assert out.endswith("the registry has no Q4_K_M of fakebase; it has Q8_0, Q2_K (models.toml `base = "
                        '"fakebase"`)'), out


def test_the_python_api_prints_the_models_file_as_the_shell_command_does(tmp_path, models):
    path = models(files(tmp_path, "Q8_0"))
    with pytest.raises(UsageError) as caught:
        ladder("tiny-q8_0", ("Q4_0",), load_registry(path))
    said = str(caught.value)
    assert f"quantize tiny-q8_0 --to Q4_0 --models {shell_word(str(path))} --allow-requantize`" in said, said
    assert "models_file" not in said


def test_a_store_reference_gets_the_plain_refusal(models):
    ref = "hf:unsloth/gemma-3-270m-it-GGUF/gemma-3-270m-it-Q4_K_M.gguf"
    out = refused(models(""), ref, "Q8_0,Q4_K_M")
    assert out == f"error: --quants: {ref} {PLAIN}", out


def test_a_missing_file_is_said_missing_and_a_file_not_gguf_gets_the_plain_refusal(tmp_path, models):
    path = models("")
    gone = tmp_path / "gone" / "tiny-Q4_K_M.gguf"
    out = refused(path, str(gone), "Q8_0")
    assert f"there is no file {gone} here, and it is neither a registry alias nor a registry `base`" in out, out
    assert "is a model file" not in out and "beside" not in out
    out = refused(path, str(path), "Q8_0")  # a file here, no GGUF: no ladder of files to advise
    assert out == f"error: --quants: {path} {PLAIN}", out
