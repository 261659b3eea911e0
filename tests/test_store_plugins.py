"""Model-store plugins (``abricot_local.model_stores``) behave as task plugins do: a shipped prefix cannot be
taken, a prefix two plugins register is refused naming both, a broken one is named when its prefix is used
(and by `doctor`, `models --local`), and a store whose functions do not take what a store is given is
refused naming the plugin and what it needs. ``label_of`` beside ``names.path_part``."""

from __future__ import annotations

import json
import sys
import textwrap
from importlib.metadata import EntryPoint

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.errors import AbricotError, UsageError
from abricot_local.models import stores
from abricot_local.names import path_part

GOOD = """
    from pathlib import Path
    from abricot_local.models.stores import Found, Listed
    def resolve(rest, *, offline=None, notify=None, progress=True, fresh=False):
        return Found(Path("/nowhere") / rest, "{name}", rest)
    def listing():
        return [Listed("{name}", "{name}:one", Path("/nowhere/one.gguf"))]
"""
BARE = """
    def resolve(rest):  # written without the keywords a store is given
        raise AssertionError("never called")
    def listing():
        return []
"""


@pytest.fixture
def store_plugins(tmp_path, monkeypatch):
    """register(prefix=MODULE or [MODULES], modules={name: code}): the stores' entry points read again."""
    real = list(stores.entry_points(group=stores.GROUP))
    monkeypatch.syspath_prepend(str(tmp_path))

    def register(modules=None, **entries):
        for name, code in (modules or {}).items():
            (tmp_path / f"{name}.py").write_text(textwrap.dedent(code).replace("{name}", name), encoding="utf-8")
            sys.modules.pop(name, None)
        eps = [EntryPoint(name=prefix, value=v, group=stores.GROUP)
               for prefix, values in entries.items() for v in ([values] if isinstance(values, str) else values)]
        monkeypatch.setattr(stores, "entry_points", lambda group: [*eps, *real])
        stores._entries.cache_clear()

    yield register
    stores._entries.cache_clear()


def test_a_plugin_cannot_take_a_shipped_prefix_and_doctor_says_so(store_plugins):
    store_plugins(modules={"st_good": GOOD}, ollama="st_good")
    assert stores.prefixes()[:3] == ("ollama", "lmstudio", "hf") and stores.prefixes().count("ollama") == 1
    assert stores._module("ollama").__name__ == "abricot_local.models.stores.ollama"  # the shipped one answers
    (why,) = stores.refused()
    assert why.startswith("model store plugin entry ollama = st_good is ignored: 'ollama' is a store shipped")


def test_two_plugins_with_one_prefix_are_refused_when_used_naming_both(store_plugins):
    store_plugins(modules={"st_one": GOOD, "st_two": GOOD}, dup=["st_one", "st_two"])
    assert stores.prefix_of("dup:x") == "dup"
    with pytest.raises(UsageError, match=r"model store prefix 'dup' is registered by several plugins "
                                         r"\(dup = st_one and dup = st_two\)"):
        stores.resolve("dup:x")
    assert not any(x.source.startswith("st_") for x in stores.listing())  # neither lists: no silent winner
    assert any("dup = st_one and dup = st_two" in why for why in stores.refused())


def test_one_package_found_twice_is_no_clash(store_plugins):
    store_plugins(modules={"st_good": GOOD}, twice=["st_good", "st_good"])
    assert stores.resolve("twice:m").path.name == "m" and not stores.refused()
    assert [x.name for x in stores.listing() if x.source == "st_good"] == ["st_good:one"]


def test_a_broken_plugin_is_named_when_used_and_blocks_no_other_store(store_plugins):
    store_plugins(modules={"st_good": GOOD}, gone="st_missing_module", fine="st_good")
    assert stores.prefix_of("gone:x") == "gone" and "st_missing_module" not in sys.modules  # names only
    with pytest.raises(UsageError, match=r"model store plugin 'gone' \(st_missing_module\) failed to load: "
                                         r"ModuleNotFoundError: .*; fix or reinstall its package"):
        stores.resolve("gone:x")
    assert [x.name for x in stores.listing() if x.source == "st_good"] == ["st_good:one"]  # the other store lists
    assert stores.resolve("fine:m").source == "st_good"
    assert [why.split(":")[0] for why in stores.refused()] == ["model store plugin 'gone' (st_missing_module) failed to load"]


def test_a_resolve_without_the_keywords_is_refused_naming_the_plugin_and_the_signature(store_plugins):
    store_plugins(modules={"st_bare": BARE}, bare="st_bare")
    with pytest.raises(AbricotError) as err:  # not a TypeError traceback from inside the store
        stores.resolve("bare:x")
    said = str(err.value)
    assert said.startswith("model store plugin 'bare' (st_bare) cannot be used: its resolve(rest) cannot be called "
                           "as resolve(rest, offline=..., notify=..., progress=..., fresh=...)"), said
    assert "unexpected keyword argument 'offline'" in said and stores.NEEDS in said
    with pytest.raises(UsageError, match="cannot be used"):
        stores.locate("bare:x")


def test_a_store_without_listing_or_with_a_listing_that_needs_arguments_is_refused(store_plugins):
    store_plugins(modules={"st_half": "def resolve(rest, **kw):\n    pass\n",
                           "st_args": GOOD.replace("def listing():", "def listing(where):")},
                  half="st_half", args="st_args")
    with pytest.raises(UsageError, match=r"'half' \(st_half\) cannot be used: it has no listing\(\)"):
        stores.resolve("half:x")
    with pytest.raises(UsageError, match=r"'args' \(st_args\) cannot be used: its listing\(where\) cannot be called"):
        stores.resolve("args:x")


def test_models_local_and_doctor_name_a_store_plugin_not_used(store_plugins):
    store_plugins(modules={"st_bare": BARE}, bare="st_bare", ollama="st_bare")
    out = CliRunner().invoke(cli, ["models", "--local"])
    assert out.exit_code == 0, out.output
    said = [ln for ln in out.output.splitlines() if ln.startswith("plugin entry not run: ")]
    assert len(said) == 2 and "'ollama' is a store shipped" in said[0] and "'bare' (st_bare) cannot be used" in said[1]
    facts = json.loads(CliRunner().invoke(cli, ["doctor", "--json"]).stdout)
    assert [w for w in facts["plugins_not_run"] if "store" in w] == [s.removeprefix("plugin entry not run: ")
                                                                     for s in said]


@pytest.mark.parametrize("name", ["gemma3:270m", "llama 3.1 8b", "qwen2.5-0.5b-instruct-q4_k_m", "..hidden",
                                  "café", "a/b", "", "x" * 200, "Q4_K_M.", "-_."])
def test_label_of_keeps_its_folder_names_and_is_already_a_path_part(name):
    """label_of is a store's short ASCII label (a run's folder name: run.request.folder_of passes it through
    names.path_part): path_part leaves every label as it is, under its 120 characters, but would not give the
    same labels itself (it keeps ':' and spaces), so existing runs' folders keep label_of's names."""
    label = stores.label_of(name)
    assert label and set(label) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    assert path_part(label, "model") == label[:120].strip(". ")
    assert stores.label_of("gemma3:270m") == "gemma3-270m" != path_part("gemma3:270m")
