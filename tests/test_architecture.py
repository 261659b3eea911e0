"""The contracts ARCHITECTURE.md states, checked on the source: no import cycle, shared
modules name no task and no backend, and importing the package loads no llama.cpp."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "abricot_local"
SHARED = ("evaluation/runner.py", "evaluation/planning.py", "evaluation/check.py", "report/tables.py", "report/plots.py", "evaluation/results.py", "cli", "console",
          "tasks/catalog.py", "analysis/baselines.py", "metrics.py", "report/sample_table.py", "analysis/compare.py", "report/comparison.py", "analysis/stats.py",
          "record", "analysis/runs.py", "jsonfiles.py", "evaluation/merge.py", "analysis/labels.py", "report/texttable.py", "analysis/views.py",
          "report/pairs.py", "planner/dry_run.py", "planner/cost.py", "planner/calibration.py")


def shared_files():
    """The shared modules' files (a package: every module in it)."""
    for f in SHARED:
        yield from sorted((PKG / f).rglob("*.py")) if (PKG / f).is_dir() else [PKG / f]


def module_name(p: Path) -> str:
    name = ".".join(p.relative_to(PKG.parent).with_suffix("").parts)
    return name.removesuffix(".__init__")


def imports() -> dict[str, set[str]]:
    """Every module's imports of the package, at any level (function-level imports included)."""
    known = {module_name(p) for p in PKG.rglob("*.py")}
    out: dict[str, set[str]] = {}
    for p in PKG.rglob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("abricot_local"):
                deps.add(node.module)
                deps.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("abricot_local"))
        out[module_name(p)] = deps & known - {module_name(p)}
    return out


def test_no_import_cycle():
    graph = imports()
    state: dict[str, int] = {}

    def visit(n, path):
        state[n] = 1
        for d in graph.get(n, ()):
            assert state.get(d) != 1, "import cycle: " + " -> ".join(path + [d])
            if d not in state:
                visit(d, path + [d])
        state[n] = 2

    for m in graph:
        if m not in state:
            visit(m, [m])


def test_shared_modules_name_no_task_and_no_backend():
    from abricot_local.backends import BACKENDS
    from abricot_local.backends.engines import ENGINES
    from abricot_local.tasks import all_task_names, groups

    names = [*all_task_names(), *groups(), *BACKENDS, *ENGINES]
    for f in shared_files():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for n in names:
                    assert not re.fullmatch(re.escape(n), node.value, re.I), f"{f}:{node.lineno} names {n!r}"


def test_import_and_help_load_no_llama_cpp():
    code = ("import sys, abricot_local, abricot_local.cli as c\n"
            "from click.testing import CliRunner\n"
            "assert CliRunner().invoke(c.cli, ['run', '--help']).exit_code == 0\n"
            "print('llama_cpp' in sys.modules, 'matplotlib' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "False False", r.stdout + r.stderr
