"""A ladder `quantize` wrote, missing a quant `run --quants` asks for: the advice is a `quantize` command that, run
as printed, adds only the missing rungs to that ladder (its SOURCE as its models.toml records it, `from_sha256`;
its folder; --allow-requantize where the SOURCE is quantized), the same shell command in every door; a file
ladder's base is its names less the quant tag only (quantize's `x-q4_1-dequantized-f16` is `x-q4_1-dequantized`'s
F16 rung); `run FILE --quants` names the models.toml quantize wrote beside the file. On tiny Llama GGUFs
(tests/tiny_llama.py) that llama.cpp's quantizer writes in milliseconds."""

from __future__ import annotations

import shlex

import pytest
from click.testing import CliRunner

from abricot_local import hashing
from abricot_local.cli import cli
from abricot_local.errors import UsageError
from abricot_local.gguf.file import strip_quant
from abricot_local.models.quantize import make_ladder
from abricot_local.models.quants import expand, ladder
from abricot_local.models.registry import load_registry
from tiny_llama import write_tiny


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def refusal(*args) -> str:
    r = invoke(*args)
    assert r.exit_code == 2, r.output
    return " ".join(r.output.split())  # the error folded to the terminal's width, read as one line


def advised(text: str) -> list[str]:
    """The `quantize` command the refusal says adds the missing rungs, as words (less the program's name)."""
    assert "to this ladder with `abricot-local quantize " in text, text
    words = shlex.split(text.split("to this ladder with `", 1)[1].split("`", 1)[0])
    assert words[0] == "abricot-local"
    return words[1:]


@pytest.fixture
def source(tmp_path):
    """A Q8_0 model (its weights quantized) named `tinyq` in the user's models.toml, with its SHA-256, as the
    shipped registry names its files; and the rungs quantize made of it with --allow-requantize."""
    q8 = make_ladder(str(write_tiny(tmp_path / "w" / "tiny-f16.gguf")), "Q8_0", out=str(tmp_path / "w")).rungs[0]
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "models.toml").write_text(
        f'[tinyq]\nsource = "local"\npath = "{q8.path}"\nsha256 = "{q8.sha256}"\nquant = "Q8_0"\n', encoding="utf-8")
    r = invoke("quantize", "tinyq", "--to", "F16,Q8_0,Q2_K", "--allow-requantize", "--out", tmp_path / "rungs")
    assert r.exit_code == 0, r.output
    return tmp_path / "rungs"


def test_the_advice_run_as_printed_adds_the_missing_rungs_to_this_ladder(source):
    toml = source / "models.toml"
    out = refusal("run", "tinyq-q8_0-dequantized-f16", "--quants", "F16,Q4_0", "--models", toml, "--tasks",
                  "discotex", "--dry-run")
    # the SOURCE as recorded (not the F16 rung), only the quant missing, this ladder's folder, requantizing
    assert advised(out) == ["quantize", "tinyq", "--to", "Q4_0", "--out", str(source), "--allow-requantize"], out
    assert "each new rung is made from its F16 rung, the Q8_0 dequantized" in out, out
    r = invoke(*advised(out))
    assert r.exit_code == 0, r.output
    assert "F16: " in r.output and "kept" in r.output  # the ladder's reference, not written again
    reg = load_registry(toml)
    rungs = {s.quant: s for s in reg.values() if s.base == "tinyq-q8_0-dequantized"}
    assert sorted(rungs) == ["F16", "Q2_K", "Q4_0", "Q8_0"], sorted(reg)  # one ladder: the new rung joined it
    assert len({s.from_sha256 for s in rungs.values()}) == 1
    assert expand(["tinyq-q8_0-dequantized-f16"], "F16,Q4_0", reg) == ("tinyq-q8_0-dequantized-f16",
                                                                      "tinyq-q8_0-dequantized-q4_0")


def test_an_unquantized_source_s_ladder_and_one_the_registry_cannot_name(tmp_path):
    f16 = write_tiny(tmp_path / "w" / "tinyf.gguf", seed=2)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "models.toml").write_text(
        f'[tinyf]\nsource = "local"\npath = "{f16}"\nsha256 = "{hashing.sha256_file(f16)}"\nquant = "F16"\n',
        encoding="utf-8")
    make_ladder("tinyf", "Q8_0,Q4_0", out=str(tmp_path / "rungs"))
    toml = tmp_path / "rungs" / "models.toml"
    out = refusal("run", "tinyf-q8_0", "--quants", "Q8_0,Q2_K", "--models", toml, "--tasks", "discotex", "--dry-run")
    assert advised(out) == ["quantize", "tinyf", "--to", "Q2_K", "--out", str(tmp_path / "rungs")], out
    assert "allow-requantize" not in out
    # a ladder made from a file no registry entry names: the file said by its SHA-256, given as it was then
    other = write_tiny(tmp_path / "w" / "other-f16.gguf", seed=3)
    make_ladder(str(other), "Q8_0", out=str(tmp_path / "more"))
    with pytest.raises(UsageError) as err:
        ladder("other-q8_0", ("Q4_0",), load_registry(tmp_path / "more" / "models.toml"))
    said = str(err.value)  # the Python API: the same shell command, never keywords
    words = advised(said)
    assert words == ["quantize", "SOURCE", "--to", "Q4_0", "--out", str(tmp_path / "more")], said
    assert f"SHA-256 {hashing.sha256_file(other)[:12]}..." in said and "to=" not in said
    words[1] = str(other)
    assert invoke(*words).exit_code == 0
    assert load_registry(tmp_path / "more" / "models.toml")["other-q4_0"].base == "other"


def test_the_python_api_prints_the_shell_command_the_cli_prints(tmp_path):
    (tmp_path / "m.toml").write_text('[tiny-q4_k_m]\nsource = "local"\npath = "tiny-Q4_K_M.gguf"\nquant = "Q4_K_M"\n'
                                     'base = "Tiny"\n', encoding="utf-8")
    with pytest.raises(UsageError) as err:
        ladder("tiny-q4_k_m", ("Q3_K_M",), load_registry(tmp_path / "m.toml"))
    assert (f"`abricot-local quantize tiny-q4_k_m --to Q3_K_M --models {tmp_path / 'm.toml'} --allow-requantize`"
            in str(err.value)), str(err.value)


def test_a_file_ladder_s_base_is_its_names_less_the_quant_tag():
    assert strip_quant("smollm2-135m-pypi-q4_1-dequantized-f16") == "smollm2-135m-pypi-q4_1-dequantized"
    assert strip_quant("smollm2-135m-pypi-q4_1-dequantized-q2_k") == "smollm2-135m-pypi-q4_1-dequantized"
    assert strip_quant("gemma-3-270m-it-Q4_K_M") == "gemma-3-270m-it"
    assert strip_quant("model-Q8_0-extra") == "model-extra"  # a tag inside the name: one separator left
    assert strip_quant("Qwen2.5-0.5B-Instruct.Q4_K_M") == "Qwen2.5-0.5B-Instruct"
    # a tag the name still ends with goes too: a Q8_0 made from model-f16 is the same model's rung as model-f16
    assert strip_quant("model-f16-q8_0") == strip_quant("model-f16") == "model"
    assert strip_quant("f16") == "f16"  # a name that is only a tag stays


def test_a_file_given_with_quants_names_the_models_toml_quantize_wrote_beside_it(source):
    f16 = source / "tinyq-q8_0-dequantized-f16.gguf"
    out = refusal("run", f16, "--quants", "Q2_K", "--tasks", "discotex", "--dry-run")
    assert (f"`abricot-local run tinyq-q8_0-dequantized-f16 --quants F16,Q2_K --models {source / 'models.toml'}`"
            in out), out
    assert f"`abricot-local run {f16} {source / 'tinyq-q8_0-dequantized-q2_k.gguf'}`" in out, out
