"""llama.cpp's source as the installed llama-cpp-python vendors it: its sdist from PyPI
(`pip download`, verified), extracted into the user cache, and llama.cpp tools built from it.

Used by perplexity_mc.py (builds `llama-perplexity`) and scale.py (the vocabulary-only
GGUFs of llama.cpp's models/ folder, when no shared/-like folder holds them).

Everything lands in ``<abricot cache>/bench-tools/llama-cpp-python-<version>/``:
``src/`` (the extracted sdist), ``build/`` (cmake), never in the repository.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version as pkg_version
from pathlib import Path

from abricot_local.models import fetch

# SHA-256 of sdists checked here besides pip's own check against the index's hash
# (0.3.36: the same value tests/realdata.py pins).
KNOWN_SDISTS = {"0.3.36": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"}

# The kernels of the portable wheel (GGML_NATIVE=OFF + AVX2/FMA/F16C, OpenMP, llamafile,
# repack; no BMI2: what its llama_print_system_info() says), so both sides run the same code.
# (GGML_NATIVE=OFF alone turns BMI2 on.)
CPU_FLAGS = ("-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=OFF")


def installed_version() -> str:
    return pkg_version("llama-cpp-python")


def root(version: str | None = None) -> Path:
    return fetch.cache_dir() / "bench-tools" / f"llama-cpp-python-{version or installed_version()}"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source(version: str | None = None, log=print) -> Path:
    """The extracted sdist of llama-cpp-python ``version`` (default: the installed one);
    downloaded once with pip (which checks the index's hash), checked against KNOWN_SDISTS."""
    version = version or installed_version()
    dest = root(version) / "src"
    if (dest / "vendor" / "llama.cpp" / "CMakeLists.txt").is_file():
        return dest
    with tempfile.TemporaryDirectory(dir=fetch.cache_dir()) as tmp:
        log(f"pip download llama-cpp-python=={version} (sdist)")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "-q", "-d", tmp, f"llama-cpp-python=={version}"], check=True)
        tarball = next(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        digest = sha256(tarball)
        if version in KNOWN_SDISTS and digest != KNOWN_SDISTS[version]:
            raise SystemExit(f"{tarball.name}: sha256 {digest}, expected {KNOWN_SDISTS[version]}")
        log(f"{tarball.name}: sha256 {digest}" + (" (pinned: ok)" if version in KNOWN_SDISTS else ""))
        part = dest.with_name("src.part")
        shutil.rmtree(part, ignore_errors=True)
        with tarfile.open(tarball) as tar:
            top = tar.getmembers()[0].name.split("/")[0]
            tar.extractall(part, filter="data")
        os.replace(part / top, dest)
        shutil.rmtree(part, ignore_errors=True)
    return dest


def vocab_file(name: str, log=print) -> Path:
    """A vocabulary-only GGUF of llama.cpp's models/ folder (``ggml-vocab-llama-bpe.gguf``):
    from $ABRICOT_TEST_DATA/vocab, the tests' data cache, else the sdist."""
    folders = [Path(os.environ[k]) / "vocab" for k in ("ABRICOT_TEST_DATA",) if os.environ.get(k)]
    folders += [fetch.cache_dir() / "test-data" / "vocab"]
    for folder in folders:
        if (folder / name).is_file():
            return folder / name
    path = source(log=log) / "vendor" / "llama.cpp" / "models" / name
    if not path.is_file():
        raise SystemExit(f"{name} is not in llama.cpp's models/ folder of the sdist")
    return path


def build_tool(target: str, log=print) -> Path:
    """Build one llama.cpp tool (e.g. ``llama-perplexity``) from the sdist's vendored
    llama.cpp with the wheel's CPU kernels (CPU_FLAGS), under ``nice``; cached."""
    src = source(log=log) / "vendor" / "llama.cpp"
    build = root() / "build"
    exe, stamp = build / "bin" / target, build / "abricot-local-flags"
    if exe.is_file() and stamp.is_file() and stamp.read_text() == " ".join(CPU_FLAGS):
        return exe
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    jobs = str(max(1, min(2, os.cpu_count() or 1)))
    configure = ["cmake", "-S", str(src), "-B", str(build), *gen, "-DCMAKE_BUILD_TYPE=Release", *CPU_FLAGS,
                 "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
                 "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_TOOLS=ON", "-DBUILD_SHARED_LIBS=OFF"]
    log(" ".join(configure))
    subprocess.run(["nice", "-n", "10", *configure], check=True, stdout=subprocess.DEVNULL)
    log(f"cmake --build {build} --target {target} -j {jobs}")
    subprocess.run(["nice", "-n", "10", "cmake", "--build", str(build), "--target", target, "-j", jobs], check=True,
                   stdout=subprocess.DEVNULL)
    stamp.write_text(" ".join(CPU_FLAGS))
    return exe


if __name__ == "__main__":
    print(build_tool(sys.argv[1] if len(sys.argv) > 1 else "llama-perplexity"))
