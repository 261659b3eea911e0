"""Real data for the tests: the DisCoTEX release and vocabulary-only GGUFs, found or fetched once.

Each data set is looked for where the tool looks, in this order:

1. ``$ABRICOT_TEST_DATA``: a folder laid out like ``shared/`` (``data/discotex/``, ``vocab/``,
   ``data/abricot/``);
2. the tool's own data cache, for a data set the tool itself downloads (``DataSet.tool_cache``):
   ``<abricot cache>/data/discotex``, where ``abricot-local data pull discotex`` puts it;
3. ``../shared`` beside the repository (developers and CI);
4. the tests' cache, ``<abricot cache>/test-data`` (``~/.cache/abricot-local/test-data`` by
   default), where
5. a one-time download puts it from the public source, pinned and SHA-256 verified:
   the DisCoTEX release files that ``abricot-local data pull discotex`` fetches (same URLs and
   hashes: ``abricot_local.tasks.discotex.RELEASE``) and the TED train file (``discotex.TRAIN``), and the vocabulary files vendored in the
   llama-cpp-python 0.3.36 sdist on PyPI (the sdist is verified, then each extracted file), and the
   ABRICOT release that ``abricot-local data pull abricot`` fetches (``tasks/abricot_data.py``).

Both caches are resolved when this module is imported, i.e. before any test's ``isolated_home``
fixture points ``ABRICOT_CACHE_DIR`` at its tmp folder and sets ``ABRICOT_OFFLINE=1``.
A folder counts only when every file is there with its pinned SHA-256. When none can be had,
:func:`require` skips the test with one short line (conftest.py folds every such skip into one
line of ``-rs``); the summary at the end says where each set was found, or names every file it
needs, where it was looked for and why it could not be downloaded, in lines of at most 120
columns; under ``CI=true`` it fails with that line instead.
`abricot-local data pull --tests` (``abricot_local/tasks/test_data.py``: the names, hashes and the
sdist's extraction live there) fetches every set to where 2. and 4. look, so the suite can run offline.
Nothing is copied into the repository: only names and hashes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator

import pytest

from abricot_local.models import fetch
from abricot_local.errors import AbricotError
from abricot_local.tasks import abricot_data, discotex, test_data

ROOT = Path(__file__).resolve().parents[1]
ENV = "ABRICOT_TEST_DATA"
SHARED = ROOT.parent / "shared"

# The environment as pytest found it, before any per-test monkeypatch: downloads run under it.
_SESSION_ENV = {k: os.environ.get(k) for k in ("ABRICOT_CACHE_DIR", "XDG_CACHE_HOME", "ABRICOT_OFFLINE",
                                                "HF_HUB_OFFLINE")}
_GIVEN = os.environ.get(ENV, "").strip()
GIVEN = Path(_GIVEN).expanduser().resolve() if _GIVEN else None
CACHE = fetch.cache_dir() / "test-data"
TOOL_CACHE = fetch.cache_dir()  # the tool's own cache (its data/ folder: `abricot-local data pull`)
_download_url = fetch.download_url  # bound now: a test that mocks the network cannot redirect it
_download_files = fetch.download_files

class Missing(Exception):
    """No folder holds the data set and it could not be downloaded; str() is the one-line reason."""


FAILED: dict[str, str] = {}  # data set title -> why it could not be had, in full (for the summary)


@dataclass(frozen=True)
class DataSet:
    title: str  # for messages
    folder: str  # relative to a shared/-like root
    files: tuple[tuple[str, str], ...]  # (file name, sha256)
    source: str  # the public source, for messages
    download: Callable[[Path], None]  # fills the folder from the public source
    tool_cache: str = ""  # where the tool keeps it under its own cache (data/discotex), "" if it does not
    pull: str = ""  # the tool's command that fills tool_cache


def _fetch_discotex(dest: Path) -> None:
    _download_files(test_data.discotex_files(), dest, progress=False)  # + the TED train pool of --shots


def _fetch_vocab(dest: Path) -> None:
    test_data.fetch_vocab(dest, download=_download_url)


DISCOTEX = DataSet(
    "DISCOTEX release", "data/discotex",
    tuple((name, sha) for name, _, sha in (*discotex.RELEASE.values(), discotex.TRAIN)),  # + the TED train pool
    f"github.com/davidecolla/DisCoTex@{discotex.RELEASE_COMMIT[:7]}", _fetch_discotex,
    tool_cache="data/discotex", pull="abricot-local data pull discotex",
)
VOCAB = DataSet("vocabulary-only GGUFs", "vocab", test_data.VOCAB_FILES, "the llama-cpp-python 0.3.36 sdist on PyPI",
                _fetch_vocab)


def _fetch_abricot(dest: Path) -> None:
    _download_url(abricot_data.RELEASE_URL, dest / abricot_data.RELEASE_FILE, sha256=abricot_data.RELEASE_SHA256,
                  progress=False)


# The ABRICOT release (dataset_it.csv, 127 rows): the file `abricot-local data pull abricot` fetches.
ABRICOT = DataSet("ABRICOT release", "data/abricot", ((abricot_data.RELEASE_FILE, abricot_data.RELEASE_SHA256),),
                  f"github.com/{abricot_data.RELEASE_REPO}@{abricot_data.RELEASE_COMMIT[:7]}", _fetch_abricot,
                  tool_cache="data/abricot", pull="abricot-local data pull abricot")
DATA_SETS = (DISCOTEX, VOCAB, ABRICOT)
GET_EVERY_SET = "to get every set: `abricot-local data pull --tests` (once, with the network; the suite then runs offline)"


@lru_cache(maxsize=None)
def _sha256(path: Path, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def problem(folder: Path, ds: DataSet) -> str | None:
    """Why ``folder`` does not hold ``ds`` (a missing or changed file), or None when it does."""
    for name, sha in ds.files:
        path = folder / name
        try:
            st = path.stat()
            if _sha256(path, st.st_size, st.st_mtime_ns) != sha:
                return f"{folder}/{name} differs from the pinned sha256"
        except OSError:
            return f"{folder} lacks {name}"
    return None


def candidates(ds: DataSet) -> list[tuple[str, Path]]:
    """(label, folder) in search order: $ABRICOT_TEST_DATA, the tool's data cache (a data set the
    tool downloads itself), ../shared, the tests' cache."""
    out = [(f"${ENV}", GIVEN / ds.folder)] if GIVEN else []
    if ds.tool_cache:
        out.append(("the tool's data cache", TOOL_CACHE / ds.tool_cache))
    return out + [("../shared", SHARED / ds.folder), ("user cache", CACHE / ds.folder)]


def locate(ds: DataSet) -> tuple[str, Path] | None:
    """The first candidate that holds every file of ``ds`` intact; no download."""
    return next(((label, folder) for label, folder in candidates(ds) if problem(folder, ds) is None), None)


@contextlib.contextmanager
def _session_env() -> Iterator[None]:
    """os.environ as pytest found it (offline flags, cache dir) for the duration of a download."""
    saved = {k: os.environ.get(k) for k in _SESSION_ENV}

    def put(values):
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    put(_SESSION_ENV)
    try:
        yield
    finally:
        put(saved)


def obtain(ds: DataSet) -> Path:
    """The folder holding ``ds``: found, or downloaded once into the user cache; else :class:`Missing`."""
    found = locate(ds)
    if found:
        return found[1]
    dest = CACHE / ds.folder
    try:
        with _session_env():
            ds.download(dest)
    except (AbricotError, OSError) as exc:
        why = getattr(exc, "cause", None) or str(exc).split("\n")[0]
    else:
        why = problem(dest, ds)
        if why is None:
            return dest
    FAILED[ds.title] = why if len(why) <= 100 else why[:97] + "..."
    short = why.rsplit("/", 1)[-1] if " differs from " in why else why.split(": ")[0].split(" (")[0]
    short = short if len(short) <= 40 else short[:37] + "..."
    raise Missing(f"{ds.title} not found: {ENV}=DIR with DIR/{ds.folder}/ ({short}; files: end of report)")


def is_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


def require(ds: DataSet) -> Path:
    """:func:`obtain`, or skip the test with the reason (a failure under CI=true)."""
    try:
        return obtain(ds)
    except Missing as exc:
        why = str(exc)
    if is_ci():  # outside the except block: the report shows the one line, not a chained exception
        pytest.fail(f"{why} [CI=true: missing test data is a failure]", pytrace=False)
    pytest.skip(why)


def skip_location() -> tuple[str, int]:
    """Where :func:`require` skips: every skip for missing data is reported as from here, so that
    ``-rs`` folds them into one line."""
    import inspect

    return str(Path(__file__)), inspect.getsourcelines(require)[1]


def describe() -> str:
    """For the end of the test report, per data set: where it was found; else every file it needs,
    where it was looked for, and why it could not be downloaded (lines of at most 120 columns)."""
    from abricot_local.cache import shown
    from abricot_local.errors import fold

    lines = []
    for ds in DATA_SETS:
        found = locate(ds)
        if found:
            lines.append(f"test data, {ds.title}: {found[0]} ({shown(found[1])})")
            continue
        why = FAILED.get(ds.title)
        lines.append(f"test data, {ds.title}: not found; " + (f"the download from {ds.source} failed: {why}" if why
                                                             else "no test asked for it"))
        lines.append(f"  needs: {', '.join(name for name, _ in ds.files)}")
        looked = [f"{label} {shown(folder)}" + (f" (`{ds.pull}`)" if label == "the tool's data cache" and ds.pull else "")
                  for label, folder in candidates(ds)]
        lines.append(f"  looked in: {'; '.join(looked)}")
    if GIVEN and not all(locate(ds) and locate(ds)[0] == f"${ENV}" for ds in DATA_SETS):
        lines.append(f"note: ${ENV}={GIVEN} does not hold every file (see tests/realdata.py)")
    if not all(locate(ds) for ds in DATA_SETS):
        lines += [GET_EVERY_SET, f"  or {ENV}=DIR holding " + ", ".join(f"DIR/{ds.folder}/" for ds in DATA_SETS)
                  + " (the files named above)"]
    return fold("\n".join(lines))
