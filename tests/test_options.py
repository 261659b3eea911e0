"""Backends own their options (issue 19): a backend's Options fields make its flags, lm-eval's
model_args keys, the checks of every value and the recorded config; every option's range is
checked with a message naming it (issue 21, item 6). All without a model or llama.cpp."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from abricot_local import backends, option_fields
from abricot_local.lm_eval import requests as lm_eval_requests
from abricot_local.backends import Registered, backend_options, option_specs
from abricot_local.backends.engines import ENGINES, Batched, Engine, Prefix
from abricot_local.backends.llama_cpp.options import LlamaCppOptions
from abricot_local.backends.options import ScoringOptions
from abricot_local.cli import cli
from abricot_local.cli.options import backend_options as backend_flags, task_options
from abricot_local.errors import UsageError, render
from abricot_local.cli.options import flags
from abricot_local.run.request import given_options
from abricot_local.option_fields import option

PKG = Path(__file__).resolve().parents[1] / "abricot_local"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@dataclasses.dataclass(frozen=True)
class ToyOptions(ScoringOptions):
    """A backend's options with one setting more: the whole declaration of a new setting."""

    knob: int = option(3, "How far to turn it.", min=1, max=9, record="always")


@pytest.fixture
def toy(monkeypatch):
    """A registered backend "toy" whose options are ToyOptions, and a command built now with the
    generated backend flags (the real commands were built at import, before "toy" existed)."""
    monkeypatch.setitem(backends.BACKENDS, "toy", Registered("abricot_local.backends.fake:FakeBackend",
                                                             f"{__name__}:ToyOptions"))
    got = {}

    @click.command()
    @task_options
    @backend_flags
    def cmd(**kw):
        got["options"] = given_options(kw["backend"], kw, 0).checked()

    def run(*args):
        got.clear()
        r = CliRunner().invoke(cmd, [str(a) for a in args])
        if isinstance(r.exception, UsageError):  # what the cli's group prints as "error: ..."
            r.output_bytes += render(r.exception.raw(), flags).encode()
        return r, got.get("options")

    return run


def test_adding_a_setting_is_one_field(toy):
    r, opts = toy("--backend", "toy", "--knob", 5)
    assert r.exit_code == 0, r.output
    assert isinstance(opts, ToyOptions) and opts.knob == 5
    assert opts.config() == {"n_ctx": 2048, "n_batch": 512, "engine": "prefix", "knob": 5}
    r, opts = toy("--backend", "toy")
    assert opts.knob == 3  # not given: the field's default
    r, _ = toy("--backend", "toy", "--knob", 10)
    assert r.exit_code != 0 and "--knob must be between 1 and 9, got 10" in r.output
    r, _ = toy("--backend", "fake", "--knob", 5)
    assert r.exit_code != 0 and "the fake backend has no option --knob" in r.output
    assert "--knob INTEGER" in toy("--help")[0].output and "toy only: How far to turn it." in toy("--help")[0].output
    assert "knob" in lm_eval_requests.backend_arg_keys()
    assert backend_options("toy", {"knob": "7"}).knob == 7
    with pytest.raises(UsageError) as err:  # named by its field: each door writes it its own way
        backend_options("toy", {"knob": 0})
    assert str(err.value) == "knob must be between 1 and 9, got 0"  # Python's keyword
    assert render(err.value.raw(), lm_eval_requests.model_arg) == "model_args knob must be between 1 and 9, got 0"


def test_every_backend_field_is_a_flag_and_a_model_args_key():
    run_help, check_help = invoke("run", "--help").output, invoke("check", "--help").output
    for spec, kinds in option_specs():
        assert spec.flag_name in run_help, spec.name  # its own flag, or (seed) the task's --seed
        assert spec.flag or run_help.count(spec.flag_name + " ") == 1, spec.name
        assert spec.name in lm_eval_requests.backend_arg_keys()
    llama_only = {s.name for s in option_fields.specs(LlamaCppOptions)} - {s.name for s in option_fields.specs(ScoringOptions)}
    assert llama_only == {"threads", "n_gpu_layers", "main_gpu", "tensor_split", "flash_attn", "extra_bufts", "rpc", "rpc_timeout"}
    assert "--vocab-only" not in run_help and "vocab_only" not in lm_eval_requests.backend_arg_keys()
    assert re.search(r"--threads INTEGER", check_help) and "--n-batch" not in check_help
    for kind in backends.BACKENDS:  # registered options class == the backend's own (this imports llama_cpp)
        assert backends.backend_class(kind).Options is backends.options_class(kind)
    from abricot_local.backends.llama_cpp.session import FLASH_ATTN

    assert tuple(FLASH_ATTN) == next(s for s, _ in option_specs() if s.name == "flash_attn").choices


def test_no_llama_cpp_option_is_named_outside_backends():
    """The modules that used to list llama.cpp's flags (cli, lm_eval_requests, planning, runner, check)
    name none of its options now: they come from LlamaCppOptions' fields."""
    import ast

    own = {s.name for s in option_fields.specs(LlamaCppOptions)} - {s.name for s in option_fields.specs(ScoringOptions)}
    names = own | {option_fields.flag_of(n) for n in own}
    cli = [f for f in sorted((PKG / "cli").glob("*.py")) if f.name != "rpc.py"]  # rpc-server: its own --threads
    files = [*cli, *(PKG / f for f in ("lm_eval/requests.py", "run/plan.py", "run/execute.py", "run/check.py", "core.py"))]
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in names, f"{f.name}:{node.lineno} names {node.value!r}"


def test_the_recorded_config_keeps_its_keys_and_values():
    """Runs made before must still resume (their configs are compared): same keys, same values;
    --extra-bufts is recorded whatever its value."""
    assert LlamaCppOptions().config() == {"n_ctx": 2048, "n_batch": 512, "n_gpu_layers": -1, "flash_attn": "auto",
                                          "engine": "prefix", "extra_bufts": "off"}
    assert LlamaCppOptions(extra_bufts="auto").config() == {"n_ctx": 2048, "n_batch": 512, "n_gpu_layers": -1,
                                                            "flash_attn": "auto", "engine": "prefix",
                                                            "extra_bufts": "auto"}
    o = LlamaCppOptions(n_ctx=4096, engine="batched", parallel=3, extra_bufts="off", threads=2, tensor_split=(1.0,))
    assert o.config() == {"n_ctx": 4096, "n_batch": 512, "n_gpu_layers": -1, "flash_attn": "auto",
                          "engine": "batched", "parallel": 3, "extra_bufts": "off"}
    assert ScoringOptions(engine="batched").config() == {"n_ctx": 2048, "n_batch": 512, "engine": "batched",
                                                         "parallel": None}
    recorded = {"model": "x", "backend": "llama.cpp", "tasks": ["discotex"], "limit": None, "seed": 7, **o.config()}
    assert backend_options("llama.cpp", recorded, strict=False).config() == o.config()


def test_engines_are_read_without_a_session(monkeypatch):
    from abricot_local.backends import fake
    from abricot_local.backends.fake import FakeBackend

    assert Engine not in ENGINES.values() and ENGINES["prefix"] is Prefix and issubclass(Batched, Prefix)
    o = ScoringOptions(engine="batched", parallel=3, n_ctx=512)
    assert Batched.sequences(o) == 4 and Batched.group_size(o) == 3 and Prefix.sequences(ScoringOptions()) == 1
    assert Batched.sequences(ScoringOptions(engine="batched", n_ctx=512)) == 3  # n_ctx/256 items + the prefix

    def no_session(*a, **k):
        raise AssertionError("a session was built to read a config")

    monkeypatch.setattr(fake.FakeSession, "__init__", no_session)
    assert FakeBackend.config(o) == {"n_ctx": 512, "n_batch": 512, "engine": "batched", "parallel": 3}
    assert "_NoSession" not in (PKG / "backends" / "llama_cpp" / "backend.py").read_text()


@pytest.mark.parametrize("args, message", [
    (["--n-batch", "-5"], "--n-batch must be at least 1, got -5"),
    (["--n-batch", "0"], "--n-batch must be at least 1, got 0"),
    (["--n-ctx", "0"], "--n-ctx must be at least 1, got 0"),
    (["--seed", "-5"], "--seed must be at least 0, got -5"),
    (["--shots", "-1"], "--shots must be at least 0, got -1"),
    (["--engine", "batched", "--parallel", "256"], "--parallel must be between 1 and 255, got 256"),
    (["--engine", "batched", "--parallel", "0"], "--parallel must be between 1 and 255, got 0"),
    (["--parallel", "2"], "--parallel applies only to --engine batched"),
    (["--threads", "0"], "--threads must be at least 1, got 0"),
    (["--n-gpu-layers", "-2"], "--n-gpu-layers must be at least -1, got -2"),
    (["--tensor-split", "1,-1"], "--tensor-split must be at least 0, got -1"),
    (["--tensor-split", "3,x"], "--tensor-split: expected a number, got 'x'"),
    (["--rpc", "nohost"], "--rpc expects HOST:PORT"),
    (["--n-batch", str(2**31)], "--n-batch must be at most 2147483647, got 2147483648"),
    (["--limit", "0"], "--limit must be at least 1"),
    (["--sample", "0"], "--sample must be at least 1"),
])
def test_out_of_range_values_are_refused_naming_the_option(args, message, tmp_path):
    """Before any model or data is looked at: one line, exit 2, no traceback."""
    backend = ["--backend", "fake"] if not any(a in args for a in ("--threads", "--n-gpu-layers", "--tensor-split",
                                                                      "--rpc")) else []
    r = invoke("run", str(tmp_path / "absent.gguf"), *backend, *args)
    assert r.exit_code == 2, r.output
    assert f"error: {message}" in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_model_args_are_parsed_by_field_type_and_checked_alike():
    o = backend_options("llama.cpp", {"n_ctx": "4096", "threads": 4, "flash_attn": True, "extra_bufts": "off",
                                      "tensor_split": "3;1", "verbose": "true", "engine": "batched",
                                      "parallel": 2})
    assert (o.n_ctx, o.threads, o.flash_attn, o.extra_bufts, o.tensor_split, o.verbose, o.parallel) == \
        (4096, 4, "on", "off", (3.0, 1.0), True, 2)
    assert backend_options("llama.cpp", {"tensor_split": 2}).tensor_split == (2.0,)
    rpc = next(s for s, _ in option_specs() if s.name == "rpc")
    assert option_fields.parse(rpc, "10.0.0.1:50052;10.0.0.2:50052") == ("10.0.0.1:50052", "10.0.0.2:50052")
    for values, message in [({"n_batch": -5}, "model_args n_batch must be at least 1, got -5"),
                            ({"n_ctx": "tanti"}, "model_args n_ctx: expected an integer"),
                            ({"n_ctx": True}, "model_args n_ctx: expected an integer"),
                            ({"seed": -1}, "model_args seed must be at least 0"),
                            ({"flash_attn": "maybe"}, "model_args flash_attn must be one of auto, on, off"),
                            ({"verbose": "perhaps"}, "model_args verbose: expected true or false")]:
        with pytest.raises(UsageError, match=re.escape(message)):
            lm_eval_requests.open_model({"model": "x.gguf", "backend": "llama.cpp", **values})


def test_options_built_in_python_are_checked_too():
    with pytest.raises(UsageError, match="^n_batch must be at least 1"):  # Python's words: the keyword
        ScoringOptions(n_batch=0)
    with pytest.raises(UsageError, match="^parallel applies only to engine=batched"):
        ScoringOptions(parallel=2)
    with pytest.raises(UsageError, match="tensor_split takes at most 16"):
        LlamaCppOptions(tensor_split=(1.0,) * 17)
    from abricot_local.tasks.base import TaskOptions

    with pytest.raises(UsageError, match="^seed must be at least 0, got -1"):
        TaskOptions(seed=-1)


OPTIONS_ONLY = ("import sys\nfrom abricot_local.backends import backend_options\n"
                "o = backend_options('llama.cpp', {'n_gpu_layers': 0, 'flash_attn': 'off'})\n"
                "print(type(o).__name__, 'llama_cpp' in sys.modules)")


def early_children(tmp_path_factory) -> dict:
    """OPTIONS_ONLY in a fresh process (in the repository: the package the suite imports), started by conftest once
    the tests are collected, beside the other tests (conftest.start_early)."""
    from conftest import Early

    return {"options_only": Early([sys.executable, "-c", OPTIONS_ONLY], timeout=120,
                                  cwd=Path(__file__).resolve().parents[1])}


@pytest.fixture(scope="module")
def options_only(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    yield child
    child.close()


def test_check_and_help_load_no_llama_cpp_for_the_options(options_only):
    r = options_only.result()
    assert r.stdout.strip() == "LlamaCppOptions False", r.stdout + r.stderr


@pytest.mark.parametrize("args, option", [(["rpc-server", "--port", "0"], "--port"),
                                          (["rpc-server", "--threads", "0"], "--threads"),
                                          (["check", "somewhere", "--sample", "0"], "--sample"),
                                          (["check", "somewhere", "--atol", "-1"], "--atol")])
def test_other_commands_check_their_ranges_before_doing_anything(args, option):
    r = invoke(*args)
    said = f"{option} must be at least 1, got 0" if option == "--sample" else f"error: {option}: "
    assert r.exit_code == 2 and said in r.output and "Traceback" not in r.output  # (--sample: run's own words)
