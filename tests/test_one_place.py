"""Logic written once: the plugins' names against the shipped ones (names.plugin_entries, which the task, store and
backend registries read), and the thread count kld compares rows on, as the backend resolves it (its class's
kernel_threads: llama.cpp's own default is said in llama.cpp's code only)."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from types import SimpleNamespace

from abricot_local import names
from abricot_local.backends.base import Declared
from abricot_local.run import kld

WORDS = names.Clashes(ignored="IGNORED {name!r}: {entries}", several="SEVERAL {name!r}: {entries}")


def ep(name: str, value: str) -> EntryPoint:
    return EntryPoint(name, value, "g")


def test_plugin_entries_ignore_a_shipped_name_and_refuse_one_two_plugins_register():
    got = names.plugin_entries([ep("zed", "z:Z"), ep("Own", "a:A"), ep("own", "b:B"), ep("one", "o:O"),
                                ep("one", "o:O")], {"own", "ship"}, WORDS, str.lower)
    assert got.ignored == {"own": "IGNORED 'own': own = a:A and own = b:B"}  # folded: both take the shipped name
    assert list(got.entries) == ["one", "zed"]  # by name; a package found twice is one entry
    assert got.entries["one"] == (ep("one", "o:O"),) and got.several == {}
    assert got.over({"ship": 1, "own": 2}) == {"ship": 1, "own": 2, "one": ep("one", "o:O"), "zed": ep("zed", "z:Z")}
    two = names.plugin_entries([ep("x", "b:B"), ep("x", "a:A")], (), WORDS)
    assert two.several == {"x": "SEVERAL 'x': x = b:B and x = a:A"}
    assert two.over({}) == {"x": ep("x", "b:B")}  # listed (refused when used), its first entry
    assert names.plugin_entries([ep("Own", "a:A")], {"own"}, WORDS).ignored == {}  # not folded: another name


def test_kld_compares_rows_on_the_threads_the_backend_resolves(monkeypatch):
    from abricot_local import backends
    from abricot_local.run import resume

    class Says(Declared):
        @classmethod
        def kernel_threads(cls, options):
            return options.threads * 2 or None  # a backend's own rule, not kld's

    monkeypatch.setattr(resume, "takes_threads", lambda kind: True)
    monkeypatch.setattr(kld, "backend_class", lambda kind: Says)
    monkeypatch.setattr(kld.os, "cpu_count", lambda: 5)
    assert kld.threads_of("says", SimpleNamespace(threads=3)) == 6
    assert kld.threads_of("says", SimpleNamespace(threads=0)) == 5  # the backend gives none: every core
    assert Declared.kernel_threads(SimpleNamespace(threads=4)) == 4 and Declared.kernel_threads(object()) is None
    assert "kernel_threads" in backends.contract.CLASS_MEMBERS


def test_llama_cpp_says_its_own_default_thread_count(monkeypatch):
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend
    from abricot_local.backends.llama_cpp.options import LlamaCppOptions

    monkeypatch.setattr("os.cpu_count", lambda: 7)
    assert LlamaCppBackend.kernel_threads(LlamaCppOptions()) == 7  # no --threads: every core
    assert LlamaCppBackend.kernel_threads(LlamaCppOptions(threads=2)) == 2
    assert kld.threads_of("llama.cpp", LlamaCppOptions()) == 7
