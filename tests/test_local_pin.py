"""A `source = "local"` entry whose file differs from what it pins (hob review, finding 2): the file is the user's,
so the advice is to fix the entry's `sha256`, `size` or `path` in the models file it names, never to delete the
file; what the tool downloads keeps the download's advice."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local import hashing
from abricot_local.cli import cli
from abricot_local.errors import IntegrityError
from abricot_local.models import locate as modellocate
from gguf_synth import Synth
from invented_data import write_discotex


def local_entry(tmp_path: Path, pin: str) -> tuple[Path, Path]:
    model = Synth().write(tmp_path / "mine.gguf")
    toml = tmp_path / "models.toml"
    toml.write_text(f'[mine]\nsource = "local"\npath = "mine.gguf"\n{pin}\n', encoding="utf-8")
    return model, toml


@pytest.mark.parametrize("key", ["sha256", "size"])
def test_a_local_file_that_differs_from_its_pin_names_the_entry_to_fix_and_is_kept(tmp_path, key):
    wrong = f'sha256 = "{"ab" * 32}"' if key == "sha256" else "size = 12345"
    model, toml = local_entry(tmp_path, wrong)
    before = model.read_bytes()
    with pytest.raises(IntegrityError) as err:
        modellocate.resolve_model_ref("mine", models_file=toml)
    said = str(err.value)
    assert "delete" not in said.lower() and "download it again" not in said and "re-uploaded" not in said, said
    assert f"[mine] in {toml}" in said and f"fix `{key}` there" in said and "`path`" in said, said
    assert "not used" in said and "model 'mine'" in said, said
    assert model.read_bytes() == before  # the user's file is left as it is


def test_the_run_says_it_in_one_line_and_writes_nothing(tmp_path):
    model, toml = local_entry(tmp_path, f'sha256 = "{"cd" * 32}"')
    out = tmp_path / "out"
    data = write_discotex(tmp_path / "d", 4)
    r = CliRunner().invoke(cli, ["run", "mine", "--models", str(toml), "--tasks", "discotex", "--data-dir", str(data),
                                 "--out", str(out)])
    assert r.exit_code != 0 and "sha256 mismatch" in r.output and f"[mine] in {toml}" in r.output, r.output
    assert "Delete it" not in r.output and not out.exists() and model.is_file()


def test_a_right_pin_passes_and_a_download_keeps_the_download_advice(tmp_path):
    model, toml = local_entry(tmp_path, 'sha256 = "{}"')
    toml.write_text(toml.read_text().replace("{}", hashlib.sha256(model.read_bytes()).hexdigest()))
    assert modellocate.resolve_model_ref("mine", models_file=toml).sha256 == hashlib.sha256(model.read_bytes()).hexdigest()
    with pytest.raises(IntegrityError, match="Delete it and retry"):  # no pinned_by: a file the tool downloaded
        hashing.verify_file(model, sha256="ef" * 32, size=None, what="model 'hub'")
    with pytest.raises(IntegrityError, match="delete it and download it again"):
        hashing.verify_file(model, sha256=None, size=1, what="model 'hub'")
