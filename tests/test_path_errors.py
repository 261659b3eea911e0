"""A path argument the file system refuses (a name over 255 bytes, a file where a folder is wanted, a
folder where a file is) is one error line naming the path, in every command, never a traceback: the
command group turns such an OSError into it (cli/app.py, paths.path_error)."""

from __future__ import annotations

import errno

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.errors import NoSpaceError, UsageError
from abricot_local.paths import path_error, shown_path
from invented_data import write_discotex

LONG = "x" * 300  # one name over the 255 bytes every common file system allows


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def one_line(r, text: str = "longer than the file system allows") -> str:
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and text in r.output, r.output
    err = [x for x in r.output.splitlines() if x.startswith("error:")]
    assert len(err) == 1 and "xxx...xxx" in err[0] and "bytes)" in err[0], r.output
    return err[0]


@pytest.fixture
def data(tmp_path):
    return write_discotex(tmp_path / "d", 4)


@pytest.mark.parametrize("args", [
    ("run", f"{LONG}.gguf", "--tasks", "discotex"),
    ("run", "tiny", "--backend", "fake", "--tasks", "discotex", "--data-dir", LONG),
    ("quantize", f"{LONG}.gguf", "--to", "Q8_0"),
    ("kld", LONG, LONG),
    ("compare", LONG, LONG),
    ("report", LONG),
    ("check", LONG),
], ids=["run-model", "run-data-dir", "quantize-source", "kld", "compare", "report", "check"])
def test_a_name_over_255_bytes_is_one_line_naming_it(args, tmp_path):
    line = one_line(invoke(*(str(tmp_path / a) if a == LONG else a for a in args)))
    assert str(tmp_path)[:20] in line or "xxxx" in line


def test_an_output_over_255_bytes_too(tmp_path, data):
    r = invoke("run", "tiny", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--limit", "1",
               "--out", tmp_path / "run")
    assert r.exit_code == 0, r.output
    one_line(invoke("report", tmp_path / "run", "-o", tmp_path / LONG))


@pytest.mark.real  # lm-eval indexes its own thousands of task files first (~15 s)
def test_lm_eval_model_over_255_bytes(tmp_path):
    pytest.importorskip("lm_eval")
    one_line(invoke("lm-eval", tmp_path / f"{LONG}.gguf", "--tasks", "discotex_card"))


def test_path_error_names_the_path_and_says_why():
    err = path_error(OSError(errno.ENOTDIR, "Not a directory", "/a/file/sub"))
    assert isinstance(err, UsageError) and str(err) == "/a/file/sub: a part of it that should be a folder is a file"
    assert "is a folder" in str(path_error(IsADirectoryError(errno.EISDIR, "Is a directory", "/a/b")))
    assert isinstance(path_error(OSError(errno.ENOSPC, "No space left on device", "/a/b")), NoSpaceError)
    assert path_error(OSError(errno.ECONNREFUSED, "Connection refused")) is None  # names no path: not ours
    assert shown_path("/a/" + LONG).endswith("(303 bytes)") and len(shown_path("/a/" + LONG)) < 200
