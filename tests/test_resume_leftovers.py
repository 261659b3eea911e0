"""Three leftovers around a resume and a model's file: a run made without --sample holds every item, so a --resume
with a --sample below a task's items is the shrink it is (record.io's rule, worded with what the run holds and what
was asked), in the run and its dry run; a link where a run keeps its files (the checkpoint folder, or any file in it)
is refused before anything is read through it, alike by `run --resume`, its dry run and `runs` (owned.refuse_links);
a model file of an installed Python package that fails its check is the package's, to reinstall, never to delete
(hashing.verify_file's ``reinstall``). Fake backend, 8 invented DISCOTEX items; a fake package on sys.path."""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import fail_after
from invented_data import write_discotex

from abricot_local.cli import cli
from abricot_local.errors import IntegrityError, ModelError

FAKE = ("run", "fake-model", "--backend", "fake", "--tasks", "discotex", "--n-ctx", "4096")


def invoke(*args, code: int = 0):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == code, r.output
    return r


def tree(folder):
    """Every path under ``folder`` (links not followed) with its bytes, or its link's target."""
    out = {}
    for here, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = os.path.join(here, name)
            out[os.path.relpath(p, folder)] = (os.readlink(p) if os.path.islink(p) else
                                               None if os.path.isdir(p) else Path(p).read_bytes())
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A finished run without --sample and an interrupted one (3 of 8 items saved), and their data."""
    tmp = tmp_path_factory.mktemp("leftovers")
    data = write_discotex(tmp / "discotex", per_source=4)
    invoke(*FAKE, "--data-dir", data, "--out", tmp / "whole")
    with pytest.MonkeyPatch.context() as m:
        fail_after(m, 3, KeyboardInterrupt)
        invoke(*FAKE, "--data-dir", data, "--out", tmp / "cut", code=130)
    return tmp, data


# -- 1. a run without --sample does not shrink -----------------------------------------------------------------------
def test_a_sample_on_a_run_without_one_is_refused_as_a_shrink(made):
    tmp, data = made
    out = tmp / "whole"
    before = tree(out)
    for extra in ((), ("--dry-run",)):
        r = invoke(*FAKE, "--data-dir", data, "--sample", 5, "--out", out, "--resume", *extra, code=2)
        said = " ".join(r.output.split())
        assert f"cannot resume {out} with --sample 5: it holds a run without --sample" in said, said
        assert "a run does not shrink" in said and "give no --sample" in said, said
        assert "config differs" not in said, said
    assert tree(out) == before


# -- 2. a link in the checkpoint: one refusal at every door ---------------------------------------------------------
@pytest.mark.parametrize("linked", [".checkpoint", ".checkpoint/run.json", ".checkpoint/threads.jsonl",
                                    ".checkpoint/samples-discotex.jsonl"])
def test_a_link_in_the_checkpoint_is_refused_alike_and_nothing_read_through(made, tmp_path, linked):
    tmp, data = made
    out = tmp_path / "run"
    shutil.copytree(tmp / "cut", out)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(out / linked, elsewhere)
    os.symlink(elsewhere, out / linked)
    before, target = tree(out), tree(tmp_path)
    refusal = f"{out / linked} is a symbolic link"
    listed = invoke("runs", out)
    assert "--resume refuses it: " + refusal in " ".join(listed.output.split()), listed.output
    for extra in (("--dry-run",), ()):
        r = invoke(*FAKE, "--data-dir", data, "--out", out, "--resume", *extra, code=2)
        said = " ".join(r.output.split())
        assert refusal in said and "choose another --out" in said, said
        assert "saved in --out" not in said and "items left" not in said, said  # nothing counted through it
    assert tree(out) == before and tree(tmp_path) == target  # still INTERRUPTED; nothing written anywhere


# -- 3. a packaged model's file is reinstalled, never deleted ---------------------------------------------------------
GGUF = b"GGUF" + struct.pack("<IQQ", 3, 0, 0) + bytes(range(256)) * 4
GGUF_SHA = hashlib.sha256(GGUF).hexdigest()
ASSEMBLER = ("from pathlib import Path\nMODEL_NAME = 'A.gguf'\n"
             "def assemble(output_path, overwrite=False):\n    Path(output_path).write_bytes({content!r})\n")


def packaged(tmp_path, monkeypatch, name, *, shipped: bytes | None = None, assembles: bytes | None = None):
    """models.toml naming the fake package ``name`` (version 2.0) on sys.path: a shipped file, or an assembler."""
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(tmp_path / "cache"))
    pkg = tmp_path / "site" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(ASSEMBLER.format(content=assembles) if assembles is not None else "")
    if shipped is not None:
        (pkg / "M.gguf").write_bytes(shipped)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    user = tmp_path / "u.toml"
    user.write_text(f'[pk]\nsource = "pypi"\npackage = "{name.replace("_", "-")}"\nmodule = "{name}"\n'
                    f'version = "2.0"\nfile = "M.gguf"\nsha256 = "{GGUF_SHA}"\n')
    return user, pkg


@pytest.mark.parametrize("how", ["shipped", "assembled"])
def test_a_damaged_packaged_model_says_reinstall_the_package(tmp_path, monkeypatch, how):
    from abricot_local.models.locate import resolve_model_ref

    name = f"fake_pkg_leftover_{how}"
    damaged = GGUF[:-1] + b"\x00"
    user, pkg = packaged(tmp_path, monkeypatch, name, **{"shipped" if how == "shipped" else "assembles": damaged})
    with pytest.raises(IntegrityError) as err:
        resolve_model_ref("pk", models_file=user)
    said = str(err.value)
    assert "sha256 mismatch" in said and f'pip install --force-reinstall "{name.replace("_", "-")}==2.0"' in said
    assert "delete it" not in said.lower() and "re-uploaded" not in said, said
    if how == "shipped":
        assert (pkg / "M.gguf").read_bytes() == damaged  # the package's file left as it is


def test_a_broken_package_is_reinstalled_not_installed_again(tmp_path, monkeypatch):
    """pip install of an installed package does nothing: the advice for a broken one forces the reinstall."""
    from abricot_local.models.locate import resolve_model_ref
    from abricot_local.models.pypi import reinstall_hint
    from abricot_local.models.registry import load_registry

    name = "fake_pkg_leftover_import"
    user, pkg = packaged(tmp_path, monkeypatch, name)
    (pkg / "__init__.py").write_text("raise ImportError('a chunk package is missing')\n")
    with pytest.raises(ModelError, match=r'reinstall it: pip install --force-reinstall "fake-pkg-leftover-import==2\.0"'):
        resolve_model_ref("pk", models_file=user)
    spec = load_registry()["gemma-3-270m"]  # the embedded default: its chunks' packages reinstalled with it
    assert reinstall_hint(spec) == f'pip install --force-reinstall "{spec.package}=={spec.version}"'
