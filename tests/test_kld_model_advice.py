"""kld's model lookup takes no --model-dir: a run given a bare file name (found in a --model-dir or llama.cpp's cache)
whose file is gone is refused with kld's own advice (put the file back where the run recorded it), not the file
search's (which names --model-dir, an option kld does not take). A stand-in record: nothing loads."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from abricot_local.errors import ResultsError
from abricot_local.run import kld
from abricot_local.run.check import recorded_model


def gone(tmp_path, source="model-dir", as_written="m.gguf"):
    model = SimpleNamespace(path=str(tmp_path / "dir" / "m.gguf"), source=source, as_written=as_written, name="m",
                            sha256="0" * 64)
    return SimpleNamespace(path=tmp_path / "run", record=SimpleNamespace(model=model,
                                                                          config=SimpleNamespace(backend="llama.cpp")))


def test_a_bare_file_name_gone_is_refused_with_kld_advice(tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "llama-cache"))
    run = gone(tmp_path)
    with pytest.raises(ResultsError) as search:  # what kld met before: the search's advice
        recorded_model(run.record)
    assert "model_dirs" in str(search.value)  # (--model-dir, model_dirs=DIR: an option kld does not take)
    with pytest.raises(ResultsError) as refused:
        kld._model(run)
    said = str(refused.value)
    assert "model-dir" not in said and "model_dirs" not in said
    assert f"the recorded model file {tmp_path / 'dir' / 'm.gguf'} is missing" in said and "put the file back" in said


def test_a_bare_file_name_in_llama_cpp_cache_is_looked_up_as_before(tmp_path, monkeypatch):
    cache = tmp_path / "llama-cache"
    cache.mkdir()
    (cache / "m.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("LLAMA_CACHE", str(cache))
    kld._not_searched(gone(tmp_path), "give")  # found by its name: recorded_model opens and checks it
    for source, name in (("hf", "hf:o/r:m.gguf"), ("path", "m.gguf")):  # not a file name searched for
        kld._not_searched(gone(tmp_path, source, name), "give")
