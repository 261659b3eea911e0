"""A run exported in lm-eval's layout (`report --format lm-eval`, `Run.to_lm_eval`) against what real
lm-eval (0.4.x) writes for the same shipped tasks, through abricot-local's lm-eval model on the fake
backend: each task's ``n-shot``, the chat template keys; lm-eval's ``--limit`` read back; and the
``rpc`` option's several servers in each door's words (the command line's ',', model_args' ';', a
Python list).
"""

from __future__ import annotations

import contextlib
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
from conftest import isolated_env, ours_only, require_lm_eval as _lm_eval  # noqa: E402

FAKE = ("--backend", "fake", "--n-ctx", "4096")
RUNS = {  # a run's flags, the lm-eval output of the same tasks, its tasks' names there
    "paper": (("--tasks", "abricot_abs,abricot_inc"), "lm",  # the default protocol: the paper's (3 shots)
              {"abricot_abs": "abricot_abs_paper", "abricot_inc": "abricot_inc_paper"}),
    "calamita": (("--tasks", "abricot_abs,abricot_inc", "--protocol", "calamita"), "lm",
                 {"abricot_abs_calamita": "abricot_abs_calamita", "abricot_inc_calamita": "abricot_inc_calamita"}),
    "card": (("--tasks", "discotex", "--prompt-variant", "card"), "lm", {"discotex": "discotex_card"}),
    "card_2": (("--tasks", "discotex", "--prompt-variant", "card", "--shots", "2"), "lm_2",
               {"discotex": "discotex_card"}),
    "chat": (("--tasks", "abricot_abs,abricot_inc", "--protocol", "calamita", "--chat-template"), "lm_chat",
             {"abricot_abs_calamita": "abricot_abs_calamita", "abricot_inc_calamita": "abricot_inc_calamita"}),
}
CHAT = ("chat_template", "chat_template_sha", "system_instruction", "system_instruction_sha")


def _invoke(*args) -> str:
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert r.exit_code == 0, r.output + repr(r.exception)
    return r.output


@contextlib.contextmanager
def lm_eval_folder(name: str, abricot_file, discotex_dir, tmp_path_factory):
    """A module's folder for real lm-eval and `run`: the data linked in (``data``), a private cache and config, the
    working directory, the shipped tasks only; yields (folder, data)."""
    _lm_eval()
    folder = tmp_path_factory.mktemp(name)
    data = folder / "data"
    data.mkdir()
    for f in [abricot_file, *discotex_dir.iterdir()]:
        (data / f.name).symlink_to(f)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in isolated_env(folder).items():
            mp.setenv(key, value)
        mp.chdir(folder)
        ours_only(mp)
        yield folder, data


def _results(folder: Path) -> dict:
    (path,) = folder.rglob("results_*.json")
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def both(abricot_file, discotex_dir, tmp_path_factory):
    """Real lm-eval over abricot_paper, abricot_calamita and discotex_card (and at --num_fewshot 2, and with
    --apply_chat_template), 2 items each; the `run` of each (RUNS), exported."""
    with lm_eval_folder("export", abricot_file, discotex_dir, tmp_path_factory) as (folder, data):
        for out, args in (("lm", ("--tasks", "abricot_paper,abricot_calamita,discotex_card")),
                          ("lm_2", ("--tasks", "discotex_card", "--num_fewshot", 2)),
                          ("lm_chat", ("--tasks", "abricot_calamita", "--apply_chat_template"))):
            _invoke("lm-eval", "fake", "--model_args", "backend=fake,n_ctx=4096", *args, "--limit", 2,
                    "--metadata", json.dumps({"data_dir": str(data)}), "--log_samples", "--output_path", folder / out)
        for name, (flags, _, _) in RUNS.items():
            _invoke("run", "fake", *FAKE, *flags, "--data-dir", data, "--limit", 2, "--out", folder / name)
            _invoke("report", folder / name, "--format", "lm-eval", "-o", folder / "export" / name)
    return folder, data


def test_an_exports_n_shot_is_what_lm_eval_writes_for_the_same_tasks(both):
    """Each task's n-shot and num_fewshot: the shots its items were built with (the paper's protocol: 3)."""
    folder, _ = both
    seen = {}
    for name, (_, lm, names) in RUNS.items():
        ours, theirs = _results(folder / "export" / name), _results(folder / lm)
        for task, lm_task in names.items():
            assert ours["n-shot"][task] == theirs["n-shot"][lm_task], (name, task)
            assert ours["configs"][task]["num_fewshot"] == theirs["configs"][lm_task]["num_fewshot"], (name, task)
            seen[f"{name}:{task}"] = ours["n-shot"][task]
    assert seen == {"paper:abricot_abs": 3, "paper:abricot_inc": 3, "calamita:abricot_abs_calamita": 0,
                    "calamita:abricot_inc_calamita": 0, "card:discotex": 0, "card_2:discotex": 2,
                    "chat:abricot_abs_calamita": 0, "chat:abricot_inc_calamita": 0}


def test_an_export_writes_the_chat_template_as_lm_eval_does(both):
    """chat_template and chat_template_sha: null without a template, else the template lm-eval's
    --apply_chat_template records for the same model (was: no key, read back as not recorded)."""
    from abricot_local.analysis.loading import load_run

    folder, data = both
    for name, lm in (("calamita", "lm"), ("chat", "lm_chat")):
        ours, theirs = _results(folder / "export" / name), _results(folder / lm)
        assert {k: ours[k] for k in CHAT} == {k: theirs[k] for k in CHAT}, name
    chat = _results(folder / "export" / "chat")
    assert chat["chat_template"] == "<|user|>\n{message}<|end|>\n<|assistant|>\n" and chat["chat_template_sha"]
    assert chat["fewshot_as_multiturn"] is False  # the run's prompt, shots included, is one user turn
    assert _results(folder / "export" / "calamita")["fewshot_as_multiturn"] is None
    (model,) = (folder / "export" / "calamita").iterdir()
    back = load_run(model, data_dir=str(data))
    assert back.record.config_dict()["chat_template"] is False


@pytest.mark.parametrize("limit, want", [(2.0, 2), (2, 2), (2.5, 2), (0.5, None), (True, None)])
def test_lm_eval_limit_is_read_as_lm_eval_applies_it(both, tmp_path, limit, want):
    """lm-eval writes --limit 2 as 2.0 and scores int(limit) items (get_sample_size); under 1 a fraction of
    each task, not a count (the run records no limit; the provenance keeps it)."""
    from abricot_local.analysis.loading import load_run

    folder, data = both
    copy = tmp_path / "lm"
    shutil.copytree(folder / "lm_2", copy)
    (path,) = copy.rglob("results_*.json")
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["config"]["limit"] == 2.0 and isinstance(doc["config"]["limit"], float)  # as lm-eval writes it
    doc["config"]["limit"] = limit
    path.write_text(json.dumps(doc), encoding="utf-8")
    run = load_run(path.parent, data_dir=str(data))
    assert run.record.config.limit == want
    assert run.record.provenance.extra["limit"] == limit


# -- rpc: several servers as each door writes a list ---------------------------------------------
def test_rpc_says_several_servers_on_the_command_line_with_commas(tmp_path):
    r = CliRunner().invoke(cli, ["run", str(tmp_path / "absent.gguf"), "--rpc", "nohost"])
    assert r.exit_code == 2 and r.output.strip() == \
        "error: --rpc expects HOST:PORT (several: --rpc HOST:PORT,HOST:PORT), got 'nohost'", r.output


def test_rpc_says_several_servers_in_model_args_with_semicolons(monkeypatch):
    """Through abricot-local lm-eval: lm-eval splits --model_args at commas (was: HOST:PORT[,HOST:PORT...])."""
    _lm_eval()
    ours_only(monkeypatch)
    r = CliRunner().invoke(cli, ["lm-eval", "absent.gguf", "--tasks", "discotex_card", "--limit", "1",
                                 "--model_args", "rpc=nohost"])
    said = r.output[r.output.index("error: "):].strip()
    assert r.exit_code == 2 and said == \
        "error: model_args rpc expects HOST:PORT (several: model_args rpc=HOST:PORT;HOST:PORT), got 'nohost'", said
    from abricot_local.errors import UsageError, render
    from abricot_local.lm_eval import requests as lm_requests

    with pytest.raises(UsageError) as err:  # the form it names is the one the door takes
        lm_requests.request_of({"model": "absent.gguf", "rpc": "127.0.0.1:1;127.0.0.1"})
    assert render(err.value.raw(), lm_requests.door_words).endswith("got '127.0.0.1'")


def test_rpc_says_several_servers_to_python_as_a_list(tmp_path):
    import abricot_local
    from abricot_local.errors import UsageError

    with pytest.raises(UsageError) as err:
        abricot_local.plan(str(tmp_path / "absent.gguf"), tasks="discotex", rpc="nohost")
    assert str(err.value) == "rpc expects HOST:PORT (several: rpc=[HOST:PORT, HOST:PORT]), got 'nohost'"
    with pytest.raises(UsageError) as err:
        abricot_local.plan(str(tmp_path / "absent.gguf"), tasks="discotex", rpc=["127.0.0.1:1", "x"])
    assert str(err.value).endswith("got 'x'")


def test_a_list_value_is_joined_by_each_namer():
    from abricot_local.errors import Namer, keywords, opt, recorded_words, render
    from abricot_local.lm_eval.requests import door_words, model_arg

    text = f"as {opt('rpc', ['A:1', 'B:2'])} or {opt('data', ('abricot', 'FILE'))}"
    assert render(text) == render(text, keywords) == 'as rpc=[A:1, B:2] or data={"abricot": FILE}'
    assert render(text, recorded_words) == "as --rpc A:1,B:2 or --data abricot=FILE"
    assert render(f"{opt('rpc', ['A:1', 'B:2'])}", model_arg) == "model_args rpc=A:1;B:2"
    assert render(f"{opt('rpc', ['A:1'])}", door_words) == "model_args rpc=A:1"
    assert render(f"{opt('rpc', ['A:1', 'B:2'])}", Namer(lambda n, v: f"<{n}|{v}>")) == "<rpc|A:1,B:2>"  # no join given: commas
