"""lm-eval outputs made with --apply_chat_template, and exports of runs made with a chat template, read back
as runs (analysis/lm_eval_match.py): each item matched to the task's item wrapped in the recorded template's
user turn, so the read-back samples carry the text the model saw (the run's own scored context) and the run
records the chat template as a `run --chat-template` does; what no run scores is refused in one line.

Real lm-eval (0.4.x) runs the shipped ABRICOT tasks through abricot-local's lm-eval model on the fake backend
(a ChatML-like template), 2 items each; `run` scores the same items with --chat-template.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

# lm-eval reads its data through `datasets`, which reads these when first imported (its cache: conftest.py)
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

import pytest  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from abricot_local.cli import cli  # noqa: E402
from abricot_local.errors import ResultsError  # noqa: E402
from conftest import ours_only, require_lm_eval as _lm_eval  # noqa: E402
from test_lm_eval_export import _invoke, lm_eval_folder  # noqa: E402

FAKE = ("--backend", "fake", "--n-ctx", "4096")
RUNS = {"paper": ("abricot_abs", "abricot_inc"), "calamita": ("abricot_abs@calamita", "abricot_inc@calamita")}
LM = {  # an lm-eval output's name: its arguments (all with --apply_chat_template)
    "single": ("--tasks", "abricot_paper,abricot_calamita", "--fewshot_as_multiturn", "false"),
    "multi": ("--tasks", "abricot_paper"),  # lm-eval's default under a chat template: the shots as turns
    "card": ("--tasks", "discotex_card"),  # its description: a system turn
}


@pytest.fixture(scope="module")
def chat(abricot_file, discotex_dir, tmp_path_factory):
    """The lm-eval outputs (LM), the runs with --chat-template under each protocol (RUNS), each run exported."""
    with lm_eval_folder("chat_readback", abricot_file, discotex_dir, tmp_path_factory) as (folder, data):
        for name, args in LM.items():
            _invoke("lm-eval", "fake", "--model_args", "backend=fake,n_ctx=4096", *args, "--apply_chat_template",
                    "--limit", 2, "--metadata", json.dumps({"data_dir": str(data)}), "--log_samples",
                    "--output_path", folder / "lm" / name)
        for name in RUNS:
            _invoke("run", "fake", *FAKE, "--tasks", "abricot_abs,abricot_inc", "--protocol", name, "--chat-template",
                    "--data-dir", data, "--limit", 2, "--out", folder / name)
            _invoke("report", folder / name, "--format", "lm-eval", "-o", folder / "export" / name)
    return folder, data


def _out(folder: Path) -> Path:
    (results,) = folder.rglob("results_*.json")
    return results.parent


def _scored(run, key: str) -> list:
    from abricot_local.analysis.items import scored_key

    return [(s.id, scored_key(s.context, s.continuations), s.context, s.continuations, s.logprobs, s.gold)
            for s in run.samples_of(key)]


def _same_as_the_run(back, run, keys) -> None:
    """Every item as the run scored it (id, the SHA-256 of the text scored, the texts, the numbers), the chat
    template recorded as the run records it, the task's config the run's (but the lm-eval task a run of lm-eval
    names; an export, read back as the run, names none)."""
    for key in keys:
        assert _scored(back, key) == _scored(run, key), key
        own = dict(back.record.tasks[key].config)
        own.pop("lm_eval_task", None)
        assert own == dict(run.record.tasks[key].config), key  # chat_template true
    assert back.record.config_dict()["chat_template"] is True is run.record.config_dict()["chat_template"]
    assert back.record.provenance.chat_template == run.record.provenance.chat_template is not None


def _compare(a: Path, b: Path, data: Path, keys) -> dict:
    doc = json.loads(_invoke("compare", a, b, "--data-dir", data, "--format", "json"))
    assert [(m["task"], m["n_common"], m["n_context_differs"]) for m in doc["matches"]] == [(k, 2, 0) for k in keys]
    assert [v["kind"] for v in doc["verdicts"]] == ["identical"]  # one verdict per pair of runs
    chat = ("chat_template", "provenance.chat_template", *(f"{k}.config.chat_template" for k in keys))
    assert not [d for d in doc["settings_differ"] if d["key"].startswith(chat)], doc["settings_differ"]
    return doc


@pytest.mark.parametrize("protocol", list(RUNS))
def test_an_export_of_a_chat_template_run_reads_back_as_the_run(chat, protocol):
    """report --format lm-eval of a --chat-template run (the paper's 3 shots, the leaderboard's 0) reads back
    with the run's items, scored texts and chat template (was: refused, no item matched)."""
    from abricot_local.analysis.loading import load_run

    folder, data = chat
    back = load_run(_out(folder / "export" / protocol), data_dir=str(data))
    run = load_run(folder / protocol)
    assert back.tasks == RUNS[protocol]
    _same_as_the_run(back, run, RUNS[protocol])
    assert back.samples_of(RUNS[protocol][0])[0].context.startswith("<|user|>\n")  # the turn, not the bare prompt
    _compare(folder / protocol, _out(folder / "export" / protocol), data, RUNS[protocol])


def test_real_lm_eval_with_apply_chat_template_reads_back_as_the_chat_run(chat):
    """lm-eval 0.4.13 --apply_chat_template --fewshot_as_multiturn false: its contexts are the run's texts in
    the template's user turn, its continuations without the space; read back as the runs' items."""
    from abricot_local.analysis.loading import load_run

    folder, data = chat
    back = load_run(_out(folder / "lm" / "single"), data_dir=str(data))
    doc = json.loads(next((folder / "lm" / "single").rglob("results_*.json")).read_text(encoding="utf-8"))
    assert doc["chat_template"] == "<|user|>\n{message}<|end|>\n<|assistant|>\n" and not doc["fewshot_as_multiturn"]
    assert back.tasks == (*RUNS["paper"], *RUNS["calamita"])
    for protocol, keys in RUNS.items():
        run = load_run(folder / protocol)
        _same_as_the_run(back.only(*keys), run, keys)
        _compare(folder / protocol, _out(folder / "lm" / "single"), data, keys)
    assert back.samples_of("abricot_abs")[0].continuations == ("1", "2", "3", "4", "5")


def _edited(folder: Path, tmp_path: Path, **keys) -> Path:
    copy = tmp_path / "edited"
    shutil.copytree(_out(folder), copy)
    (path,) = copy.glob("results_*.json")
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc.update(keys)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return copy


def _refusal(folder: Path, data: Path) -> str:
    from abricot_local.analysis.loading import load_run

    with pytest.raises(ResultsError) as err:
        load_run(folder, data_dir=str(data))
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_template_recorded_as_jinja_is_found_from_the_contexts(chat, tmp_path):
    """lm-eval's hf model records the template's Jinja source, no {message}: the user turn is found from the
    contexts (each item of the task inside it alike), the items read back the same."""
    from abricot_local.analysis.loading import load_run

    folder, data = chat
    jinja = "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}<|assistant|>\n"
    edited = _edited(folder / "lm" / "single", tmp_path, chat_template=jinja)
    back = load_run(edited, data_dir=str(data))
    want = load_run(_out(folder / "lm" / "single"), data_dir=str(data))
    for key in back.tasks:
        assert _scored(back, key) == _scored(want, key), key
    assert back.record.provenance.chat_template == want.record.provenance.chat_template


@pytest.mark.parametrize("recorded", ["template", "jinja"])
def test_a_template_that_trims_the_prompt_reads_with_the_text_lm_eval_scored(chat, tmp_path, recorded):
    """A template that trims the message (Gemma 3's `| trim`) holds each prompt without its outer whitespace
    (as a run renders it through that template: test_lm_eval's real chat run): read with the text lm-eval scored;
    the fake backend's run, whose template does not trim, scored other texts (the leaderboard's prompt ends in a
    newline), so compare finds no item scored alike."""
    from abricot_local.analysis.loading import load_run

    folder, data = chat
    head, tail = "<|user|>\n", "<|end|>\n<|assistant|>\n"
    jinja = "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] | trim }}<|end|>\n{% endfor %}<|assistant|>\n"
    edited = _edited(folder / "lm" / "single", tmp_path, **({"chat_template": jinja} if recorded == "jinja" else {}))
    for samples in edited.glob("samples_*.jsonl"):
        rows = [json.loads(x) for x in samples.read_text(encoding="utf-8").splitlines()]
        for row in rows:
            for a in row["arguments"].values():
                assert a["arg_0"].startswith(head) and a["arg_0"].endswith(tail)
                a["arg_0"] = head + a["arg_0"][len(head):-len(tail)].strip() + tail
        samples.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    back = load_run(edited, data_dir=str(data))
    run = load_run(folder / "calamita")
    for key in RUNS["calamita"]:
        got, want = back.samples_of(key), run.samples_of(key)
        assert [(s.id, s.logprobs, s.continuations) for s in got] == [(s.id, s.logprobs, s.continuations) for s in want]
        trimmed = [head + s.context[len(head):-len(tail)].strip() + tail for s in want]
        assert [s.context for s in got] == trimmed != [s.context for s in want]
    assert back.record.provenance.chat_template == run.record.provenance.chat_template
    r = CliRunner().invoke(cli, ["compare", str(folder / "calamita"), str(edited), "--data-dir", str(data)])
    assert r.exit_code != 0 and "no common items (same id and same scored context)" in r.output, r.output


def test_what_no_run_scored_is_refused_in_one_line(chat, tmp_path):
    """Shots as chat turns (lm-eval's default), a task's description or a system instruction in a system turn,
    and contexts that are not the recorded template's user turn: refused, saying why and what to run."""
    folder, data = chat
    why = _refusal(_out(folder / "lm" / "multi"), data)
    assert "abricot_abs_paper" in why and "fewshot_as_multiturn" in why and "--fewshot_as_multiturn false" in why
    assert "chat_template=True" in why  # the option as the Python API names it
    why = _refusal(_out(folder / "lm" / "card"), data)
    assert "discotex_card" in why and "description in a system turn" in why
    why = _refusal(_edited(folder / "lm" / "single", tmp_path / "s", system_instruction="Sei un esperto."), data)
    assert "system instruction ('Sei un esperto.')" in why and "without --system_instruction" in why
    other = "<|utente|>\n{message}<|end|>\n<|assistant|>\n"  # a template that is not the one the contexts hold
    why = _refusal(_edited(folder / "lm" / "single", tmp_path / "o", chat_template=other), data)
    assert "in the user turn of the chat template it recorded" in why and "cannot read lm-eval task" in why
    why = _refusal(_edited(folder / "lm" / "single", tmp_path / "n", chat_template=7), data)
    assert "its chat_template is int" in why
    r = CliRunner().invoke(cli, ["compare", str(folder / "paper"), str(_out(folder / "lm" / "multi")),
                                 "--data-dir", str(data)])
    assert r.exit_code != 0 and "cannot read lm-eval task abricot_abs_paper" in r.output, r.output
    assert "--fewshot_as_multiturn false" in r.output


def test_the_wrap_is_a_runs_and_no_template_reads_as_before():
    """wrapped: the run's rule (head + context + tail, special tokens parsed, continuations without their
    space); chat_of: no template (null, false, "") is None, a {message} template split at it."""
    from abricot_local.analysis.lm_eval_match import Chat, chat_of, wrapped
    from abricot_local.tasks.base import Item

    it = Item(id="1", source="s", context="Q: x", choices=("a", "b"), continuations=(" a", " b"), gold=0)
    (w,) = wrapped([it], "<u>", "</u><a>")
    assert (w.context, w.continuations, w.parse_special, w.id, w.gold) == ("<u>Q: x</u><a>", ("a", "b"), True, "1", 0)
    for none in (None, False, ""):
        assert chat_of({"chat_template": none}, "f") is None
    assert chat_of({}, "f") is None
    assert chat_of({"chat_template": "<u>{message}</u>"}, "f") == Chat("<u>{message}</u>", "<u>", "</u>")
    assert chat_of({"chat_template": "{{ messages }}"}, "f") == Chat("{{ messages }}")


# -- a real model -----------------------------------------------------------------------------------
@pytest.mark.real
def test_real_model_lm_eval_chat_output_compares_bit_identical_with_the_chat_run(smollm2_path, abricot_file,
                                                                                  tmp_path):
    """SmolLM2-135M-Instruct's own chat template (ChatML, with its default system turn; no trim), the
    leaderboard's 0-shot prompts through real lm-eval --apply_chat_template and through `run --chat-template`:
    the same scored texts, paired item by item, every log-likelihood bit-identical."""
    _lm_eval()
    data = tmp_path / "data"
    data.mkdir()
    (data / abricot_file.name).symlink_to(abricot_file)
    model = ("--n-ctx", 1024, "--threads", 1)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        ours_only(mp)
        _invoke("lm-eval", smollm2_path, "--model_args", "n_ctx=1024,threads=1", "--tasks", "abricot_calamita",
                "--apply_chat_template", "--limit", 2, "--metadata", json.dumps({"data_dir": str(data)}),
                "--log_samples", "--output_path", tmp_path / "lm")
        _invoke("run", smollm2_path, *model, "--tasks", "abricot_abs,abricot_inc", "--protocol", "calamita",
                "--chat-template", "--data-dir", data, "--limit", 2, "--out", tmp_path / "run")
    from abricot_local.analysis.loading import load_run

    back, run = load_run(_out(tmp_path / "lm"), data_dir=str(data)), load_run(tmp_path / "run")
    _same_as_the_run(back, run, RUNS["calamita"])
    assert back.samples_of("abricot_abs@calamita")[0].context.startswith("<|im_start|>system\n")
    doc = _compare(tmp_path / "run", _out(tmp_path / "lm"), data, RUNS["calamita"])
    assert [a["max_abs_delta"] for a in doc["agreement"]] == [0.0] * len(RUNS["calamita"])


def test_report_skips_what_no_run_scored_in_the_commands_words(chat):
    """`report` leaves out an lm-eval output it cannot read, in one note naming the option as the command line
    spells it (--chat-template, not the API's chat_template=True)."""
    folder, data = chat
    r = CliRunner().invoke(cli, ["report", str(folder / "paper"), str(_out(folder / "lm" / "multi")),
                                 "--data-dir", str(data)])
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("note: skipped")]
    assert len(notes) == 1 and "--chat-template" in notes[0] and "chat_template=True" not in notes[0], r.stderr
