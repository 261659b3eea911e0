"""The contracts ARCHITECTURE.md states, checked on the source: the layers (imports point down only),
no import cycle, at most 12 modules at the top, modules under 400 lines, shared modules name no task
and no backend, llama_cpp imported only by its backend, and importing the package loads no llama.cpp."""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import pytest

from conftest import Early, early_children_of

PKG = Path(__file__).resolve().parents[1] / "abricot_local"

# ARCHITECTURE.md's layer diagram, top to bottom: a module imports only from its own package
# (first part below abricot_local) or from a lower layer; the top-level modules are the bottom.
LAYERS = (
    ("cli",),
    ("api",),
    ("console", "lm_eval"),
    ("run",),
    ("report",),
    ("analysis",),
    ("tasks",),
    ("models",),
    ("backends",),
    ("gguf",),
    ("record",),
)
TOP_LEVEL_MAX = 12
LINES_MAX = 400
SHARED = ("api", "run", "analysis", "report", "cli", "console", "record", "tasks/catalog.py",
          "metrics.py", "jsonfiles.py")
NOT_SHARED = ("report/html.py",)  # its page data's key "prefix" is not the engine (unchecked before the packages)
LLAMA_CPP_IMPORTERS = {f"abricot_local.backends.llama_cpp.{m}" for m in ("backend", "session", "system", "rpc", "quantize")}


def shared_files():
    """The shared modules' files (a package: every module in it)."""
    for f in SHARED:
        for p in sorted((PKG / f).rglob("*.py")) if (PKG / f).is_dir() else [PKG / f]:
            if p.relative_to(PKG).as_posix() not in NOT_SHARED:
                yield p


@functools.lru_cache(maxsize=None)
def parsed(p: Path) -> ast.Module:
    """A source file's syntax tree, parsed once per session (the tests only read it)."""
    return ast.parse(p.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def walked(p: Path) -> tuple[ast.AST, ...]:
    """Every node of ``parsed(p)``, in ast.walk's order, listed once per session: six tests walk each tree, and
    ast.walk's generator was most of their time."""
    return tuple(ast.walk(parsed(p)))


def module_name(p: Path) -> str:
    name = ".".join(p.relative_to(PKG.parent).with_suffix("").parts)
    return name.removesuffix(".__init__")


@functools.lru_cache(maxsize=None)
def imported(p: Path) -> tuple[tuple[int, str], ...]:
    """(line, module) of every import in ``p``, at any level, relative ones resolved; ``from m import x``
    gives ``m.x`` where that is a module (found once per session, as ``parsed``)."""
    me = module_name(p)
    here = me.split(".") if p.name == "__init__.py" else me.split(".")[:-1]
    out = []
    for node in walked(p):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here[:len(here) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            out += [(node.lineno, base)] + [(node.lineno, f"{base}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return tuple(out)


def imports() -> dict[str, set[str]]:
    """Every module's imports of the package's modules, but of its own packages (a package's
    __init__ runs before its modules whatever they import: `from . import Found` adds no edge)."""
    known = {module_name(p) for p in PKG.rglob("*.py")}
    out = {}
    for p in PKG.rglob("*.py"):
        me = module_name(p)
        out[me] = {m for _, m in imported(p) if m in known and m != me and not me.startswith(m + ".")}
    return out


def layer_of(module: str) -> tuple[int, str]:
    """(layer, unit): the unit is the package below abricot_local, or "" for a top-level module
    (the bottom layer; __main__ runs the cli, and sits with it)."""
    parts = module.split(".")
    unit = parts[1] if len(parts) > 2 or (len(parts) == 2 and (PKG / parts[1]).is_dir()) else ""
    unit = "cli" if module == "abricot_local.__main__" else unit
    return next((i for i, names in enumerate(LAYERS) if unit in names), len(LAYERS)), unit


def test_imports_point_down_the_layers():
    known = {module_name(p) for p in PKG.rglob("*.py")}
    units = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert units == {u for names in LAYERS for u in names}, "a package missing from LAYERS, or gone"
    wrong = []
    for p in sorted(PKG.rglob("*.py")):
        me = module_name(p)
        mine = layer_of(me)
        for line, dep in imported(p):
            if dep not in known or dep == "abricot_local":
                continue
            if me == "abricot_local" and dep.split(".")[:2] == ["abricot_local", "api"]:
                continue  # the package's face: the Python API re-exported lazily (module __getattr__)
            theirs = layer_of(dep)
            if theirs[1] != mine[1] and theirs[0] <= mine[0]:
                wrong.append(f"{p.relative_to(PKG.parent)}:{line} imports {dep} (layer {mine[1] or 'top'} "
                             f"may import only below it)")
    assert not wrong, "\n".join(wrong)


def test_top_level_is_the_face_only():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= TOP_LEVEL_MAX, f"{len(top)} modules at the top of abricot_local/ (at most {TOP_LEVEL_MAX}): {top}"


def test_modules_stay_small():
    long = [f"{p.relative_to(PKG.parent)}: {n} lines" for p in sorted(PKG.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) >= LINES_MAX]
    assert not long, "\n".join(long)


def test_llama_cpp_imported_by_its_backend_only():
    found = {module_name(p) for p in PKG.rglob("*.py") if any(m.split(".")[0] == "llama_cpp" for _, m in imported(p))}
    assert found <= LLAMA_CPP_IMPORTERS, sorted(found - LLAMA_CPP_IMPORTERS)


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
        for node in walked(f):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for n in names:
                    assert not re.fullmatch(re.escape(n), node.value, re.I), f"{f}:{node.lineno} names {n!r}"


# the fresh interpreters two tests read, started before their tests: they run beside the suite's other tests
IMPORT_AND_HELP = (
    "import sys, abricot_local, abricot_local.cli as c, abricot_local.run.execute, abricot_local.run.session\n"
    "from click.testing import CliRunner\n"
    "from abricot_local import backends\n"  # a backend's declarations read from its registration alone
    "assert backends.build_keys('llama.cpp') and backends.has_option('llama.cpp', 'threads')\n"
    "for cmd in (['--help'], ['run', '--help'], ['lm-eval', '--help'], ['compare', '--help']):\n"
    "    r = CliRunner().invoke(c.cli, cmd)\n"
    "    assert r.exit_code == 0, r.output\n"
    "print(sorted(m for m in ('scipy.stats', 'scipy.special', 'pandas') if m in sys.modules))\n"
    "import abricot_local.report.tables, abricot_local.report.plots, abricot_local.report.html\n"
    "print(sorted(m for m in ('llama_cpp', 'matplotlib', 'lm_eval', 'abricot_local.lm_eval.requests')"
    " if m in sys.modules))")
API_NAMES = ("import sys, abricot_local as a\n"
             "names = [getattr(a, n) for n in a.__all__]\n"  # every name of the API resolves (lazily)
             "print(sorted(set(a.__all__) - set(dir(a))), 'llama_cpp' in sys.modules, 'pandas' in sys.modules)")


def early_children(tmp_path_factory) -> dict[str, Early]:
    """Each check's own fresh interpreter (``python -c``), in the repository's folder: started by conftest once the
    tests are collected, one child at a time beside the tests (conftest.start_early)."""
    return {name: Early([sys.executable, "-c", code], timeout=120, cwd=PKG.parent)
            for name, code in (("import_and_help", IMPORT_AND_HELP), ("api_names", API_NAMES))}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    children = early_children_of(__name__, early_children, tmp_path_factory)
    yield children
    for child in children.values():
        child.close()


def test_import_and_help_load_no_llama_cpp(fresh):
    """The package, the CLI, the run loop (run.execute, run.session) and the report's modules imported, and `--help` of the commands:
    neither llama.cpp nor matplotlib nor lm-eval (nor its request code) is loaded, and until the report's modules
    are, neither scipy.stats nor pandas (half a second each: `run --help` took 0.9 s with scipy, 0.3 s without).
    Nor do a backend's build keys and options (backends.build_keys, has_option: its registration's). One process
    for what test_cli, test_report, test_html_report and test_lm_eval each checked in a process of their own."""
    r = fresh["import_and_help"].result()
    assert r.stdout.split() == ["[]", "[]"], r.stdout + r.stderr


def test_import_loads_neither_llama_cpp_nor_pandas_until_a_call_needs_them(fresh):
    r = fresh["api_names"].result()
    assert r.stdout.strip() == "[] False False", r.stdout + r.stderr


def _drawn_layers() -> tuple[tuple[str, ...], ...]:
    """The layers ARCHITECTURE.md draws, top to bottom: each room at the start of a line of its
    diagram ("cli/  ..."), rooms between two "|" lines sharing a layer; "the top:" (the top-level
    modules) closes it."""
    text = (PKG.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    diagram = text.split("## Layers", 1)[1].split("```", 2)[1]
    layers, current = [], []
    for line in diagram.splitlines():
        if line.strip() == "|":
            layers.append(tuple(current))
            current = []
        elif m := re.match(r"([a-z_]+)/\s", line):
            current.append(m.group(1))
    assert current == [], f"rooms drawn below the top-level modules: {current}"
    return tuple(layers)


def test_the_layers_are_the_ones_architecture_md_draws():
    assert _drawn_layers() == LAYERS, "ARCHITECTURE.md's layer diagram and LAYERS (the order checked) differ"


# a command that serves one backend's own protocol (ggml-rpc's server) may import that backend
BACKEND_IMPORTERS = {"abricot_local.cli.rpc"}


def test_shared_code_imports_no_backend_package():
    """A backend's own package (backends/<name>/) is imported only by itself and the registry's
    strings: everything else goes through abricot_local.backends (its classes, options, hooks)."""
    own = {p.name for p in (PKG / "backends").iterdir() if (p / "__init__.py").exists()}
    wrong = []
    for p in sorted(PKG.rglob("*.py")):
        me = module_name(p)
        if me.split(".")[:3] in [["abricot_local", "backends", o] for o in own] or me in BACKEND_IMPORTERS:
            continue
        wrong += [f"{p.relative_to(PKG.parent)}:{line} imports {dep}" for line, dep in imported(p)
                  if dep.split(".")[:2] == ["abricot_local", "backends"] and len(dep.split(".")) > 2
                  and dep.split(".")[2] in own]
    assert not wrong, "\n".join(wrong)


# -- the doors build a request; a run has one path (issue 44) -----------------------------------------------
DOORS = ("cli", "api", "lm_eval")
RUNNING_DOORS = ("cli/run.py", "api/calls.py", "lm_eval/requests.py")  # the doors that start a run
# what only run/ does with a run: the output folder, a model opened for it, the plan's model located
RUN_ONLY = ("abricot_local.run.folder", "abricot_local.run.run_folder", "abricot_local.run.owned",
            "abricot_local.models.given.load", "abricot_local.backends.open_backend", "abricot_local.models.locate.locate")
def _files(*places: str):
    for f in places:
        yield from sorted((PKG / f).rglob("*.py")) if (PKG / f).is_dir() else [PKG / f]


def test_the_doors_build_a_request_and_leave_the_run_to_run():
    """cli/, api/ and lm_eval/ build a run's request and render a result: the doors that start a run build it
    with run.request.request_of, and no door takes an output folder, opens a model for a run or locates one;
    lm_eval/ imports nothing from models/ (its model_args make a request: run/ opens the model)."""
    wrong = []
    for p in _files(*DOORS):
        wrong += [f"{p.relative_to(PKG.parent)}:{line} imports {dep}" for line, dep in imported(p)
                  if any(dep == r or dep.startswith(r + ".") for r in RUN_ONLY)]
    for p in _files("lm_eval"):
        wrong += [f"{p.relative_to(PKG.parent)}:{line} imports {dep}" for line, dep in imported(p)
                  if dep.startswith("abricot_local.models")]
    for f in RUNNING_DOORS:
        if "abricot_local.run.request.request_of" not in {dep for _, dep in imported(PKG / f)}:
            wrong.append(f"{f} starts a run without run.request.request_of")
    assert not wrong, "\n".join(wrong)


def test_one_loop_over_score_many():
    """Outside backends/, a backend's score_many is called in run/execute.py alone (every door's loop)."""
    calls = sorted({str(p.relative_to(PKG)) for p in PKG.rglob("*.py") if p.relative_to(PKG).parts[0] != "backends"
                    for n in walked(p) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "score_many"})
    assert calls == ["run/execute.py"], calls


def test_a_task_option_is_spelled_in_tasks_only():
    """An option is declared once, as a field (tasks/options.py); no module outside tasks/ spells one of them
    that a task declares choices for (shot_sampler): its flag, keyword and key are made from the field."""
    spelled = sorted(str(p.relative_to(PKG)) for p in PKG.rglob("*.py") if p.relative_to(PKG).parts[0] != "tasks"
                     and "shot_sampler" in p.read_text(encoding="utf-8").replace("shot-sampler", "shot_sampler"))
    assert spelled == [], spelled


# where a text outside cli/ and console/ may spell one of abricot-local's own flags (file -> why), everywhere else
# an option is named with errors.opt and each door writes it (a flag, a keyword, a model_args key)
FLAGS_SPELLED = {
    "record/schema.py": "a record's field descriptions, in the record's words (errors.recorded_words)",
    "record/io.py": "names the commands that write other JSON files (report --format json, check --json)",
    "run/record.py": "data warnings a run records, in the record's words",
    "tasks/selection.py": "a task's notes a run records, in the record's words",
    "run/folder.py": "the INTERRUPTED state file's text, in the record's words",
    "report/tables.py": "a report's text, a document of the command line's",
    "run/request.py": "the --until-settled fields' help texts (the command line's help)",
    "backends/options.py": "the scoring fields' help texts (the command line's help)",
    "backends/llama_cpp/options.py": "the llama.cpp fields' help texts (the command line's help)",
    "backends/llama_cpp/rpc.py": "the rpc-server command a lost server is started again with",
}
API_TEXTS = {  # console modules whose texts the API shows too (opt there, as outside console/): flags left, CLI-only
    "console/plan.py": ("--dry-run",),  # Plan's str (api.plan) is its full(); brief() is run's own first lines
}
OTHER_PROGRAMS = {  # other programs' flags that are spelled like one of abricot-local's
    "lm_eval/model.py": ("--model", "--tasks"),  # lm-eval's (run_cli, its model)
    "analysis/lm_eval_input.py": ("--model",),  # the lm-eval command an output records
    "tasks/abricot.py": ("--model",),  # the published run scripts' lm_eval command
    "backends/gpus.py": ("--format",),  # nvidia-smi's
    "backends/llama_cpp/kernels.py": ("--format",),  # nvidia-smi's
}


def _own_flags() -> set[str]:
    import click

    from abricot_local.cli import cli

    own: set[str] = set()

    def collect(cmd) -> None:
        own.update(o for p in cmd.params if isinstance(p, click.Option) for o in (*p.opts, *p.secondary_opts)
                   if o.startswith("--"))
        for sub in getattr(cmd, "commands", {}).values():
            collect(sub)

    collect(cli)
    return own


def test_texts_name_options_by_field_not_by_flag():
    """Outside cli/ and console/ (the command line's own text), a message (an error, a warning, a note, a plan's
    line) names an option with errors.opt, never by the command line's flag, but where FLAGS_SPELLED says why
    (a record's words, the command line's help texts) or the flag is another program's (OTHER_PROGRAMS); and no
    regex rewrites a message."""
    own, wrong = _own_flags(), []
    assert {"--out", "--resume", "--data-dir", "--n-gpu-layers", "--shots"} <= own, own
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG).as_posix()
        if rel.startswith(("cli/", "console/")) and rel not in API_TEXTS or rel in FLAGS_SPELLED:
            continue
        docs = {id(n.body[0].value) for n in walked(p)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for n in walked(p):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
                named = set(re.findall(r"--[a-z][a-z0-9-]*", n.value)) & own
                if named - set(OTHER_PROGRAMS.get(rel, ())) - set(API_TEXTS.get(rel, ())):
                    wrong.append(f"abricot_local/{rel}:{n.lineno} {sorted(named)}")
    assert not wrong, "texts spelling a flag (errors.opt names an option): " + ", ".join(sorted(wrong))
    assert "as_keywords" not in (PKG / "api" / "options.py").read_text(encoding="utf-8")


# where a record's config is read as a dict: its options, at the edges that declare them
CONFIG_READERS = {
    "analysis/runs.py": "task_options/options_of: the one reading of a recorded task's options (RunTask's config)",
    "analysis/lm_eval_input.py": "an lm-eval output's tasks, as RunTasks with their configs",
    "analysis/lm_eval_output.py": "an export: the recorded config written whole into lm-eval's config.abricot_local "
                                  "(the edge lm_eval_input.py reads it back from)",
    "run/request.py": "of_record: the backend's recorded options, parsed by the backend's fields",
}


def test_a_recorded_run_is_read_through_its_types():
    """TaskOptions.from_config has one caller (analysis.runs.task_options), and outside record/ a record's
    config is read as a dict only where its options are parsed by their fields (CONFIG_READERS)."""
    callers, readers = set(), set()
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG).as_posix()
        if rel.startswith("record/"):
            continue
        for n in walked(p):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if n.func.attr == "from_config":
                    callers.add(rel)
                if n.func.attr in ("config_dict", "task_config"):
                    readers.add(rel)
    assert callers == {"analysis/runs.py"}, callers
    assert readers <= set(CONFIG_READERS), readers - set(CONFIG_READERS)

