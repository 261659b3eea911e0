"""The default --out of runs started in the same second, the temporary files a killed download or assembly
leaves, a download cut short, and the printed commands quoted for a path with control or bidirectional
characters (fake backend, real DISCOTEX data, a test server on 127.0.0.1)."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.cli.run import resume_command
from abricot_local.errors import DownloadError, shell_word
from abricot_local.models import fetch, pypi, quant_folder
from abricot_local.models.temps import PART, remove_stale, temp_beside, temp_pattern
from abricot_local.names import path_part
from abricot_local.report.safe import visible
from abricot_local.run import owned, session
from abricot_local.run import request as run_request
from conftest import fail_after


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def base(discotex_dir):
    return ["run", "fake", "--backend", "fake", "--data-dir", str(discotex_dir), "--tasks", "discotex",
            "--sample", "2"]


# -- 1. the default folder of runs started in the same second ---------------------------------------
def test_runs_started_in_the_same_second_get_folders_of_their_own(tmp_path):
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: owned.fresh_folder(Path("results") / "m", "20261205-204635"), range(8)))
    folders = [f for f, _ in got]
    assert len(set(folders)) == 8 and all(f.is_dir() for f in folders)
    names = sorted(f.name for f in folders)
    assert names == ["20261205-204635", *(f"20261205-204635-{n:02d}" for n in range(2, 9))]
    assert sorted(names + ["20261205-204634", "20261205-204636"])[1:-1] == names  # sorted between the seconds
    made = [chain for f, chain in got if f.name == "20261205-204635"][0]
    assert made[0].name == "20261205-204635"


def test_a_second_run_in_the_same_second_writes_its_own_folder_and_resumes_it(tmp_path, monkeypatch, base):
    class Now:
        @staticmethod
        def now(tz=None):
            from datetime import datetime
            return datetime(2026, 12, 5, 20, 46, 35, tzinfo=tz)

    monkeypatch.setattr(run_request, "datetime", Now)
    other = tmp_path / "results/fake/20261205-204635"
    other.mkdir(parents=True)  # another run's, started in the same second (it holds nothing yet)
    fail_after(monkeypatch, 1, KeyboardInterrupt)
    monkeypatch.setattr("sys.argv", ["abricot-local", *base])
    r = invoke(*base)
    assert r.exit_code == 130, r.output
    line = next(ln for ln in r.output.splitlines() if ln.startswith("resume with: "))
    assert line.endswith(f"--out {tmp_path / 'results/fake/20261205-204635-02'} --resume"), line  # absolute
    assert not any(other.iterdir())  # the other run's folder untouched
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    r = invoke(*base, "--out", "results/fake/20261205-204635-02", "--resume")  # the command as printed
    assert r.exit_code == 0 and (tmp_path / "results/fake/20261205-204635-02/results.json").is_file(), r.output


def test_a_default_folder_a_run_left_empty_is_removed(tmp_path, monkeypatch, base):
    request = run_request.request_of("fake", {}, backend="fake")
    folders = session.Folders(request)
    folder = folders.of("fake", "some model")
    assert folder == Path("results/some model") / request.stamp and folder.is_dir()
    assert folders.of("fake", "some model") == folder  # made once
    assert folders.of("fake") is None  # not located yet: no folder
    folders.drop_unused()
    assert not (tmp_path / "results").exists()
    kept = session.Folders(run_request.request_of("fake", {}, backend="fake"))
    (kept.of("fake", "m") / "x").write_text("written")
    kept.drop_unused()
    assert (tmp_path / "results" / "m" / kept.request.stamp / "x").is_file()


def test_a_run_refused_after_its_default_folder_was_made_leaves_none(tmp_path, base, discotex_dir):
    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--data-dir", str(discotex_dir), "--tasks",
                                 "discotex", "--until-settled"])  # refused once its folder is named: no row
    assert r.exit_code != 0 and "Traceback" not in r.output, r.output
    assert not (tmp_path / "results").exists(), list((tmp_path / "results").rglob("*"))


def test_a_sweep_folder_is_made_once_for_the_run_and_its_copies(tmp_path):
    import dataclasses

    request = run_request.request_of(["fake", "other"], {}, backend="fake")
    folders = session.Folders(request)
    root = folders.root
    assert root.is_dir() and root == Path("results") / f"sweep-{request.stamp}"
    assert folders.root == root and folders.of("other") == root / "other"
    assert session.Folders(dataclasses.replace(request, sample=3)).of("other") != root / "other"  # another run's
    assert dataclasses.replace(request, sample=3) == dataclasses.replace(request, sample=3)  # the request: a value
    out = run_request.request_of(["fake", "other"], {}, backend="fake", out=tmp_path / "s")
    assert session.Folders(out).root == tmp_path / "s" == out.out_folder("fake").parent
    assert not (tmp_path / "s").exists()  # --out: made by the run, not here


def test_a_sweep_folder_name_stays_ascii_unlike_path_part():
    for name, want in (("hf:org/repo:Q4_K_M", "hf_org_repo_Q4_K_M"), ("models/x.gguf", "x"), ("città", "citt")):
        assert run_request.slug(name) == want and path_part(name) != want


# -- 2. the temporary files a killed download or assembly left ------------------------------------
def test_a_stale_temp_is_removed_and_a_held_one_is_left(tmp_path):
    dst = tmp_path / "model.gguf"
    fd, held = temp_beside(dst)
    stale = tmp_path / ".model.gguf.abcd1234.part"
    stale.write_bytes(b"x" * 10)
    others = [tmp_path / n for n in (".other.gguf.abcd1234.part", ".model.gguf.abcd1234.tmp", "model.gguf.part",
                                     ".model.gguf.abcd12345.part")]
    for p in others:
        p.write_bytes(b"mine")
    link = tmp_path / ".model.gguf.zzzz9999.part"
    link.symlink_to(others[0])
    pattern = temp_pattern(dst.name, PART)
    assert pattern.fullmatch(held.name)
    assert remove_stale(tmp_path, pattern) == [stale.name]  # its maker gone: its lock is free
    assert held.exists() and link.is_symlink() and all(p.exists() for p in others)
    os.close(fd)  # the maker ends: the kernel drops its lock
    assert remove_stale(tmp_path, pattern) == [held.name] and not held.exists()


def test_a_temp_of_a_process_killed_with_sigkill_is_removed(tmp_path):
    code = ("import os, signal, sys; from pathlib import Path; from abricot_local.models.temps import temp_beside; "
            "fd, p = temp_beside(Path(sys.argv[1])); os.write(fd, b'half'); os.kill(os.getpid(), signal.SIGKILL)")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "d.bin")])
    assert r.returncode == -9
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and temp_pattern("d.bin").fullmatch(left[0])
    assert remove_stale(tmp_path, temp_pattern("d.bin")) == left and not any(tmp_path.iterdir())


def test_quantize_clean_stale_keeps_its_naming(tmp_path):
    for name in (".Q8_0.gguf.abcd1234.tmp", ".models.toml.abcd1234.tmp", "keep.gguf", ".keep.abcd1234.tmp"):
        (tmp_path / name).write_text("x")
    assert quant_folder.clean_stale(tmp_path) == [".Q8_0.gguf.abcd1234.tmp", ".models.toml.abcd1234.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".keep.abcd1234.tmp", "keep.gguf"]


def test_an_assembly_removes_a_killed_assemblys_temp_and_leaves_a_live_one(tmp_path, monkeypatch):
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(tmp_path / "cache"))
    models = tmp_path / "cache" / "models"
    models.mkdir(parents=True)
    stale = models / ".tiny.gguf.abcd1234.part"
    stale.write_bytes(b"half a model")
    fd, live = temp_beside(models / "tiny.gguf")  # another process assembling it now
    module = SimpleNamespace(MODEL_NAME="tiny.gguf", assemble=lambda out, overwrite: Path(out).write_bytes(b"GGUF"))
    spec = SimpleNamespace(name="tiny", package="tiny-pkg", file="tiny.gguf", version=None,
                           sha256_for=lambda i: None, size_for=lambda i: None)
    try:
        got = pypi._assemble(spec, module, False)
        assert got.read_bytes() == b"GGUF"
        assert sorted(p.name for p in models.iterdir()) == sorted(["tiny.gguf", live.name])
    finally:
        os.close(fd)


# -- 2, 3. downloads: a stale part removed, a body cut short refused --------------------------------
class _Serve(http.server.BaseHTTPRequestHandler):
    body, announced = b"", 0

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(self.announced))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server(monkeypatch):
    monkeypatch.delenv("ABRICOT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Serve)
    threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/f.bin"
    httpd.shutdown()
    httpd.server_close()


def test_a_download_cut_short_is_refused_not_published(tmp_path, server, monkeypatch):
    monkeypatch.setattr(_Serve, "body", b"x" * 100_000)
    monkeypatch.setattr(_Serve, "announced", 200_000)
    dest = tmp_path / "data" / "f.bin"
    with pytest.raises(DownloadError, match=r"ended after 100,000 bytes of the 200,000"):
        fetch.download_url(server, dest, progress=False)
    assert not (tmp_path / "data").exists()  # nothing published, no part left, its folder gone


def test_a_download_removes_a_killed_downloads_part_and_leaves_a_live_one(tmp_path, server, monkeypatch):
    monkeypatch.setattr(_Serve, "body", b"y" * 1000)
    monkeypatch.setattr(_Serve, "announced", 1000)
    dest = tmp_path / "data" / "f.bin"
    dest.parent.mkdir()
    stale = dest.parent / ".f.bin.abcd1234.part"
    stale.write_bytes(b"y" * 10)
    fd, live = temp_beside(dest)
    try:
        assert fetch.download_url(server, dest, progress=False).read_bytes() == b"y" * 1000
        assert sorted(p.name for p in dest.parent.iterdir()) == sorted(["f.bin", live.name])
    finally:
        os.close(fd)


# -- 4. the printed commands: pasted into a shell, the same words ---------------------------------
WORDS = ["plain", "my runs/it's", "/tmp/my runs/città è \u202eevil/ a\tb x", "a\nb\r", "\x1b]0;t\x07", "\u00a0",
         "$(touch pwned)", "", "\\'\"", "\ue000", "é\U0001F600"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_every_word_pasted_into_bash_is_itself(tmp_path):
    quoted = [shell_word(w) for w in WORDS]
    assert quoted[0] == "plain" and quoted[1] == "'my runs/it'\"'\"'s'" and quoted[-1] == "'é\U0001F600'"
    assert quoted[2] == "$'/tmp/my runs/città è \\u202eevil/ a\\tb x'"
    assert all(visible(q) == q for q in quoted)  # nothing left for the terminal to act on, or to escape
    r = subprocess.run(["bash", "-c", "printf '%s\\0' " + " ".join(quoted)], capture_output=True, cwd=tmp_path,
                       env={"LC_ALL": "C.UTF-8", "PATH": os.environ["PATH"]})
    assert r.stdout.decode("utf-8").split("\0")[:-1] == WORDS and not (tmp_path / "pwned").exists()


def test_the_resume_command_names_the_exact_folder(monkeypatch, base):
    folder = Path(WORDS[2])
    monkeypatch.setattr("sys.argv", ["abricot-local", *base])
    line = resume_command(folder)
    assert line.endswith(f" --out {shell_word(str(folder))} --resume") and "\t" not in line and "\u202e" not in line


def test_a_file_given_for_out_is_left_and_another_out_asked(tmp_path, base):
    mine = tmp_path / "notes.txt"
    mine.write_text("mine\n")
    for out in (mine, "/dev/null"):
        r = invoke(*base, "--out", out)
        assert r.exit_code != 0 and f"{out} is not a folder" in r.output and "choose another --out" in r.output
        assert "remove" not in r.output, r.output
    assert mine.read_text() == "mine\n"
