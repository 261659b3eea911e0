"""A models.toml entry naming a backend plugin that is refused (it clashes, it does not load) is refused when that
entry is used, naming the backend and why; the registry's other entries, and every command that does not use it,
work (backends/__init__.py: a refused plugin blocks no other backend and no command that does not use it)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.errors import UsageError
from abricot_local.models.registry import load_registry, lookup
from test_backend_plugins_door import TILT, plugins, register  # noqa: F401 (the fixture)


def test_an_entry_of_a_refused_backend_blocks_no_other_entry(plugins, tmp_path, vocab_dir):  # noqa: F811
    plugins("one = toy_one:REGISTERED\ntwo = toy_two:REGISTERED\n",
            toy_one=register("toy_nowhere:One", "toy_one_opts:Options"), toy_one_opts=TILT.format(kind="float", default=0.5),
            toy_two=register("toy_nowhere:Two", "toy_two_opts:Options"), toy_two_opts=TILT.format(kind="int", default=1))
    toml = tmp_path / "m.toml"
    gguf = vocab_dir / "ggml-vocab-llama-spm.gguf"
    toml.write_text(f'[mine]\nbackend = "two"\nsource = "local"\npath = "{gguf}"\n\n[other]\nbackend = "fake"\n',
                    encoding="utf-8")
    registry = load_registry(toml)  # read whole: the refused backend's entry is not every entry's error
    assert lookup("other", registry).backend == "fake" and lookup("mine", registry).backend == "two"
    r = CliRunner().invoke(cli, ["models", "--models", str(toml)])
    assert r.exit_code == 0 and "other" in r.output, r.output
    r = CliRunner().invoke(cli, ["run", "mine", "--models", str(toml), "--tasks", "discotex", "--dry-run"])
    assert r.exit_code != 0 and "backend 'two' declares option 'tilt' unlike backend 'one'" in r.output, r.output


def test_an_entry_naming_a_backend_is_checked_again_once_the_backends_are_looked_for_again(plugins, tmp_path):  # noqa: F811
    toml = tmp_path / "m.toml"
    toml.write_text('[mine]\nbackend = "one"\nsource = "synthetic"\n', encoding="utf-8")
    plugins("one = toy_one:REGISTERED\n", toy_one=register("toy_nowhere:One", reads_model_file=False))
    assert load_registry(toml)["mine"].backend == "one"
    plugins("")  # the same bytes, the plugin gone: registry._BUILT's answer is not served
    with pytest.raises(UsageError, match="backend must be one of .*, not 'one'"):
        load_registry(toml)
