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

from abricot_local.errors import IntegrityError
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
    intact are kept); a failure names what is missing and why (``fetch``'s errors)."""
    cache = fetch.cache_dir()
    got = list(fetch.download_files(discotex_files(), cache / "data" / "discotex", progress=progress))
    got += fetch.download_files(((abricot_data.RELEASE_URL, abricot_data.RELEASE_FILE, abricot_data.RELEASE_SHA256),),
                                cache / "data" / "abricot", progress=progress)
    vocab = cache / VOCAB_FOLDER
    got += ([vocab / name for name, _ in VOCAB_FILES] if _intact(vocab, VOCAB_FILES)
            else fetch_vocab(vocab, progress=progress))
    return got
