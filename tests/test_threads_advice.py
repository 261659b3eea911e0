"""The advice to score again at a thread count ("resume with --threads N", `merge`'s shard again, into a new folder:
in words, no one door's command): one function, run/resume.py's with_threads, names --threads only for a backend
that has that option (takes_threads, which kld's threads_of reads too); resume's refusal, merge's and kld's all go
through it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from abricot_local import backends
from abricot_local.errors import recorded_words, render
from abricot_local.run import kld, merge, resume


def said(text: str) -> str:
    return render(text, recorded_words)  # options in the command line's words


@pytest.mark.parametrize("takes", [True, False])
def test_threads_named_only_where_the_backend_has_the_option(monkeypatch, takes):
    monkeypatch.setattr(backends, "has_option", lambda kind, name: takes and name == "threads")
    assert resume.takes_threads("fake") is takes
    assert resume.takes_threads("") is False  # not known: never said to have it
    known = said(resume.with_threads("fake", 2))
    shard = said(resume.with_threads("fake", 2, "2/3"))
    if takes:
        assert known == "with --threads 2"
        assert shard == "with --threads 2, into a new folder"
    else:
        assert known == ("with the backend running 2 threads (backend 'fake' has no --threads option: its own "
                         "settings or environment set the count)")
        assert shard == known + ", into a new folder"
    unknown = said(resume.with_threads("", 1))
    assert unknown == "with 1 thread (--threads 1 where the backend has that option)"
    assert said(resume.with_threads("", 1, "1/2")) == unknown + ", into a new folder"
    for advice in (resume.with_threads("fake", 2, "2/3"), resume.with_threads("", 1, "1/2")):
        assert "`" not in advice and "out" not in render(advice)  # no command, in no door's words


def test_an_unknown_backend_is_said_to_have_no_threads_option():
    assert resume.takes_threads("no-such-backend") is False
    assert "backend 'no-such-backend' has no --threads option" in said(resume.with_threads("no-such-backend", 3))


def test_resume_merge_and_kld_read_the_one_function(monkeypatch, tmp_path):
    asked = []
    monkeypatch.setattr(resume, "with_threads", lambda kind, threads, shard=None: asked.append((kind, threads, shard))
                        or "ADVICE")
    monkeypatch.setattr(resume, "takes_threads", lambda kind: asked.append(kind) or True)
    run = SimpleNamespace(record=SimpleNamespace(config=SimpleNamespace(backend="fake")))
    assert merge.at_threads(run, 4, "1/2") == "ADVICE"
    assert resume._with_threads(tmp_path, 2) == "ADVICE"  # nothing there to read: the backend not known
    assert kld.threads_of("fake", SimpleNamespace(threads=3)) == 3
    assert asked == [("fake", 4, "1/2"), ("", 2, None), "fake"]
