"""The task contract's samples (issue 28 item 2): a `record.Sample` from `Task.sample` to every
reader, the samples files on disk unchanged byte for byte, and tasks written against the
contract before (dict samples, dict-taking metrics) still run through the adapter."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from abricot_local.backends.fake import FakeBackend
from abricot_local.backends.options import ScoringOptions
from abricot_local.cli import cli
from abricot_local.errors import ResultsError, TaskError
from abricot_local.evaluation.runner import score_items
from abricot_local.jsonfiles import dumps_line
from abricot_local.record import Sample, read_samples
from abricot_local.tasks.base import CONTRACT, DataSpec, Item, MetricInput, Task, TaskOptions
from abricot_local.tasks.contract import Contract1, adapted
from conftest import FIXTURE, ROOT

# The samples files of one fake-backend run (below): SHA-256 and size, pinned when the fake backend's
# numbers became exact (issue 39: integer logits, an exact log-softmax, an exact expected_score), so
# the same on every CPU whatever numpy's SIMD dispatch (tests/test_fake_exact.py runs it limited).
# The fake backend's numbers are a function of the text only, so these move only if the files' bytes do.
BEFORE = {
    "samples-abricot_abs.jsonl": ("f02a3de06ce91cea7ee95d2e16e696861de7577c06e09b168eaf73183c13c030", 13906),
    "samples-abricot_inc.jsonl": ("bfc68fe540fd8609438f802fd6a59c3359119db19e85d101b7cbb1deeb8e1961", 14009),
    "samples-discotex.jsonl": ("e5074c09390a0272acc3117a08294783b36b7266acbd39193de6ab61897fe63b", 32410),
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
    for path in sorted((ROOT / "tests").glob("*/*/samples-*.jsonl")):  # the references and the v1 run
        samples = read_samples(path)
        assert samples and "".join(dumps_line(s.line) for s in samples).encode() == path.read_bytes(), path


# -- the adapter: tasks written against contract 1 ---------------------------------------------
def _plugin(folder: Path, name: str):
    """The example plugin's module from ``folder`` (not installed: tests/test_plugin.py installs it)."""
    spec = importlib.util.spec_from_file_location(name, folder / "abricot_capitali" / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CapitaliTask


def _scored(task: Task) -> list[Sample]:
    items = task.items()
    return [task.sample(item, scored) for item, scored in score_items(items, FakeBackend("fake", ScoringOptions()))]


def test_the_example_plugin_of_either_contract_gives_the_same_samples_and_metrics():
    old = _plugin(ROOT / "tests" / "data" / "task-plugin-contract1", "capitali_contract1")
    new = _plugin(ROOT / "examples" / "task-plugin", "capitali_contract2")
    assert (old.contract, new.contract) == (1, CONTRACT) and adapted(new) is new
    run_old, run_new = adapted(old)(TaskOptions()), new(TaskOptions())
    assert isinstance(run_old, old) and isinstance(run_old, Contract1) and type(run_old).__name__ == "CapitaliTask"
    a, b = _scored(run_old), _scored(run_new)
    assert all(isinstance(s, Sample) for s in a) and [s.line for s in a] == [s.line for s in b] and len(a) == 16
    assert run_old.metrics(a) == run_new.metrics(b) and "accuracy_ci95" in run_new.metrics(b)
    (acc,) = run_old.metric_inputs(a)  # the contract's default, given Samples
    assert list(acc.x) == [s.pred for s in a]
    with pytest.raises(TypeError):  # what the adapter is for: contract 1's metrics read dicts
        old(TaskOptions()).metrics(a)


class Extending(Task):
    """A task of contract 1 at its fullest: it extends the base's sample dict, and its metrics and
    metric_inputs read its own field by key."""

    name, version = "extending", "1"
    data = DataSpec(key="extending", kind="file", how="none")

    def items(self):
        return [Item(id=f"e{k}", source="s", prefix="", context=f"Quanto fa {k} + 1?", choices=("uno", "due"),
                     continuations=(" uno", " due"), gold=k % 2, fields={"k": k}) for k in range(4)]

    def sample(self, item, scored):
        rec = super().sample(item, scored)
        rec["twice"] = 2 * rec["k"]
        return rec

    def metric_inputs(self, samples):
        return (MetricInput("even", "accuracy", np.array([s["twice"] % 4 == 0 for s in samples]),
                            np.array([s["gold"] == 0 for s in samples])),)

    def metrics(self, samples):
        (inp,) = self.metric_inputs(samples)
        return {"even": float(np.mean(inp.x == inp.y)), "n_seen": len([s["id"] for s in samples])}


def test_a_contract_1_task_extending_the_sample_dict_runs_through_the_adapter():
    task = adapted(Extending)(TaskOptions())
    samples = _scored(task)
    assert [s.fields["twice"] for s in samples] == [0, 2, 4, 6] and samples[0].fields["k"] == 0
    assert list(samples[0].line)[:3] == ["id", "source", "context"] and list(samples[0].line)[-2:] == ["k", "twice"]
    assert task.metrics(samples) == {"even": 1.0, "n_seen": 4}
    assert list(task.metric_inputs(samples)[0].x) == [True, False, True, False]


def test_a_contract_1_sample_that_does_not_hold_together_or_an_unknown_contract_is_refused():
    class Broken(Extending):
        def sample(self, item, scored):
            return {**super().sample(item, scored), "pred": 7}

    with pytest.raises(ResultsError, match=r"task extending's sample of item 'e0' is malformed .*pred 7 is not"):
        _scored(adapted(Broken)(TaskOptions()))

    class Future(Extending):
        contract = CONTRACT + 1

    with pytest.raises(TaskError, match=rf"written for task contract {CONTRACT + 1}; this abricot-local runs"):
        adapted(Future)
