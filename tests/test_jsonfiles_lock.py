"""jsonfiles.locked: one writer of a file at a time (kld.json, calibrations.json, the hash memo), through
``<file>.lock``; a ``.lock`` it did not make (a user's own file of that name) is locked as it is and left byte for
byte, and nothing is done through a link."""

from __future__ import annotations

import os
import threading
import time

import pytest

from abricot_local import jsonfiles
from abricot_local.errors import ResultsError

MINE = b"my notes about notes.json\n\x00\xff"


def _second_writer(path, order: list) -> threading.Thread:
    def write():
        with jsonfiles.locked(path, "test"):
            order.append("second")
    return threading.Thread(target=write)


@pytest.mark.parametrize("before", [False, True], ids=["no lock file", "a user's lock file"])
def test_two_writers_are_serialised(tmp_path, before):
    path = tmp_path / "notes.json"
    lock = tmp_path / "notes.json.lock"
    if before:
        lock.write_bytes(MINE)
    order = []
    with jsonfiles.locked(path, "test"):
        second = _second_writer(path, order)
        second.start()
        time.sleep(0.05)
        assert order == [] and second.is_alive()  # it waits for the first
        order.append("first")
    second.join(5)
    assert order == ["first", "second"]
    if before:
        assert lock.read_bytes() == MINE  # the user's file, byte for byte
    else:
        assert not lock.exists()  # the lock this made, removed when done


def test_a_lock_file_it_did_not_make_survives_byte_for_byte(tmp_path):
    path = tmp_path / "notes.json"
    lock = tmp_path / "notes.json.lock"
    lock.write_bytes(MINE)
    os.chmod(lock, 0o444)
    st = os.stat(lock)
    with jsonfiles.locked(path, "test"):
        jsonfiles.atomic_write(path, "{}")
    after = os.stat(lock)
    assert lock.read_bytes() == MINE and (after.st_ino, after.st_mode, after.st_mtime_ns) == \
        (st.st_ino, st.st_mode, st.st_mtime_ns)


def test_a_link_at_the_locks_name_is_refused_and_left(tmp_path):
    path = tmp_path / "notes.json"
    target = tmp_path / "elsewhere"
    target.write_bytes(MINE)
    lock = tmp_path / "notes.json.lock"
    lock.symlink_to(target)
    with pytest.raises(ResultsError, match="is a link; a lock is never taken through one"), \
            jsonfiles.locked(path, "test"):
        pass
    assert lock.is_symlink() and os.readlink(lock) == str(target) and target.read_bytes() == MINE


def test_a_folder_at_the_locks_name_is_refused(tmp_path):
    (tmp_path / "notes.json.lock").mkdir()
    with pytest.raises(ResultsError, match="is a folder, not the regular file a lock is"), \
            jsonfiles.locked(tmp_path / "notes.json", "test"):
        pass
    assert (tmp_path / "notes.json.lock").is_dir()
