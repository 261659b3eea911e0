"""What a backend declares for the run/ code that joins a run's parts, with no backend named there: the provenance
keys of its own that must agree between shards (``Registered.build_keys``, merge), and whether it has a ``threads``
option (``backends.has_option``: the advice merge, --resume and kld give, and kld's comparing threads)."""

from __future__ import annotations

import os
from dataclasses import replace
from importlib.metadata import EntryPoint
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from abricot_local import backends
from abricot_local.backends import SHIPPED, Registered
from abricot_local.backends.contract import BackendError, checked_class
from abricot_local.backends.fake import FakeBackend
from abricot_local.backends.options import ScoringOptions
from abricot_local.cli import cli

BAD = Registered("abricot_local.backends.fake:FakeBackend", "abricot_local.backends.options:ScoringOptions",
                 build_keys="runtime_version")  # a string, not a tuple of keys


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_llama_cpp_declares_its_build_and_its_threads_option_with_no_runtime_loaded():
    assert backends.build_keys("llama.cpp") == ("llama_cpp_python", "system_info") and backends.build_keys("fake") == ()
    assert backends.has_option("llama.cpp", "threads") and not backends.has_option("fake", "threads")
    assert not backends.has_option("fake", "vocab_only")  # an internal field is no option a user can give
    # with no runtime loaded: test_architecture's test_import_and_help_load_no_llama_cpp asks them in a fresh process


@pytest.fixture
def version(monkeypatch):
    """The fake backend records ``runtime_version`` (its own provenance key): the state's."""
    state = {"v": "1"}
    real = FakeBackend.provenance
    monkeypatch.setattr(FakeBackend, "provenance",
                        lambda self: replace(real(self), extra={**real(self).extra, "runtime_version": state["v"]}))
    return state


def test_merge_refuses_shards_whose_declared_build_differs_and_only_those(tmp_path, discotex_dir, version,
                                                                         monkeypatch):
    base = ["run", "fake", "--backend", "fake", "--data-dir", discotex_dir, "--tasks", "discotex", "--sample", 4]
    for k, v in ((1, "1"), (2, "2")):
        version["v"] = v
        assert invoke(*base, "--shard", f"{k}/2", "--out", tmp_path / f"s{k}").exit_code == 0
    shards = [tmp_path / "s1", tmp_path / "s2"]
    r = invoke("merge", *shards, "--out", tmp_path / "undeclared")  # not declared: it may differ (as platform may)
    assert r.exit_code == 0, r.output
    monkeypatch.setitem(backends.BACKENDS, "fake", replace(SHIPPED["fake"], build_keys=("runtime_version",)))
    r = invoke("merge", *shards, "--out", tmp_path / "declared")
    assert r.exit_code != 0 and "provenance runtime_version differs" in r.output, r.output
    assert not (tmp_path / "declared").exists()


def test_merge_of_a_backend_not_usable_here_says_so(tmp_path, discotex_dir, monkeypatch):
    base = ["run", "fake", "--backend", "fake", "--data-dir", discotex_dir, "--tasks", "discotex", "--sample", 2]
    for k in (1, 2):
        assert invoke(*base, "--shard", f"{k}/2", "--out", tmp_path / f"s{k}").exit_code == 0
    monkeypatch.delitem(backends.BACKENDS, "fake")
    r = invoke("merge", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "m")
    assert r.exit_code != 0 and "backend 'fake', which cannot be used here" in r.output, r.output


def test_a_registration_or_a_class_that_declares_build_keys_amiss_is_refused():
    ep = EntryPoint(name="bad", value=f"{__name__}:BAD", group=backends.GROUP)
    with pytest.raises(BackendError, match=r"its build_keys must be a tuple of provenance keys .* got 'runtime_version'"):
        backends._registration("bad", ep, {})

    class Own(FakeBackend):
        build_keys = ("runtime_version",)

    with pytest.raises(BackendError, match=r"sets build_keys = \('runtime_version',\) on its class, but its "
                                           r"registration says \(\)"):
        checked_class("own", "x:Own", Own, ScoringOptions, False, ())
    assert checked_class("own", "x:Own", Own, ScoringOptions, False, ("runtime_version",)) is Own


def test_thread_advice_names_threads_only_for_a_backend_that_has_it(tmp_path, discotex_dir, monkeypatch):
    from abricot_local.analysis.loading import load_run
    from abricot_local.errors import recorded_words, render
    from abricot_local.run import merge, resume
    from abricot_local.run.kld import threads_of

    def thread_refusal(*args):  # options in the command line's words
        return render(resume.thread_refusal(*args), recorded_words)

    def at_threads(*args):
        return render(merge.at_threads(*args), recorded_words)

    out = tmp_path / "o"
    assert invoke("run", "fake", "--backend", "fake", "--data-dir", discotex_dir, "--tasks", "discotex", "--sample", 2,
                  "--out", out).exit_code == 0
    said = thread_refusal(out, [(1, 5)], 2)  # a run it grows, scored at 1 thread
    assert "resume with the backend running 1 thread (backend 'fake' has no --threads option" in said, said
    assert "--threads 1" not in said
    run = load_run(out)
    assert "backend 'fake' has no --threads option" in at_threads(run, 1, "2/2") and "--threads 1" not in \
        at_threads(run, 1, "2/2")
    given = SimpleNamespace(threads=3)
    assert threads_of("fake", given) == max(1, os.cpu_count() or 1)  # its options have no threads: not read
    monkeypatch.setattr(backends, "has_option", lambda kind, name: name == "threads")
    assert "resume with --threads 1" in thread_refusal(out, [(1, 5)], 2)
    assert at_threads(run, 1, "2/2") == "with --threads 1, into a new folder"
    assert threads_of("fake", given) == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "resume with 1 thread (--threads 1 where the backend has that option)" in thread_refusal(empty, [(1, 5)], 2)
