"""`abricot-local lm-eval` in its own words, and lm-eval outputs read with the settings they record.

Through real lm-eval (0.4.x) on the fake backend: an error names an option as this command takes it
(``--metadata``, ``--model_args``), never as `run`'s flags; lm-eval's own reading of its arguments
fails in one line; a model_args switch takes a bool word only. An lm-eval output of the shipped
tasks records the task options the `run` scoring the same texts records (docs/lm-eval.md), so the
two compare as equal settings; an export of a `--sample` run reads back as one.
"""

from __future__ import annotations

import json
import os

# lm-eval reads its data through `datasets`, which reads these when first imported (its cache: conftest.py)
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

import pytest  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from abricot_local.cli import cli  # noqa: E402
from conftest import ours_only, require_lm_eval as _lm_eval  # noqa: E402
from test_lm_eval_export import _invoke  # noqa: E402

TASK_OPTIONS = ("shots", "prompt_variant", "protocol", "chat_template", "shot_sampler")


@pytest.fixture(autouse=True)
def _ours_only(monkeypatch):
    """lm-eval's CLI indexes its own thousands of task files first; only the shipped ones are run here."""
    _lm_eval()
    ours_only(monkeypatch)


def _lm_eval_says(*args) -> str:
    r = CliRunner().invoke(cli, ["lm-eval", "fake", "--tasks", "discotex_card", "--limit", "1", *map(str, args)])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output + repr(r.exception)
    return r.output[r.output.index("error: "):]


def test_errors_name_the_options_as_lm_eval_takes_them(tmp_path):
    fake = ("--model_args", "backend=fake,n_ctx=512")
    said = _lm_eval_says(*fake)  # no DISCOTEX data here: how to give it is --metadata's, not run's --data-dir
    assert """offline: --metadata '{"data_dir": DIR}'""" in said and "--data-dir" not in said
    said = _lm_eval_says(*fake, "--metadata", json.dumps({"data": {"discotexx": str(tmp_path)}}))
    assert said.startswith("""error: --metadata '{"data": {"discotexx": ...}}' (simple_evaluate's TaskManager("""
                           """metadata={"data": {"discotexx": ...}})): no task reads data named""")
    assert "Did you mean: discotex?" in said and "--data " not in said
    said = _lm_eval_says("--model_args", "backend=fake,n_ctx=tanti")
    assert said.startswith("error: model_args n_ctx: expected an integer, got 'tanti'") and "--n-ctx" not in said
    said = _lm_eval_says("--model_args", "backend=fake,force=maybe")  # accepted as force=True before
    assert said.startswith("error: model_args force: expected true or false, got 'maybe'")
    for bad in (["--metadata", "{data_dir: x}"], ["--model_args", "{backend: fake}"]):  # lm-eval's traceback before
        said = _lm_eval_says(*bad)
        assert said.startswith("error: lm-eval could not read its arguments: Invalid JSON: {") and \
            len(said.strip().splitlines()) == 1, said


def test_a_model_args_switch_takes_bool_words():
    from abricot_local.lm_eval import requests as lm_requests

    for word, want in (("true", True), ("1", True), ("no", False), (False, False), (None, False)):
        assert lm_requests.request_of({"model": "fake", "backend": "fake", "force": word}).force is want
    from abricot_local.errors import UsageError, render

    with pytest.raises(UsageError) as err:
        lm_requests.request_of({"model": "fake", "backend": "fake", "force": "maybe"})
    assert render(err.value.raw(), lm_requests.model_arg) == "model_args force: expected true or false, got 'maybe'"


def _same_settings(lm_dir, run_dir, data_dir, want: dict) -> None:
    """The lm-eval output records ``want`` as its task options, compare finds no task option differing, and
    the labels name none (the same items, the same numbers: the fake backend through both doors)."""
    from abricot_local.analysis.loading import load_run

    lm = load_run(lm_dir, data_dir=str(data_dir))
    got = {k: v for k, v in lm.record.config_dict().items() if k in TASK_OPTIONS and v is not None}
    assert got == want
    doc = json.loads(_invoke("compare", lm_dir, run_dir, "--data-dir", data_dir, "--format", "json"))
    assert [d["key"] for d in doc["settings_differ"] if d["key"] in TASK_OPTIONS] == []
    assert not any(f"{k}=" in r["label"] for r in doc["runs"] for k in TASK_OPTIONS), doc["runs"]
    assert doc["verdicts"][0]["kind"] == "identical"


def test_an_lm_eval_output_records_the_settings_of_the_run_it_equals(discotex_dir, abricot_file, tmp_path):
    """`lm-eval --tasks discotex_card --num_fewshot 2` is `run --prompt-variant card --shots 2` (was: shots,
    prompt_variant and chat_template not recorded); `abricot_calamita` is `run --protocol calamita` (was:
    protocol not recorded)."""
    data = tmp_path / "data"
    data.mkdir()
    for f in [abricot_file, *discotex_dir.iterdir()]:
        (data / f.name).symlink_to(f)
    fake = ("--backend", "fake", "--n-ctx", "4096")
    meta = ("--metadata", json.dumps({"data_dir": str(data)}), "--log_samples", "--limit", 3)
    _invoke("lm-eval", "fake", "--model_args", "backend=fake,n_ctx=4096", "--tasks", "discotex_card",
            "--num_fewshot", 2, *meta, "--output_path", tmp_path / "lm_card")
    _invoke("run", "fake", *fake, "--tasks", "discotex", "--prompt-variant", "card", "--shots", 2, "--limit", 3,
            "--data-dir", data, "--out", tmp_path / "card")
    (lm_card,) = (tmp_path / "lm_card").iterdir()
    _same_settings(lm_card, tmp_path / "card", data, {"shots": 2, "prompt_variant": "card", "chat_template": False})
    _invoke("lm-eval", "fake", "--model_args", "backend=fake,n_ctx=4096", "--tasks", "abricot_calamita", *meta,
            "--output_path", tmp_path / "lm_calamita")
    _invoke("run", "fake", *fake, "--tasks", "abricot_abs,abricot_inc", "--protocol", "calamita", "--limit", 3,
            "--data-dir", data, "--out", tmp_path / "calamita")
    (lm_calamita,) = (tmp_path / "lm_calamita").iterdir()
    _same_settings(lm_calamita, tmp_path / "calamita", data, {"protocol": "calamita", "chat_template": False})


def test_an_export_of_a_sample_run_reads_back_as_that_sample(discotex_dir, tmp_path):
    """`Run.to_lm_eval` of a `--sample 4` run read back was labelled `all 4` beside the run's `sample 4`."""
    from abricot_local.analysis.labels import unique_labels
    from abricot_local.analysis.loading import load_run

    _invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--sample", 4, "--data-dir", discotex_dir,
            "--out", tmp_path / "run")
    run = load_run(tmp_path / "run")
    back = load_run(run.to_lm_eval(tmp_path / "export"), data_dir=str(discotex_dir))
    assert back.record.config.sample == 4 and back.identity.scored == run.identity.scored == "sample 4"
    assert not any("all 4" in label for label in unique_labels([run.identity, back.identity]))


def test_an_error_no_narrower_namer_claimed_leaves_in_the_commands_words(monkeypatch):
    """What the lm-eval door raises without naming its words is said as that command takes the options."""
    from abricot_local.errors import UsageError, opt, render
    from abricot_local.lm_eval import requests as lm_requests

    words = {opt("data_dir", "DIR"): """--metadata '{"data_dir": DIR}' (simple_evaluate's TaskManager(metadata="""
                                     """{"data_dir": DIR}))""", opt("n_ctx", 4096): "model_args n_ctx=4096",
             opt("shots", 2): "--num_fewshot 2 (simple_evaluate's num_fewshot=2)", opt("force"): "model_args force",
             opt("seed", 7): "model_args seed=7", opt("prompt_variant", "card"): "prompt_variant=card"}
    assert {k: render(k, lm_requests.door_words) for k in words} == words

    def refuse(args):
        raise UsageError(f"cannot open it: give {opt('data_dir', 'DIR')} or raise {opt('n_ctx', 'N')}")

    monkeypatch.setattr(lm_requests, "open_model", refuse)
    said = _lm_eval_says("--model_args", "backend=fake")
    assert said.strip() == ("""error: cannot open it: give --metadata '{"data_dir": DIR}' (simple_evaluate's """
                            """TaskManager(metadata={"data_dir": DIR})) or raise model_args n_ctx=N""")
