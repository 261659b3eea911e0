"""`models --paths` (issue 39 item 7): each model on this machine and its file's path, whole on a
line of its own; `--local --paths` every GGUF here."""

from __future__ import annotations

import struct

from click.testing import CliRunner

from abricot_local.cli import cli

GGUF = b"GGUF" + struct.pack("<IQQ", 3, 0, 0)  # a valid header: no tensors, no keys


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_models_paths_shows_each_registry_model_here_and_its_file(home, tmp_path):
    models = tmp_path / "w"
    models.mkdir()
    (models / "m.gguf").write_bytes(GGUF)
    toml = tmp_path / "models.toml"
    toml.write_text(f'[mine]\nsource = "local"\npath = "{models / "m.gguf"}"\n[elsewhere]\nsource = "local"\n'
                    f'path = "{tmp_path / "nothere.gguf"}"\n')
    r = invoke("models", "--paths", "--models", toml)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    at = next(k for k, ln in enumerate(lines) if ln.startswith("mine ("))
    assert lines[at + 1] == f"  {models / 'm.gguf'}" and "elsewhere" not in r.output
    other = tmp_path / "other"
    other.mkdir()
    (other / "x-Q4_0.gguf").write_bytes(GGUF + b"\x00")
    r = invoke("models", "--local", "--paths", "--models", toml, "--model-dir", other)
    assert r.exit_code == 0, r.output
    assert f"  {other / 'x-Q4_0.gguf'}" in r.output.splitlines() and f"  {models / 'm.gguf'}" in r.output.splitlines()


def test_models_says_where_to_find_the_paths(home):
    r = invoke("models")
    assert r.exit_code == 0 and "abricot-local models --paths" in " ".join(r.output.split())
