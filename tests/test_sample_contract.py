"""The task contract's samples (issue 28 item 2): a `record.Sample` from `Task.sample` to every
reader, the samples files on disk unchanged byte for byte; a task of another contract version is refused."""

from __future__ import annotations

import hashlib

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.errors import TaskError
from abricot_local.jsonfiles import dumps_line
from abricot_local.record import read_samples
from abricot_local.tasks import written_for_today
from abricot_local.tasks.base import CONTRACT, Task
from conftest import FIXTURE, ROOT

# The samples files of one fake-backend run (below): SHA-256 and size, pinned when the fake backend's
# numbers became exact (issue 39: integer logits, an exact log-softmax, an exact expected_score), so
# the same on every CPU whatever numpy's SIMD dispatch (tests/test_fake_exact.py runs it limited).
# The fake backend's numbers are a function of the text only, so these move only if the files' bytes do.
# Re-pinned when --sample became the first N of one seeded order (issue 47 item 2): other items are drawn;
# the lines of the items both draws hold (6 of ABRICOT's 9 each) came out byte for byte the same.
BEFORE = {
    "samples-abricot_abs.jsonl": ("7d5b1112e60dccac464ec718a375d4669fff2272c2000d2b91f8de5711b71d08", 13904),
    "samples-abricot_inc.jsonl": ("d27789ff60ce8b1c43473bb2290a2bd83ae8314d531f13031443ac0d42224728", 14002),
    "samples-discotex.jsonl": ("1fce4cfde31fafb0c0df32b69800d955ab543bb1f2610d7a26a954b3a1852993", 33214),
}


def test_the_shipped_tasks_write_the_same_samples_files_as_before(tmp_path, discotex_dir):
    out = tmp_path / "run"
    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--data-dir", str(discotex_dir),
                                 "--data", f"abricot={FIXTURE}", "--tasks", "discotex,abricot", "--sample", "9",
                                 "--n-ctx", "8192", "--shots", "1", "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    got = {f.name: (hashlib.sha256(f.read_bytes()).hexdigest(), f.stat().st_size) for f in out.glob("samples-*")}
    assert got == BEFORE


def test_a_recorded_samples_file_reads_as_samples_and_writes_back_byte_for_byte():
    for path in sorted((ROOT / "tests").glob("*/*/samples-*.jsonl")):  # the references
        samples = read_samples(path)
        assert samples and "".join(dumps_line(s.line) for s in samples).encode() == path.read_bytes(), path


# -- the contract's version -------------------------------------------------------------------
class Plain(Task):
    name, version = "plain", "1"

    def items(self):
        return []

    def metrics(self, samples):
        return {}


def test_a_task_of_another_contract_version_is_refused_by_name():
    class Today(Plain):
        contract = CONTRACT

    assert written_for_today(Today) is Today
    for version in (1, CONTRACT + 1):
        other = type("Other", (Plain,), {"contract": version})
        with pytest.raises(TaskError, match=rf"task 'plain' .* is written for task contract {version}; this "
                                            rf"abricot-local runs contract {CONTRACT}"):
            written_for_today(other)
