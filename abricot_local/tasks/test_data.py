"""The data the test suite needs, as `abricot-local data pull --tests` fetches it, each file
SHA-256 verified: the DisCoTEX release and its TED train file (the few-shot pool) and the ABRICOT
release into the tool's data cache (where `data pull discotex` and `data pull abricot` put them),
and llama.cpp's vocabulary-only GGUFs, as vendored in the llama-cpp-python 0.3.36 sdist on PyPI,
into ``<cache>/test-data/vocab``. tests/realdata.py looks there and reads these names and hashes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tarfile
from pathlib import Path

from abricot_local.cache import shown
from abricot_local.errors import DownloadError, IntegrityError, opt, url_lines
from abricot_local.models import fetch
from abricot_local.tasks import abricot_data, discotex

# llama.cpp's models/ folder as vendored in the llama-cpp-python 0.3.36 sdist (PyPI), and the
# SHA-256 of each file used, as extracted from that sdist.
SDIST_URL = ("https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca"
             "773a59fe7cf3/llama_cpp_python-0.3.36.tar.gz")
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
SDIST_MODELS = "llama_cpp_python-0.3.36/vendor/llama.cpp/models"
_INP = "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"  # the same test text for all five
VOCAB_FILES = (
    ("ggml-vocab-gpt-2.gguf", "cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac"),
    ("ggml-vocab-gpt-2.gguf.inp", _INP),
    ("ggml-vocab-gpt-2.gguf.out", "48e8c4cb3ad5c37915b225f872222567c1c4dd4d66951aa53460c8d152ff6d60"),
    ("ggml-vocab-llama-bpe.gguf", "97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e"),
    ("ggml-vocab-llama-bpe.gguf.inp", _INP),
    ("ggml-vocab-llama-bpe.gguf.out", "118abf2034a197fc5c9dec5204dfdeee7004c7c70952ae577f66b99e212fab9b"),
    ("ggml-vocab-llama-spm.gguf", "16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69"),
    ("ggml-vocab-llama-spm.gguf.inp", _INP),
    ("ggml-vocab-llama-spm.gguf.out", "ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29"),
    ("ggml-vocab-phi-3.gguf", "967d7190d11c4842eab697079d98d56c2116e10eb617be355a2733bfc132e326"),
    ("ggml-vocab-phi-3.gguf.inp", _INP),
    ("ggml-vocab-phi-3.gguf.out", "ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29"),
    ("ggml-vocab-qwen2.gguf", "44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c"),
    ("ggml-vocab-qwen2.gguf.inp", _INP),
    ("ggml-vocab-qwen2.gguf.out", "de785bb305cc6fa9d43908ed5da337f853c0b79e971348fcfb9f0915a39c5363"),
)
VOCAB_FOLDER = "test-data/vocab"  # under the cache


def discotex_files() -> tuple[tuple[str, str, str], ...]:
    """(URL, name, SHA-256) of the DisCoTEX files the tests read: the test release and the TED
    train file (the pool of --shots on rebuilt items)."""
    name, sub, sha = discotex.TRAIN
    train = (discotex.RELEASE_URL.format(commit=discotex.RELEASE_COMMIT, folder=sub, name=name), name, sha)
    return (*discotex.release_files(), train)


def fetch_vocab(dest: Path, *, download=None, progress: bool = False) -> list[Path]:
    """Download the sdist (verified) next to ``dest``, extract the pinned files in one pass, delete
    it; ``download``: the function that fetches a URL (``fetch.download_url``'s signature)."""
    wanted = dict(VOCAB_FILES)
    get = download or fetch.download_url
    tarball = get(SDIST_URL, dest.parent / ".sdist" / SDIST_URL.rsplit("/", 1)[1], sha256=SDIST_SHA256,
                  progress=progress)
    try:
        with tarfile.open(tarball, "r|gz") as tar:
            for member in tar:
                folder, _, name = member.name.rpartition("/")
                if folder != SDIST_MODELS or name not in wanted or not member.isfile():
                    continue
                data = tar.extractfile(member).read()
                got = hashlib.sha256(data).hexdigest()
                if got != wanted[name]:
                    raise IntegrityError(f"{name} in {SDIST_URL}: sha256 {got}, expected {wanted[name]}")
                dest.mkdir(parents=True, exist_ok=True)
                part = dest / f".{name}.part"
                part.write_bytes(data)
                os.replace(part, dest / name)
                del wanted[name]
    except (tarfile.TarError, OSError) as exc:
        raise IntegrityError(f"cannot extract the vocabulary files from {tarball}: {exc}") from None
    finally:
        tarball.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            tarball.parent.rmdir()
    if wanted:
        raise IntegrityError(f"{SDIST_URL} lacks {', '.join(sorted(wanted))} under {SDIST_MODELS}")
    return [dest / name for name, _ in VOCAB_FILES]


def _intact(folder: Path, files) -> bool:
    return all((folder / name).is_file() and fetch.sha256_file(folder / name) == sha for name, sha in files)


def pull_test_data(*, progress: bool = True) -> list[Path]:
    """Every file the test suite reads, downloaded where the tests look (files already there
    intact are kept); a failure (offline, an HTTP error, a changed file) stops the pull and names every
    file still missing, each with its URL and the folder it goes into, and where the tests look
    (:class:`TestDataNotDownloaded`)."""
    cache = fetch.cache_dir()
    sets = _sets(cache)
    got: list[Path] = []
    for i, (folder, files, _) in enumerate(sets):
        try:
            if files is VOCAB_FILES:
                got += [folder / name for name, _ in VOCAB_FILES] if _intact(folder, VOCAB_FILES) \
                    else fetch_vocab(folder, progress=progress)
            else:
                got += fetch.download_files(files, folder, progress=progress)
        except IntegrityError:
            raise
        except DownloadError as exc:  # the later sets are not tried: offline, they would wait for the same timeout
            failed = set(getattr(exc, "names", ()) or ())
            raise TestDataNotDownloaded(getattr(exc, "cause", "") or str(exc).split("\n")[0],
                                        sets[i:], failed if failed else None) from None
    return got


def _sets(cache: Path):
    """(folder, files, URL) of each set --tests fetches: ``files`` (url, name, sha256) each, or VOCAB_FILES (name,
    sha256), extracted from the sdist at URL."""
    return [(cache / "data" / "discotex", discotex_files(), None),
            (cache / "data" / "abricot",
             ((abricot_data.RELEASE_URL, abricot_data.RELEASE_FILE, abricot_data.RELEASE_SHA256),), None),
            (cache / VOCAB_FOLDER, VOCAB_FILES, SDIST_URL)]


class TestDataNotDownloaded(DownloadError):
    """`data pull --tests` could not get every file: why (``cause``), then every file of the sets not had yet
    (the failed set's missing ones, each later set's not already intact), each with its URL, by the folder it goes
    into; then where the tests look for each set (tests/realdata.py's order)."""

    __test__ = False  # not a pytest class

    def __init__(self, cause: str, sets, failed: set[str] | None):
        self.cause = cause
        lines, n = [], 0
        for k, (folder, files, sdist) in enumerate(sets):
            if sdist:
                names = [name for name, sha in files if not _intact(folder, ((name, sha),))]
                if names:
                    n += len(names)
                    lines += [f"  into {shown(folder)}: extract from the sdist's {SDIST_MODELS}/", *url_lines((sdist,), (), "    "),
                              *(f"        {'  '.join(names[j:j + 3])}" for j in range(0, len(names), 3))]
                continue
            missing = [(u, name) for u, name, sha in files
                       if (name in failed if k == 0 and failed is not None else not _intact(folder, ((name, sha),)))]
            if missing:
                n += len(missing)
                lines += [f"  into {shown(folder)}:", *url_lines([u for u, _ in missing], [m for _, m in missing],
                                                                  "    ")]
        home = shown(fetch.cache_dir())
        lines += ["The tests look for each set in $ABRICOT_TEST_DATA (DIR/data/discotex/, DIR/data/abricot/, "
                  "DIR/vocab/),",
                  f"the tool's data cache ({home}/data/discotex/, {home}/data/abricot/), a shared/ folder "
                  "beside the repository,",
                  f"then {home}/test-data (data/discotex/, data/abricot/, vocab/)."]
        flag = opt("tests")
        super().__init__("\n".join([f"could not get {n} file{'s' * (n != 1)} that `data pull {flag}` "
                                    f"fetches: {cause}", *lines]))
