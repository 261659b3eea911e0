"""The task options a task declares it uses (Task.uses, Task.prompt_variants): an option given that no
task of a run uses is refused, one that some task lacks is named in that task's warnings (recorded)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.errors import UsageError, recorded_words, render
from abricot_local.tasks.base import TaskOptions


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_an_option_no_task_uses_is_refused_and_one_some_use_is_named():
    from abricot_local.tasks.base import Task
    from abricot_local.tasks.uses import for_task, notes, refuse_unused

    class NoShots(Task):  # a task declaring neither option
        name = "noshots"

        def items(self):
            return []

        def metrics(self, samples):
            return {}

    with pytest.raises(UsageError, match=r"^shots=3 is used by no task of this run \(noshots uses no shots\)"):
        refuse_unused([NoShots], TaskOptions(shots=3))  # Python's words (the command line: --shots 3)
    refuse_unused([NoShots], TaskOptions())  # nothing given: nothing refused
    from abricot_local.tasks.discotex import DiscotexTask

    refuse_unused([NoShots, DiscotexTask], TaskOptions(shots=3))  # discotex uses it
    assert tuple(render(n, recorded_words) for n in notes(NoShots, TaskOptions(shots=3))) == ("--shots 3 does not apply to noshots (noshots uses no shots): "
                                                                                               "not used",)
    assert for_task(NoShots, TaskOptions(shots=3)).shots is None
    assert NoShots(for_task(NoShots, TaskOptions(shots=3))).options.shots is None


def test_a_wording_one_task_lacks_is_named_in_its_warnings(tmp_path, discotex_dir):
    from conftest import FIXTURE

    out = tmp_path / "o"
    r = run("run", "fake", "--backend", "fake", "--tasks", "discotex,abricot_abs", "--data-dir", discotex_dir,
            "--data", f"abricot={FIXTURE}", "--prompt-variant", "calamita", "--limit", 2, "--n-ctx", 8192,
            "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["tasks"]["abricot_abs"]["config"]["prompt_variant"] == "calamita"
    assert doc["tasks"]["discotex"]["config"]["prompt_variant"] == "card"
    assert ("--prompt-variant calamita does not apply to discotex (discotex's prompt variants are card, ita-bench): "
            "not used") in doc["tasks"]["discotex"]["warnings"]
