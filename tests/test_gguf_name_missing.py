"""A `.gguf` file name found nowhere says where it was looked for (the current folder, each --model-dir,
llama.cpp's cache) and the close matches found here; a --model-dir that is no folder is refused, as a store
named but not here is; a path with a folder part to no file keeps its plain refusal (docs/models.md)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.errors import ModelError, UnknownModelError
from abricot_local.models import stores
from abricot_local.models.locate import locate


@pytest.fixture
def places(home, tmp_path, monkeypatch):
    """(the current folder, a --model-dir holding my-model.gguf, llama.cpp's cache holding qwen.gguf)."""
    here, models, cache = tmp_path / "here", tmp_path / "models" / "sub", tmp_path / "llama-cache"
    for folder in (here, models, cache):
        folder.mkdir(parents=True)
    (models / "my-model.gguf").write_bytes(b"GGUF")  # never opened: only its name is read
    (cache / "qwen.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("LLAMA_CACHE", str(cache))
    monkeypatch.chdir(here)
    return here, models.parent, cache


def test_a_gguf_name_found_nowhere_says_where_it_looked_and_its_close_matches(places):
    here, models, cache = places
    with pytest.raises(UnknownModelError) as err:
        locate("my-modle.gguf", model_dirs=(str(models),), digest=False)
    said = str(err.value)
    assert said.startswith("model file not found: my-modle.gguf is not in "), said
    assert f"the current folder ({here})" in said and f"model_dirs={models}" in said, said
    assert f"llama.cpp's cache ({cache})" in said and said.endswith("Found on this machine: my-model.gguf."), said
    r = CliRunner().invoke(cli, ["run", "my-modle.gguf", "--model-dir", str(models), "--dry-run"])
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and f"--model-dir {models} or llama.cpp's cache" in out, r.output
    assert "give its path, or --model-dir DIR for the folder that holds it" in out, r.output


def test_a_model_dir_that_is_no_folder_is_refused_saying_where_the_file_is(places, tmp_path):
    here, models, cache = places
    missing = tmp_path / "nowhere"
    with pytest.raises(ModelError) as err:
        locate("my-model.gguf", model_dirs=(str(missing),), digest=False)
    said = str(err.value)
    assert said.startswith(f"model_dirs={missing}: no such folder; give the folder that holds my-model.gguf"), said
    assert f"not in the current folder ({here}) or llama.cpp's cache ({cache}) either" in said, said
    with pytest.raises(ModelError, match=f"no such folder; .* \\(without it, qwen.gguf is {cache / 'qwen.gguf'}"):
        locate("qwen.gguf", model_dirs=(str(models), str(missing)), digest=False)  # found elsewhere: said where
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ModelError, match="a-file: no such folder"):  # a file is no folder either
        locate("qwen", model_dirs=(str(tmp_path / "a-file"),), digest=False)
    r = CliRunner().invoke(cli, ["models", "--local", "--model-dir", str(missing)])
    assert r.exit_code == 2 and f"--model-dir {missing}: no such folder" in " ".join(r.output.split()), r.output
    assert stores.find_file("qwen.gguf", (str(models),)).path == cache / "qwen.gguf"  # every folder there: found


def test_a_path_to_no_file_keeps_its_plain_refusal(places):
    for name in ("/x/y.gguf", "./y.gguf", "sub/y.gguf"):
        with pytest.raises(ModelError) as err:
            locate(name, digest=False).ready(None)
        said = str(err.value)
        assert said.startswith("model file not found: ") and "y.gguf" in said and "looked" not in said, said
        assert "current folder" not in said and "Found on this machine" not in said, said
