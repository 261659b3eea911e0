"""One path for one job (a reviewer's list): the memo's atomic write and lock, a name made a path part,
the synthetic calibration key, --data-dir taken from its field by check and kld, the seed declared once."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local import hashing, jsonfiles
from abricot_local.cli import cli
from conftest import FIXTURE


def _memo_litter(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != "sha256-memo.json")


def test_the_memo_is_written_by_the_one_atomic_write(tmp_path):
    """The umask's mode, as calibrations.json has (mkstemp's 0600 before), and nothing else left."""
    f = tmp_path / "model.bin"
    f.write_bytes(b"abc")
    mask = os.umask(0o022)
    try:
        hashing.memo_store(f, "ab" * 32)
    finally:
        os.umask(mask)
    memo = hashing.memo_file()
    assert memo.stat().st_mode & 0o777 == 0o644
    assert _memo_litter(memo.parent) == []
    assert jsonfiles.read_json(memo)[os.path.realpath(f)]["sha256"] == "ab" * 32


def test_a_memo_write_stopped_by_ctrl_c_leaves_the_old_memo_and_no_temp_file(tmp_path, monkeypatch):
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"a")
    b.write_bytes(b"b")
    hashing.memo_store(a, "aa" * 32)
    before = hashing.memo_file().read_bytes()

    def interrupted(fd):
        raise KeyboardInterrupt

    with monkeypatch.context() as mp, pytest.raises(KeyboardInterrupt):  # Ctrl-C is not swallowed (best effort)
        mp.setattr(os, "fsync", interrupted)
        hashing.memo_store(b, "bb" * 32)
    assert hashing.memo_file().read_bytes() == before
    assert _memo_litter(hashing.memo_file().parent) == []  # no temp file, no lock file


def test_a_memo_writer_waits_for_the_lock_and_keeps_the_other_entries(tmp_path):
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"a")
    b.write_bytes(b"b")
    hashing.memo_store(a, "aa" * 32)
    memo = hashing.memo_file()
    with jsonfiles.locked(memo, "test"):
        writer = threading.Thread(target=hashing.memo_store, args=(b, "bb" * 32))
        writer.start()
        time.sleep(0.1)
        assert os.path.realpath(b) not in jsonfiles.read_json(memo)  # waiting on the lock
    writer.join(5)
    held = jsonfiles.read_json(memo)
    assert held[os.path.realpath(a)]["sha256"] == "aa" * 32 and held[os.path.realpath(b)]["sha256"] == "bb" * 32


def test_a_memo_that_cannot_be_written_costs_only_a_rehash(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(blocker / "cache"))  # under a file: no folder can be made
    f = tmp_path / "m.bin"
    f.write_bytes(b"m")
    hashing.memo_store(f, "cd" * 32)  # no error
    assert not (blocker / "cache").exists()


HOSTILE = ["gemma-3-270m", "hf:org/repo:Q4_K_M", "../../etc", "a b#c%d?e", "\x07bell\u202e", "...", ""]


@pytest.mark.parametrize("name", HOSTILE)
def test_names_made_path_parts(name):
    """A figure's file name stays inside what a link takes as it is; a rung's base is a registry alias; an ordinary
    name is itself in each."""
    from abricot_local.models.quantize import _alias_part
    from abricot_local.names import path_part
    from abricot_local.report.plots import _slug

    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", _slug(name, "run")), _slug(name, "run")
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", _alias_part(name)), _alias_part(name)
    part = path_part(name, "model")
    assert "/" not in part and part not in (".", "..") and part.isprintable()
    if name == "gemma-3-270m":
        assert _slug(name) == _alias_part(name) == path_part(name) == name


def test_quantize_default_folder_is_one_path_part(monkeypatch, tmp_path, vocab_dir):
    """A label holding a separator or `..` (a store's or hub's) names one folder under the cache's quants/."""
    from abricot_local.cache import cache_dir
    from abricot_local.models import quant_folder, quantize

    class Stop(Exception):
        pass

    def stop(folder):
        raise Stop(folder)

    monkeypatch.setattr(quantize, "_source", lambda source, models: ("org/../x", vocab_dir / "ggml-vocab-gpt-2.gguf",
                                                                      None))
    monkeypatch.setattr(quant_folder, "check", stop)
    with pytest.raises(Stop) as got:
        quantize.make_ladder("x", "Q8_0")
    assert got.value.args[0] == cache_dir() / "quants" / "org_.._x"


def test_the_synthetic_calibration_key_is_made_once(monkeypatch):
    """A fake model calibrated (its key made by calibration.calibrate) is found by the dry run's own lookup; the
    key is no model file's SHA-256 to a record."""
    import abricot_local.models.given as given
    from abricot_local.backends.fake import FakeBackend
    from abricot_local.backends.options import ScoringOptions
    from abricot_local.models.ref import synthetic_ref
    from abricot_local.record.io import _real_sha
    from abricot_local.run import calibration, machine_cost
    from abricot_local.run.cost import Measured

    monkeypatch.setattr(given, "load", lambda ref, options, force: FakeBackend("m", options))
    monkeypatch.setattr(calibration, "timings", lambda backend: None)
    monkeypatch.setattr(calibration, "fit", lambda t, load_s, facts: calibration.Fit(Measured(1e-3, 256, 1e-3, 1e-4,
                                                                                              load_s)))
    ref, opts = synthetic_ref("m", "fake", None), ScoringOptions()
    assert machine_cost._speed(ref, FakeBackend, opts, None, False, None)[0] is None
    made, _ = machine_cost._speed(ref, FakeBackend, opts, None, True, None)  # calibrates: calibration.calibrate's key
    assert made is not None
    assert [c.sha256 for c in calibration.load()] == [calibration.synthetic_key("m")]
    assert machine_cost._speed(ref, FakeBackend, opts, None, False, None)[0] == made  # the dry run's key: the same
    assert not _real_sha(calibration.synthetic_key("m")) and _real_sha("ab" * 32)


def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_check_and_kld_take_data_dir_from_its_field_as_run_does(tmp_path):
    """The same help, parser and refusal: a file given for the folder is refused before anything is read."""
    file = tmp_path / "mini.csv"
    file.write_bytes(FIXTURE.read_bytes())
    said = {}
    for args in (("run", "fake", "--backend", "fake", "--tasks", "abricot_abs"), ("check", tmp_path / "nope"),
                 ("kld", tmp_path / "nope", tmp_path / "nope2")):
        r = _invoke(*args, "--data-dir", file)
        said[args[0]] = (r.exit_code, r.output.strip())
    assert said["check"] == said["kld"] == said["run"], said
    assert said["run"][0] == 2 and said["run"][1].startswith(f"error: --data-dir {file} is a file, not a folder")
    helps = {name: next(p.help for p in cli.commands[name].params if p.name == "data_dir")
             for name in ("run", "check", "kld", "compare", "report")}
    assert len(set(helps.values())) == 1, helps


def test_the_seed_is_declared_once():
    """TaskOptions.seed is --seed and recorded; ScoringOptions.seed is set from it (no flag of its own): one
    declaration's default, range and help."""
    from abricot_local.backends.options import ScoringOptions
    from abricot_local.option_fields import specs
    from abricot_local.tasks.options import TaskOptions

    task = next(s for s in specs(TaskOptions) if s.name == "seed")
    scoring = next(s for s in specs(ScoringOptions) if s.name == "seed")
    same = ("kind", "many", "optional", "default", "help", "min", "max", "choices", "parse")
    assert {k: getattr(task, k) for k in same} == {k: getattr(scoring, k) for k in same}
    assert task.flag and task.record == "always" and not scoring.flag and not scoring.record
