"""`run --quants` refusals point where the docs point (docs/compare.md): a quant the registry lacks -> the `quantize`
command that makes the ladder here (requantizing a quantized source: --allow-requantize), and a model file given
with --quants -> give the files as MODELs, the ones beside it listed."""

from __future__ import annotations

from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.errors import UsageError, shell_line
from abricot_local.models.quants import ladder
from abricot_local.models.registry import load_registry


def entries(*quants: str) -> str:
    """Entries of base Tiny, each a local .gguf (quantize's SOURCE is a GGUF file; never opened here)."""
    return "".join(f'[tiny-{q.lower()}]\nsource = "local"\npath = "tiny-{q}.gguf"\nquant = "{q}"\nbase = "Tiny"\n'
                   'n_ctx = 8192\n\n' for q in quants)


def refused(tmp_path, model: str, quants: str, registry: str = "") -> str:
    models = tmp_path / "models.toml"  # its own --models is carried: `quantize ... --models <it>`
    models.write_text(registry or entries("Q4_K_M"), encoding="utf-8")
    r = CliRunner().invoke(cli, ["run", model, "--quants", quants, "--models", str(models), "--tasks", "discotex",
                                 "--dry-run"])
    assert r.exit_code == 2, r.output
    return " ".join(r.output.split())  # the error folded to the terminal's width, read as one line


def test_a_quant_the_registry_lacks_says_the_quantize_command_that_makes_the_ladder(tmp_path):
    out = refused(tmp_path, "tiny-q4_k_m", "Q4_K_M,q2_k")
    assert "the registry has no q2_k of Tiny; it has Q4_K_M" in out, out
    # one quant here, a quantized one: requantize it, every quant asked for (the new ladder holds them all)
    assert (f"`abricot-local quantize tiny-q4_k_m --to Q4_K_M,Q2_K --models {tmp_path / 'models.toml'} "
            "--allow-requantize` (tiny-q4_k_m is a Q4_K_M:") in out, out
    assert "docs/compare.md#making-the-rungs-quantize" in out


def test_the_source_is_the_model_s_highest_precision_quant(tmp_path):
    out = refused(tmp_path, "tiny-q4_k_m", "Q4_K_M,Q2_K", entries("Q4_K_M", "Q8_0"))
    models = tmp_path / "models.toml"
    assert (f"`abricot-local quantize tiny-q8_0 --to Q4_K_M,Q2_K --models {models} --allow-requantize` (tiny-q8_0 is "
            "a Q8_0:") in out, out
    # an unquantized entry: nothing to requantize
    out = refused(tmp_path, "tiny-q4_k_m", "Q4_K_M,Q2_K", entries("Q4_K_M", "F16"))
    assert f"`abricot-local quantize tiny-f16 --to Q4_K_M,Q2_K --models {models}`, which prints the command that" \
        in out, out
    assert "allow-requantize" not in out


def test_a_name_llama_cpp_does_not_write_gets_no_quantize_command(tmp_path):
    out = refused(tmp_path, "tiny-q4_k_m", "Q4_K_M,Q9")
    assert "the registry has no Q9 of Tiny; it has Q4_K_M" in out and "quantize" not in out, out


def test_the_python_api_prints_the_same_shell_command(tmp_path):
    models = tmp_path / "models.toml"
    models.write_text(entries("Q4_K_M"), encoding="utf-8")
    try:
        ladder("tiny-q4_k_m", ("Q3_K_M",), load_registry(models))
    except UsageError as err:
        said = str(err)
    else:
        raise AssertionError("not refused")
    assert f"quantize tiny-q4_k_m --to Q3_K_M --models {models} --allow-requantize`" in said, said  # a shell command
    assert "to=" not in said and "models_file" not in said  # is one in every door (errors.command)


def test_a_model_file_given_with_quants_lists_the_files_that_make_the_ladder(tmp_path):
    there = tmp_path / "h m"  # a space: the paths are quoted as a shell reads them back
    there.mkdir()
    for q in ("F16", "Q8_0", "Q4_K_M"):
        (there / f"gemma-x-{q}.gguf").write_bytes(b"")
    (there / "other-Q8_0.gguf").write_bytes(b"")  # another model's: not listed
    f16 = there / "gemma-x-F16.gguf"
    out = refused(tmp_path, str(f16), "F16,q8_0")
    files = shell_line([str(f16), str(there / "gemma-x-Q8_0.gguf")])
    assert f"is a model file: to run files as a ladder, give each as a MODEL, without --quants " \
           f"(`abricot-local run {files}`, with your other options)" in out, out
    assert "neither a registry alias" not in out and "docs/compare.md#a-quant-ladder-run---quants-and-report" in out
    out = refused(tmp_path, str(f16), "F16,Q2_K")  # a quant with no file beside it: said, no command made up
    assert "(`abricot-local run FILE FILE ...`, with your other options)" in out, out
    assert out.endswith("; no Q2_K file of that name is beside it"), out
