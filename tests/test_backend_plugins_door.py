"""A backend plugin through the documented door (entry points, as tasks): one that fails to load, takes a
shipped name, shares its name with another, declares an option unlike another backend, or whose class or
session lacks a member is refused by name when it is asked for, and blocks nothing else; whether a backend
reads a model file is declared once, in its registration, and read without loading the backend."""

from __future__ import annotations

import sys
import textwrap
import types
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from abricot_local import backends
from abricot_local.backends import base, contract, session
from abricot_local.backends.contract import BackendError

ROOT = Path(__file__).resolve().parents[1]

REGISTER = """
    from abricot_local.backends import Registered
    REGISTERED = Registered("{backend}", "{options}"{more})
"""
TILT = """
    from dataclasses import dataclass
    from abricot_local.backends.options import ScoringOptions
    from abricot_local.option_fields import option
    @dataclass(frozen=True)
    class Options(ScoringOptions):
        tilt: {kind} = option({default}, "How much it tilts")
"""


@pytest.fixture
def plugins(monkeypatch):
    """Install plugins: ``(entries, modules)``, entries as ``name = module:attr`` lines of the group, modules
    (name -> code) importable; the registry is read again (and once more after the test)."""

    def install(entries: str, **modules: str) -> None:
        for name, code in modules.items():
            module = types.ModuleType(name)
            monkeypatch.setitem(sys.modules, name, module)
            exec(textwrap.dedent(code), module.__dict__)
        eps = [EntryPoint(n.strip(), v.strip(), backends.GROUP)
               for n, _, v in (line.partition("=") for line in textwrap.dedent(entries).strip().splitlines())]
        monkeypatch.setattr(backends, "entry_points", lambda group: eps if group == backends.GROUP else [])
        backends._entries.cache_clear()

    yield install
    monkeypatch.undo()
    backends._entries.cache_clear()


def register(backend: str, options: str = "abricot_local.backends.options:ScoringOptions", **more) -> str:
    return REGISTER.format(backend=backend, options=options, more="".join(f", {k}={v!r}" for k, v in more.items()))


def test_a_plugin_that_fails_to_load_is_named_when_asked_for_and_blocks_nothing(plugins):
    from abricot_local.cli.options import backend_options as flags

    plugins("bad = toy_missing:REGISTERED\nodd = toy_odd:REGISTERED\nbadopts = toy_badopts:REGISTERED\n",
            toy_odd="REGISTERED = 'not a Registered'\n", toy_badopts=register("x:Y", "toy_nowhere:Options"))
    assert list(backends.BACKENDS) == ["llama.cpp", "fake"]
    flags(lambda **kw: None)  # what every command's import builds: the backend flags
    assert backends.backend_options("fake", {"n_ctx": "64"}).n_ctx == 64
    for kind, why in (("bad", r"backend plugin 'bad' \(toy_missing:REGISTERED\) failed to load: ModuleNotFoundError"),
                      ("odd", r"backend plugin 'odd' \(toy_odd:REGISTERED\) is not a backends.Registered"),
                      ("badopts", r"backend plugin 'badopts' .*failed to load: ModuleNotFoundError.*toy_nowhere")):
        with pytest.raises(BackendError, match=why):
            backends.backend_class(kind)
    assert sum(why.startswith("backend plugin ") for why in backends.not_usable()) == 3  # what doctor says
    with pytest.raises(backends.UsageError, match=r"unknown backend 'nope'; choose from llama.cpp, fake; "
                                                  r"backend plugin 'bad'"):
        backends.backend_class("nope")


def test_a_plugin_cannot_take_a_shipped_name_nor_share_one(plugins):
    plugins("fake = toy_reg:REGISTERED\ntwin = toy_a:REGISTERED\ntwin = toy_b:REGISTERED\n"
            "twin = toy_b:REGISTERED\n",  # the same package found twice is no clash
            toy_reg=register("toy_nowhere:Backend"), toy_a=register("toy_nowhere:A"), toy_b=register("toy_nowhere:B"))
    assert backends.BACKENDS["fake"] is backends.SHIPPED["fake"] and "twin" not in backends.BACKENDS
    assert backends.backend_class("fake").__name__ == "FakeBackend"
    with pytest.raises(BackendError, match=r"backend 'twin' is registered by several plugins "
                                           r"\(twin = toy_a:REGISTERED and twin = toy_b:REGISTERED\)"):
        backends.options_class("twin")
    ignored = [why for why in backends.refused() if "is ignored" in why]
    assert ignored == ["backend plugin entry fake = toy_reg:REGISTERED is ignored: 'fake' is a backend shipped with "
                       "abricot-local (it runs that one); the plugin must register its backend under another name"]


def test_an_option_declared_unlike_another_backend_is_refused_at_load(plugins):
    plugins("one = toy_one:REGISTERED\ntwo = toy_two:REGISTERED\nctx = toy_ctx:REGISTERED\n",
            toy_one=register("toy_nowhere:One", "toy_one_opts:Options"), toy_one_opts=TILT.format(kind="float", default=0.5),
            toy_two=register("toy_nowhere:Two", "toy_two_opts:Options"), toy_two_opts=TILT.format(kind="int", default=1),
            toy_ctx=register("toy_nowhere:Ctx", "toy_ctx_opts:Options"),
            toy_ctx_opts=TILT.format(kind="float", default=0.5).replace("tilt: float", "n_ctx: str"))
    assert list(backends.BACKENDS) == ["llama.cpp", "fake", "one"]
    with pytest.raises(BackendError, match=r"backend 'two' declares option 'tilt' unlike backend 'one' does "
                                           r"\(kind float there, int here\)"):
        backends.backend_options("two", {})
    with pytest.raises(BackendError, match=r"backend 'ctx' declares option 'n_ctx' unlike backend 'llama.cpp'"):
        backends.backend_options("ctx", {})
    tilt = [(spec.kind, kinds) for spec, kinds in backends.option_specs() if spec.name == "tilt"]
    assert tilt == [(float, ("one",))]
    assert backends.backend_options("one", {"tilt": "0.25"}).tilt == 0.25


BACKEND = """
    from abricot_local.backends.fake import FakeBackend
    class Toy(FakeBackend):
        name = "toy"
"""


def test_reads_model_file_is_declared_once_in_the_registration(plugins, monkeypatch, tmp_path):
    plugins("toy = toy_reg:REGISTERED\nlate = toy_late:REGISTERED\n",
            toy_reg=register("toy_cls:Toy", reads_model_file=True), toy_cls=BACKEND.replace('"toy"', '"toy"\n        '
                                                                                           "reads_model_file = True"),
            toy_late=register("toy_late_cls:Late"),
            toy_late_cls="from abricot_local.backends.fake import FakeBackend\n"
                         "class Late(FakeBackend):\n    reads_model_file = False\n")
    assert backends.reads_model_file("toy") and backends.backend_class("toy").name == "toy"
    # the class says False, its registration True (the default): refused, told where it goes
    with pytest.raises(BackendError, match=r"backend 'late' \(toy_late_cls:Late\) sets reads_model_file = False on "
                                           r"its class, but its registration says True: it is declared once, in its "
                                           r"backends.Registered \(reads_model_file=False\)"):
        backends.backend_class("late")
    from abricot_local.models.locate import locate

    with pytest.raises(BackendError, match=r"backend 'late' \(toy_late_cls:Late\) sets reads_model_file"):
        locate("late", backend="late", registry={})  # its label taken for a file's name: the backend is named
    assert not hasattr(base.Declared, "reads_model_file") and not hasattr(base.Declared, "synthetic")
    # reading the registry loads no backend: an entry's backend is known by its registration
    from abricot_local.models.registry import load_registry

    def no(kind):
        raise AssertionError(f"backend_class({kind!r}) called")

    monkeypatch.setattr(backends, "backend_class", no)
    (tmp_path / "m.toml").write_text('[ll]\nbackend = "llama.cpp"\nsource = "local"\npath = "/x/m.gguf"\n'
                                     '[uni]\nbackend = "fake"\n', encoding="utf-8")
    got = load_registry(tmp_path / "m.toml")
    assert got["ll"].source == "local" and got["uni"].source == "synthetic"


CLASS = """
    from abricot_local.backends.base import SCORE, GENERATE, Declared
    from abricot_local.backends.options import ScoringOptions
    class Half(Declared):
        name = "half"
        Options = ScoringOptions
        capabilities = frozenset({SCORE, GENERATE})
        def score(self, r): ...
        def batch_size(self): return 1
"""


def test_a_backend_class_lacking_members_is_refused_naming_them(plugins):
    plugins("half = toy_reg:REGISTERED\n", toy_reg=register("toy_half:Half"), toy_half=CLASS)
    with pytest.raises(BackendError) as err:
        backends.backend_class("half")
    assert str(err.value).startswith("backend 'half' (toy_half:Half) lacks score_many, piece, render_chat, "
                                     "provenance, start_facts, n_ctx, close, generate, make_schedule (Declared.schedule "
                                     "calls it); fix the backend's package")
    assert [why[:52] for why in backends.not_usable()] == ["backend 'half' (toy_half:Half) lacks score_many, pie"]


SESSION = """
    from abricot_local.backends.fake import FakeBackend, FakeSession
    class Bare:  # a session with the decode primitives only
        def __init__(self, options):
            self.inner = FakeSession(options)
        def decode(self, entries): return self.inner.decode(entries)
        def seq_rm(self, *a): return self.inner.seq_rm(*a)
        def seq_cp(self, *a): return self.inner.seq_cp(*a)
        def clear(self): return self.inner.clear()
        def n_ctx(self): return self.inner.n_ctx()
        n_batch = 0
    class Toy(FakeBackend):
        closed = 0
        def __init__(self, model="toy", options=None):
            super().__init__(model, options)
            self.engine.session = Bare(options)
        def close(self):
            type(self).closed += 1
"""


def test_a_session_lacking_members_is_refused_before_any_item_is_scored(plugins):
    plugins("bare = toy_reg:REGISTERED\n", toy_reg=register("toy_bare:Toy", reads_model_file=False), toy_bare=SESSION)
    with pytest.raises(BackendError) as err:
        backends.open_backend("bare", "bare", backends.backend_options("bare", {}))
    assert str(err.value).startswith(
        "backend 'bare' (toy_bare:Toy): its session (toy_bare:Bare) lacks n_batch (must be a positive integer, got 0), "
        "normalized, nonfinite_advice, thread_dependent, token_bytes, is_eog (backends/session.py: Session)")
    assert sys.modules["toy_bare"].Toy.closed == 1  # what it opened is closed
    fake = backends.open_backend("fake", "fake", backends.backend_options("fake", {}))
    assert fake.score(base.Request("a", (" b",))).logprobs  # the shipped ones pass


def _members(protocol: type) -> set[str]:
    return {n for n in {*vars(protocol), *protocol.__annotations__} if not n.startswith("_")}


def test_the_checks_cover_the_protocols_and_the_architecture_lists_them():
    """What the contract checks is what the protocols declare (an instance's ``options``, set by its ``__init__``,
    is not a class's), and ARCHITECTURE.md's "Add a backend" names each member."""
    checked = {*contract.CLASS_MEMBERS, *contract.INSTANCE_MEMBERS, *(m for ms in contract.BY_CAPABILITY.values() for m in ms)}
    assert checked == (_members(base.BackendClass) | _members(base.Backend)) - {"options"}
    assert {*session.SESSION_MEMBERS, *session.GENERATION_MEMBERS} == _members(session.Session)
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text[text.index("## Add a backend"):].split("\n## ")[0]
    missing = [m for m in sorted(checked | _members(session.Session)) if f"`{m}" not in section]
    assert not missing, missing
