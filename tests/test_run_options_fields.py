"""The run's own options are fields (issue 44: run.request.RunOptions): each one's flag, API keyword and lm-eval
model_args key is made from its field, and a value is refused once, by its field, in the same words at every door
and in every command taking it (`run`, `kld`, `check`)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from click.testing import CliRunner

import abricot_local as api
from abricot_local.cli import cli
from abricot_local.errors import UsageError
from abricot_local.option_fields import specs
from abricot_local.run.request import RunOptions, run_options


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _error(r) -> str:
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    return r.output.strip().splitlines()[-1]


@pytest.mark.parametrize("option", ["--limit", "--sample"])
def test_a_count_is_refused_in_the_same_words_by_every_command_that_takes_it(tmp_path, option):
    said = {"run": _error(invoke("run", "some-model", option, 0, "--dry-run"))}
    if option == "--limit":
        said["kld"] = _error(invoke("kld", tmp_path / "a", tmp_path / "b", option, 0))
    else:
        said["check"] = _error(invoke("check", tmp_path / "a", option, 0))
    assert set(said.values()) == {f"error: {option} must be at least 1, got 0"}, said
    with pytest.raises(UsageError) as err:  # the API's words: the same message, the keyword for the flag
        api.plan("some-model", **{option[2:]: 0})
    assert str(err.value) == f"{option[2:]} must be at least 1, got 0"


def test_every_run_option_is_a_flag_of_run_made_from_its_field():
    params = {p.name: p for p in cli.commands["run"].params}
    for spec in specs(RunOptions):
        p = params[spec.name]
        assert p.opts[0] == spec.flag_name and p.help.startswith(spec.help), spec.name
    assert params["models_file"].opts == ["--models"] and params["model_dirs"].opts == ["--model-dir"]


def test_each_check_is_the_field_s():
    cases = [(dict(limit=0), "limit must be at least 1, got 0"), (dict(sample=-2), "sample must be at least 1"),
             (dict(shard="3/2"), "shard expects K/N"), (dict(out=""), "out is empty"),
             (dict(margin=0), "margin must be a finite number more than 0"),
             (dict(margin=float("nan")), "margin must be a finite number"),
             (dict(limit=2, sample=3), "sample=3 and limit=2 cannot be combined"),
             (dict(resume=True), "resume=True needs the out folder")]
    for values, words in cases:
        with pytest.raises(UsageError, match=words):
            run_options(values)
    o = run_options(dict(shard=" 2 / 4 ", quants=["Q4_K_M", "Q8_0"], model_dirs=Path("models"), out=Path("o"),
                         force="true", margin=1))
    assert (o.shard, o.quants, o.model_dirs, o.out, o.force, o.margin) == ("2/4", "Q4_K_M,Q8_0", ("models",), "o",
                                                                        True, 1.0)
    assert run_options({"n_ctx": 5, "limit": None}) == RunOptions()  # another option's value, or None: not the run's


def test_the_api_takes_each_run_option_once_by_its_field_name():
    from abricot_local.api.arguments import option_hints
    from abricot_local.api.options import valid_options

    names = {s.name for s in specs(RunOptions)}
    own = set(inspect.signature(api.evaluate).parameters) & names
    assert own and names - own <= set(valid_options(api.evaluate)) and not own & set(valid_options(api.evaluate))
    assert {"out", "resume"}.isdisjoint(valid_options(api.evaluate))  # plan() does not take them either
    with pytest.raises(UsageError, match=r"^plan\(\): model_dirs must be text or a path or a list of text or a path, "
                                         r"got 3 \(int\)$"):
        api.plan("some-model", model_dirs=3)
    assert option_hints()["force"] is bool and option_hints()["margin"] == float | None  # force: True or False
    with pytest.raises(UsageError, match=r"^plan\(\): force must be True or False, got None"):
        api.plan("some-model", force=None)


def test_lm_eval_reads_the_run_options_by_their_model_args_keys():
    from abricot_local.lm_eval import requests

    keys = requests.run_arg_keys()
    assert keys == {s.model_arg: s.name for s in specs(RunOptions) if s.model_arg}
    assert {"models", "model_dir", "force"} == set(keys) and set(keys) <= set(requests.FRONT_KEYS)
    r = requests.request_of({"model": "some-model", "backend": "fake", "model_dir": "a;b", "force": "true"})
    assert (r.model_dirs, r.force, r.models_file) == (("a", "b"), True, None)
    with pytest.raises(UsageError) as err:
        requests.request_of({"model": "some-model", "backend": "fake", "force": "maybe"})
    assert str(err.value.said_by(requests.model_arg)) == "model_args force: expected true or false, got 'maybe'"
    assert requests.model_arg.write("models_file", "FILE") == "model_args models=FILE"  # its key, not the field's
