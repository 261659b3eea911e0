"""A run folder that is there but cannot take its lock file (a read-only mount) is said so, naming the lock file, where
the message said the folder could not be created (run.folder.OutputDir.acquire); a folder that cannot be made still
says that."""

from __future__ import annotations

import errno

import pytest

from abricot_local.errors import ResultsError
from abricot_local.run import folder as run_folder


def read_only(*_args, **_kw):
    raise OSError(errno.EROFS, "Read-only file system")


def test_a_folder_there_that_takes_no_lock_is_said_so(tmp_path, monkeypatch):
    there = tmp_path / "run"
    there.mkdir()
    monkeypatch.setattr(run_folder, "open_own", read_only)
    with pytest.raises(ResultsError) as err:
        run_folder.OutputDir(there).acquire()
    assert str(err.value) == f"cannot write the lock file {there / '.lock'} in {there}: Read-only file system"
    monkeypatch.setattr(run_folder.Path, "mkdir", read_only)
    with pytest.raises(ResultsError) as err:
        run_folder.OutputDir(tmp_path / "new").acquire()
    assert str(err.value) == f"cannot create output folder {tmp_path / 'new'}: Read-only file system"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"] and not any(there.iterdir())
