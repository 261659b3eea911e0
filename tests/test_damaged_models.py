"""Damaged model files, made here from the real small models, through the CLI (issue 16).

Each run is a child process (`python -m abricot_local run ...`), so a crash in llama.cpp could
not take pytest down, and each has a timeout, so a hang fails instead of blocking. Every case
must end with one line `error: ...` (the only error line), exit code 2 (a refused input), no
traceback and no results.json or samples file.

Weight damage (NaN, 0xFF runs) leaves the header intact and the size unchanged: it passes the
structural check, reaches llama.cpp, and must stop with the non-finite logits error. Header
damage is refused by gguf_check before llama.cpp opens the file; those copies keep the model's
real header and leave the data as a hole (sparse file, same size), since only the header is read.
A 0x00 run gives finite logits (zero weights are valid numbers): only a pinned SHA-256 catches it.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from abricot_local.models import fetch
from abricot_local.gguf.check import read_header

pytestmark = pytest.mark.real
TIMEOUT = 600  # seconds per run; a scored run of 3 items takes ~10 s on 2 cores
NON_FINITE = "non-finite logits"

ROWS = {  # invented paragraphs: the damage, not the data, is under test
    "discotex_1_ted_test_set_release.tsv": [
        ("Il mio quartiere è cambiato molto negli ultimi anni.", "Oggi ci sono più biciclette che automobili."),
        ("Abbiamo iniziato a coltivare un orto sul tetto della scuola.", "I bambini raccolgono i pomodori."),
        ("La biblioteca apre anche la domenica mattina.", "Molte famiglie ci vanno dopo la colazione."),
        ("Mio nonno riparava orologi in una piccola bottega.", "Ogni ingranaggio aveva per lui una storia."),
        ("Il treno delle sette arriva sempre in ritardo.", "Così ho imparato a leggere in piedi sul binario."),
    ],
    "discotex_1_wiki_test_set_release.tsv": [
        ("Il fiume attraversa tre regioni prima di sfociare nel mare.", "Lungo il suo corso sorgono molti mulini."),
        ("La chiesa fu costruita nel dodicesimo secolo.", "Il campanile venne aggiunto due secoli dopo."),
        ("Il paese è noto per la produzione di formaggi.", "Ogni autunno si tiene una fiera dedicata."),
        ("La squadra vinse il campionato regionale nel 1987.", "L'allenatore fu poi chiamato in nazionale."),
        ("L'isola è raggiungibile solo in traghetto.", "D'inverno le corse sono ridotte a due al giorno."),
    ],
}


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    """A DISCOTEX-shaped folder of invented rows (these tests need no downloaded test data)."""
    folder = tmp_path_factory.mktemp("discotex")
    for name, rows in ROWS.items():
        source = name.split("_")[2]
        lines = ["ID\tPROMPT\tTARGET\tCLASS"] + [f"{source}_{i}\t{p}\t{t}\t{i % 2}" for i, (p, t) in enumerate(rows)]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def run_cli(model, out: Path, data_dir: Path, *extra) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "abricot_local", "run", str(model), "--tasks", "discotex", "--data-dir",
           str(data_dir), "--limit", "3", "--threads", "2", "--out", str(out), *map(str, extra)]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"abricot-local hung on {model} (no answer in {TIMEOUT} s)")


def assert_refused(proc: subprocess.CompletedProcess, out: Path, fragment: str) -> str:
    """One clean error line naming the problem, exit code 2, nothing written as results."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], proc.stderr  # cautions may come before it
    assert fragment in errors[0], errors[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (out / "results.json").exists() and not list(out.glob("samples-*.jsonl"))
    return errors[0]


# -- damage makers ----------------------------------------------------------------------------------
def full_copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


def header_copy(src: Path, dst: Path) -> Path:
    """The real header, the data left as a hole of the same size (sparse: no disk used)."""
    info = read_header(src)
    with open(src, "rb") as fh, open(dst, "wb") as out:
        out.write(fh.read(info.data_offset))
        out.truncate(info.file_size)
    return dst


def overwrite(path: Path, at: int, data: bytes) -> Path:
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(data)
    return path


def tensor_field(path: Path, name: str) -> tuple[int, int]:
    """File positions of a tensor's type and data-offset fields in the header."""
    info = read_header(path)
    with open(path, "rb") as fh:
        head = fh.read(info.data_offset)
    enc = struct.pack("<Q", len(name)) + name.encode()
    at = head.rindex(enc) + len(enc)  # tensor infos follow the metadata
    (n_dims,) = struct.unpack_from("<I", head, at)
    type_at = at + 4 + 8 * n_dims
    return type_at, type_at + 4


def nan_fill(src: Path, dst: Path, tensor: str) -> Path:
    """Every value of an F32 tensor set to NaN: header intact, size unchanged."""
    full_copy(src, dst)
    t = next(t for t in read_header(dst).tensors if t.name == tensor)
    assert t.type_name == "F32"
    return overwrite(dst, t.start, struct.pack("<f", float("nan")) * (t.nbytes // 4))


def byte_run(src: Path, dst: Path, byte: bytes, length: int = 3_500_000) -> Path:
    """A run of one byte value in the middle of the file (the tensor data): header intact."""
    full_copy(src, dst)
    info = read_header(dst)
    at = info.file_size // 2
    assert at > info.data_offset
    return overwrite(dst, at, byte * length)


# -- weight damage: reaches llama.cpp, stopped by the non-finite guard -------------------------------
@pytest.mark.parametrize("model, damage", [
    ("smollm2", "ff_run"),  # the case of issue 16: 3.5 MB of 0xFF in SmolLM2-135M's tensor data
    ("gemma", "ff_run"),
    ("gemma", "nan_weights"),
    ("smollm2", "nan_weights"),
])
def test_weight_damage_stops_with_the_non_finite_error(model, damage, request, tmp_path, data_dir):
    src = request.getfixturevalue("gemma_path" if model == "gemma" else "smollm2_path")
    dst = tmp_path / f"{model}-{damage}.gguf"
    if damage == "ff_run":
        byte_run(src, dst, b"\xff")
    else:
        nan_fill(src, dst, "output_norm.weight" if model == "gemma" else "blk.0.attn_norm.weight")
    assert dst.stat().st_size == src.stat().st_size
    out = tmp_path / "out"
    line = assert_refused(run_cli(dst, out, data_dir), out, NON_FINITE)
    assert "position" in line and "NaN" in line  # where, and what was found
    assert "--flash-attn off" in line and "--n-gpu-layers 0" in line and "SHA-256" in line and "pull" in line


def test_a_zero_run_is_caught_by_the_pinned_sha256(smollm2_path, tmp_path, data_dir):
    """0x00 bytes are valid weights (the logits stay finite): the registry's SHA-256 is what refuses them."""
    dst = byte_run(smollm2_path, tmp_path / "smol-zeros.gguf", b"\x00")
    models = tmp_path / "models.toml"
    models.write_text(f'[smol-local]\nsource = "local"\npath = "{dst}"\nsha256 = "{fetch.sha256_file(smollm2_path)}"\n')
    out = tmp_path / "out"
    line = assert_refused(run_cli("smol-local", out, data_dir, "--models", models), out, "sha256 mismatch")
    assert "model 'smol-local'" in line and "not used" in line


# -- header damage and broken files: refused before llama.cpp opens them ----------------------------
def cut(path: Path, size: int) -> Path:
    os.truncate(path, size)
    return path


def flip_type(path: Path, tensor: str, new_type: int) -> Path:
    return overwrite(path, tensor_field(path, tensor)[0], struct.pack("<I", new_type))


def set_offset(path: Path, tensor: str, offset: int) -> Path:
    return overwrite(path, tensor_field(path, tensor)[1], struct.pack("<Q", offset))


HEADER_DAMAGE = {
    # id: (make the file from gemma's header, fragment of the message)
    "type_bit_flip": (lambda p: flip_type(p, "blk.0.attn_k.weight", 6 ^ 1),  # Q5_0 -> Q5_1: bigger
                      "tensor 'blk.0.attn_k_norm.weight' (F32, 256, 1024 bytes) has data offset 178373120 but "
                      "tensor 'blk.0.attn_k.weight' (Q5_1, 640x256) ends at 178383360: it overlaps it"),
    "type_same_size_flip": (lambda p: flip_type(p, "output_norm.weight", 26),  # F32 -> I32: llama.cpp would abort
                            "tensor 'output_norm.weight' is stored as I32"),
    "type_unknown": (lambda p: flip_type(p, "token_embd.weight", 8 | 0x80), "unknown ggml type 136"),
    "offset_out_of_range": (lambda p: set_offset(p, "blk.3.ffn_up.weight", 1 << 40),
                            "'blk.3.ffn_up.weight' (Q5_0, 640x2048, 901120 bytes) has data offset 1099511627776, "
                            "which points past the end of the file (253113024 bytes)"),
    "huge_tensor_count": (lambda p: overwrite(p, 8, struct.pack("<Q", 1 << 62)),
                          "the header claims 4611686018427387904 tensors and 33 metadata keys, more than a file of "
                          "253113024 bytes can hold"),
    "huge_kv_count": (lambda p: overwrite(p, 16, struct.pack("<Q", (1 << 64) - 1)),
                      "18446744073709551615 metadata keys"),
    "truncated": (lambda p: cut(p, p.stat().st_size // 2),
                  "past the end of the file (126556512 bytes); the file is incomplete"),
}


@pytest.mark.parametrize("damage", list(HEADER_DAMAGE))
def test_header_damage_is_refused_before_llama_cpp(damage, gemma_path, tmp_path, data_dir):
    make, fragment = HEADER_DAMAGE[damage]
    path = make(header_copy(gemma_path, tmp_path / f"gemma-{damage}.gguf"))
    out = tmp_path / "out"
    line = assert_refused(run_cli(path, out, data_dir), out, fragment)
    assert f"{path} is not a usable GGUF model" in line and "download it again" in line


@pytest.mark.parametrize("content, fragment", [
    (b"", "it is empty (0 bytes); the file is incomplete (an interrupted download or copy?)"),
    (b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 253113024\n",
     "is not a GGUF file (it does not start with 'GGUF')"),  # a Git LFS pointer instead of the model
    (b"GGUF\x03\x00", "the file ends inside the header"),
], ids=["empty", "not_gguf", "header_cut"])
def test_broken_files_are_refused(content, fragment, tmp_path, data_dir):
    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    out = tmp_path / "out"
    assert_refused(run_cli(path, out, data_dir), out, fragment)


def test_a_missing_split_part_is_named(gemma_path, tmp_path, data_dir):
    first = header_copy(gemma_path, tmp_path / "gemma-00001-of-00002.gguf")
    out = tmp_path / "out"
    assert_refused(run_cli(first, out, data_dir), out,
                   "1 of its 2 parts missing next to it (gemma-00002-of-00002.gguf)")


def test_a_llama_cpp_abort_ends_the_process_at_once(gemma_path, tmp_path, data_dir):
    """Without the verifier, a float tensor typed I32 makes ggml abort mid-decode. ggml then
    attaches gdb to print a backtrace (seen here: once 18 s, once a hang of over 300 s with
    both compute threads aborting); the backend sets GGML_NO_BACKTRACE, so it just aborts."""
    path = flip_type(header_copy(gemma_path, tmp_path / "i32.gguf"), "output_norm.weight", 26)
    code = (
        "import sys; import abricot_local.gguf.file as f\n"
        "f.verify_gguf = lambda p: ()  # what llama.cpp meets without the verifier\n"
        "from abricot_local.cli import main\n"
        "sys.argv = ['abricot-local', 'run', *sys.argv[1:]]; main()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GGML_NO_BACKTRACE"}
    cmd = [sys.executable, "-c", code, str(path), "--tasks", "discotex", "--data-dir", str(data_dir), "--limit", "1",
           "--threads", "2", "--n-ctx", "512", "--out", str(tmp_path / "out")]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("llama.cpp's abort hung the process")
    assert proc.returncode == -6 and "unsupported types" in proc.stderr  # SIGABRT
    assert "[New LWP" not in proc.stderr and "gdb" not in proc.stderr  # no debugger attached
    assert not (tmp_path / "out" / "results.json").exists()
