"""The Python API's refusals in the API's words: the run of files that a model file given with ``quants`` is told
to make is the API's own call (``abricot_local.plan([...])`` from plan, ``evaluate`` from evaluate: errors.call), the
command line's text unchanged; lm-eval's own options (reading an lm-eval output made with a chat template, lm-eval's
model asked for a template by name, a model with no template) named in both of lm-eval's doors, its command line's
flag and simple_evaluate's keyword, since the message cannot know which one the user ran."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import abricot_local as al
from abricot_local.cli import cli
from abricot_local.errors import AbricotError, UsageError, shell_line
from abricot_local.models.quant_folder import FRAGMENT, HEAD


@pytest.fixture
def rungs(tmp_path):
    for q in ("Q4_K_M", "Q8_0"):
        (tmp_path / f"tiny-{q}.gguf").write_bytes(b"")  # never opened: the refusal comes first
    return tmp_path


def _refusal(call, *args, **kwargs) -> str:
    with pytest.raises(UsageError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


def test_a_file_given_with_quants_is_told_the_api_call_that_runs_the_files(rungs):
    given, other = str(rungs / "tiny-Q4_K_M.gguf"), str(rungs / "tiny-Q8_0.gguf")
    said = _refusal(al.plan, given, "discotex", quants=["Q8_0"])
    assert f"without quants (`abricot_local.plan([{given!r}, {other!r}])`, with your other options)" in said, said
    assert "abricot-local run" not in said and not re.search(r"(?<![\w-])--\w", said), said  # no flag
    said = _refusal(al.evaluate, given, "discotex", quants="Q8_0,Q2_K")  # a rung not beside it: placeholders
    assert "(`abricot_local.evaluate([FILE, FILE, ...])`, with your other options)" in said, said
    assert said.endswith("; no Q2_K file of that name is beside it"), said
    r = CliRunner().invoke(cli, ["run", given, "--quants", "Q8_0", "--tasks", "discotex", "--dry-run"])
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and f"without --quants (`abricot-local run {shell_line([given, other])}`, with your " \
        "other options)" in out, r.output  # the command line's text, as before


def test_the_ladder_quantize_wrote_beside_the_file_is_the_api_call_too(rungs):
    toml = rungs / FRAGMENT
    toml.write_text(f'{HEAD}\n[tiny-q4_k_m]\npath = "tiny-Q4_K_M.gguf"\nbase = "Tiny"\nquant = "Q4_K_M"\n',
                    encoding="utf-8")
    said = _refusal(al.evaluate, str(rungs / "tiny-Q4_K_M.gguf"), "discotex", quants=["Q8_0"])
    assert (f"(`abricot_local.evaluate('tiny-q4_k_m', quants=['Q4_K_M', 'Q8_0'], models_file={str(toml)!r})`, "
            "with your other options)") in said, said
    r = CliRunner().invoke(cli, ["run", str(rungs / "tiny-Q4_K_M.gguf"), "--quants", "Q8_0", "--dry-run"])
    assert f"`abricot-local run tiny-q4_k_m --quants Q4_K_M,Q8_0 --models {toml}`" in " ".join(r.output.split())


def _lm_eval_output(folder, **doc) -> str:
    folder.mkdir()
    stamp = "2026-01-01T00-00-00"
    results = {"results": {"discotex_card": {}}, "chat_template": "<u>{message}</u>", "date": 1767225600.0, **doc}
    (folder / f"results_{stamp}.json").write_text(json.dumps(results), encoding="utf-8")
    (folder / f"samples_discotex_card_{stamp}.jsonl").write_text("", encoding="utf-8")
    return str(folder)


@pytest.mark.parametrize("doc, both", [
    ({"configs": {"discotex_card": {"description": "Rispondi."}}},
     ["under --apply_chat_template (simple_evaluate's apply_chat_template) lm-eval puts"]),
    ({"configs": {"discotex_card": {"num_fewshot": 2}}, "fewshot_as_multiturn": True},
     ["its default under --apply_chat_template (simple_evaluate's apply_chat_template)",
      "with --fewshot_as_multiturn false (simple_evaluate's fewshot_as_multiturn=False) to compare it"]),
    ({"system_instruction": "Sei un esperto."},
     ["without --system_instruction (simple_evaluate's system_instruction) to compare it"]),
])
def test_an_lm_eval_output_read_back_names_lm_evals_options_in_both_its_doors(tmp_path, doc, both):
    with pytest.raises(AbricotError) as caught:
        al.load_run(_lm_eval_output(tmp_path / "lm", **doc))
    said = str(caught.value)
    assert all(b in said for b in both), said
    assert "chat_template=True" in said  # ours, as the API names it


def test_lm_evals_model_and_the_backend_name_apply_chat_template_in_both_doors():
    pytest.importorskip("lm_eval")
    from abricot_local.lm_eval.model import AbricotLM

    with pytest.raises(UsageError) as caught:
        AbricotLM.chat_template(None, "chatml")  # a template by name: refused before the model is asked
    assert str(caught.value).endswith("give no template name, --apply_chat_template (simple_evaluate's "
                                      "apply_chat_template=True)"), caught.value
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend

    none = SimpleNamespace(session=SimpleNamespace(chat_template=lambda: ""), path=SimpleNamespace(name="m.gguf"))
    with pytest.raises(UsageError) as caught:
        LlamaCppBackend.render_chat(none, [{"role": "user", "content": "x"}])
    assert str(caught.value).endswith("run without chat_template, lm-eval without --apply_chat_template "
                                      "(simple_evaluate's apply_chat_template)"), caught.value
