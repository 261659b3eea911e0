"""The example task plugin (examples/task-plugin), installed with pip and found through its entry
point, through `tasks`, `run`, `check` and `report --plot` (the fake backend: the plugin, not a
model, is under test). Marked real: it pip-installs the example (a package build)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "examples" / "task-plugin"
pytestmark = pytest.mark.real  # a package build


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory):
    """The plugin pip-installed into a folder on PYTHONPATH: this interpreter's environment plus
    the plugin, for subprocesses only, so no other test sees a fourth task."""
    site = tmp_path_factory.mktemp("plugin-site")
    build = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                            "--target", str(site), str(PLUGIN)], capture_output=True, text=True,
                           timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    return env


def cli(env, *args, timeout=600):
    r = subprocess.run([sys.executable, "-m", "abricot_local", *map(str, args)], env=env, capture_output=True,
                       text=True, timeout=timeout)
    return r


def test_plugin_task_through_tasks_run_check_and_report(plugin_env, tmp_path):
    listing = cli(plugin_env, "tasks", "--json")
    assert listing.returncode == 0, listing.stderr
    rows = {r["name"]: r for r in json.loads(listing.stdout)}
    assert rows["capitali"]["items"] == 16 and rows["capitali"]["plugin"] == "abricot_capitali:CapitaliTask"
    assert rows["capitali"]["data_path"].endswith("capitali.jsonl")

    out = tmp_path / "run"
    r = cli(plugin_env, "run", "fake", "--backend", "fake", "--tasks", "capitali", "--out", out)
    assert r.returncode == 0, r.stderr
    res = json.loads((out / "results.json").read_text())
    assert res["tasks"]["capitali"]["n"] == 16 and res["tasks"]["capitali"]["chance"] == {"accuracy": 0.25}
    samples = [json.loads(x) for x in (out / "samples-capitali.jsonl").read_text().splitlines()]
    assert {s["source"] for s in samples} == {"nord", "centro", "sud"}
    assert all(len(s["logprobs"]) == 4 for s in samples)

    chk = cli(plugin_env, "check", out)
    assert chk.returncode == 0 and "reproduced" in chk.stdout, chk.stdout + chk.stderr

    figs = tmp_path / "figs"
    rep = cli(plugin_env, "report", out, "--plot", figs)
    assert rep.returncode == 0, rep.stderr
    assert "capitali.accuracy" in rep.stdout
    names = sorted(p.name for p in figs.glob("*.png"))
    assert any(n.endswith("-capitali-confusion.png") for n in names) and "bar-capitali.accuracy.png" in names


def test_without_the_plugin_the_task_is_unknown(tmp_path):
    r = cli(dict(os.environ), "run", "fake", "--backend", "fake", "--tasks", "capitali")
    assert r.returncode == 2 and "unknown task 'capitali'" in r.stderr
