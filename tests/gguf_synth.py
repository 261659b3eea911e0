"""Test helpers: small GGUF files written from scratch (format v3, little-endian), and
llama.cpp's own GGUF parser (gguf_init_from_file in the libggml-base that llama-cpp-python
ships) run in a child process, as the reference for what llama.cpp accepts."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

SCALAR = {"u8": (0, "<B"), "i8": (1, "<b"), "u16": (2, "<H"), "i16": (3, "<h"), "u32": (4, "<I"),
          "i32": (5, "<i"), "f32": (6, "<f"), "bool": (7, "<?"), "u64": (10, "<Q"), "i64": (11, "<q"),
          "f64": (12, "<d")}
F32, Q4_0, Q8_0 = 0, 2, 8
SIZES = {F32: (1, 4), 1: (1, 2), Q4_0: (32, 18), Q8_0: (32, 34)}


def gstr(s: str | bytes) -> bytes:
    raw = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, kind: str, value) -> bytes:
    """One metadata pair: kind is a SCALAR name, 'str', or 'arr:<kind>' (value a list)."""
    if kind == "str":
        return gstr(key) + struct.pack("<I", 8) + gstr(value)
    if kind.startswith("arr:"):
        sub = kind[4:]
        if sub == "str":
            body = b"".join(gstr(v) for v in value)
            return gstr(key) + struct.pack("<IIQ", 9, 8, len(value)) + body
        code, fmt = SCALAR[sub]
        return gstr(key) + struct.pack("<IIQ", 9, code, len(value)) + b"".join(struct.pack(fmt, v) for v in value)
    code, fmt = SCALAR[kind]
    return gstr(key) + struct.pack("<I", code) + struct.pack(fmt, value)


def tensor_nbytes(type_id: int, dims) -> int:
    block, size = SIZES[type_id]
    n = dims[0] // block * size
    for d in dims[1:]:
        n *= d
    return n


@dataclass
class Synth:
    """A GGUF file to write: metadata pairs (encoded), tensors (name, dims, type) stored
    back to back, each padded to the alignment; every field can be overridden to damage it."""

    kvs: list[bytes] = field(default_factory=lambda: [kv("general.architecture", "str", "llama"),
                                                       kv("tokenizer.ggml.tokens", "arr:str", ["a", "bb", ""])])
    tensors: list[tuple[str, tuple[int, ...], int]] = field(default_factory=lambda: [
        ("token_embd.weight", (64, 4), Q8_0), ("output_norm.weight", (64,), F32), ("blk.0.w", (32, 2), Q4_0)])
    version: int = 3
    alignment: int = 32
    n_tensors: int | None = None
    n_kv: int | None = None
    offsets: dict[str, int] = field(default_factory=dict)  # name -> offset written instead
    types: dict[str, int] = field(default_factory=dict)  # name -> type id written instead
    dims: dict[str, tuple[int, ...]] = field(default_factory=dict)  # name -> dimensions written instead
    fill: bytes = b"\x01"

    def to_bytes(self, with_data: bool = True) -> bytes:
        """The file; without data, the header and its padding only (up to the data section)."""
        head = b"GGUF" + struct.pack("<IQQ", self.version,
                                     len(self.tensors) if self.n_tensors is None else self.n_tensors,
                                     len(self.kvs) if self.n_kv is None else self.n_kv)
        head += b"".join(self.kvs)
        infos, body, off = b"", [], 0
        for name, dims, tid in self.tensors:
            n = tensor_nbytes(tid, dims)
            shown = self.dims.get(name, dims)
            infos += gstr(name) + struct.pack("<I", len(shown)) + b"".join(struct.pack("<q", d) for d in shown)
            infos += struct.pack("<IQ", self.types.get(name, tid), self.offsets.get(name, off))
            pad = -n % self.alignment
            if with_data:
                body.append(self.fill * n + b"\x00" * pad)
            off += n + pad
        blob = head + infos
        return blob + b"\x00" * (-len(blob) % self.alignment) + b"".join(body)

    def write(self, path: Path) -> Path:
        path.write_bytes(self.to_bytes())
        return path


_ORACLE = r"""
import ctypes, os, sys
lib = ctypes.CDLL(os.path.join(sys.argv[1], "libggml-base.so"))
class Params(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]
lib.gguf_init_from_file.restype = ctypes.c_void_p
lib.gguf_init_from_file.argtypes = [ctypes.c_char_p, Params]
ctx = lib.gguf_init_from_file(sys.argv[2].encode(), Params(True, None))
print("accepted" if ctx else "refused")
"""


_ORACLE_EACH = _ORACLE.replace('''ctx = lib.gguf_init_from_file(sys.argv[2].encode(), Params(True, None))
print("accepted" if ctx else "refused")''', '''for path in sys.argv[2:]:
    ctx = lib.gguf_init_from_file(path.encode(), Params(True, None))
    print("accepted" if ctx else "refused", flush=True)''')


def llama_cpp_lib_dir() -> str:
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")  # not imported: only its shipped libraries are used
    return os.path.join(list(spec.submodule_search_locations)[0], "lib")


def llama_cpp_parser_verdict(path: Path, timeout: float = 60) -> str:
    """'accepted', 'refused', 'crashed' or 'hung': what llama.cpp's own GGUF parser does with a file."""
    try:
        out = subprocess.run([sys.executable, "-c", _ORACLE, llama_cpp_lib_dir(), str(path)],
                             capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hung"
    if out.returncode != 0:
        return "crashed"
    return out.stdout.strip()


def llama_cpp_parser_verdicts(paths: list[Path], timeout: float = 60) -> list[str]:
    """:func:`llama_cpp_parser_verdict` of each file, in as few processes as its crashes allow: one process
    reads the files in turn and says each verdict as it goes; the file it dies (or hangs) on is 'crashed'
    (or 'hung'), and a new process goes on from the next."""
    verdicts: list[str] = []
    while len(verdicts) < len(paths):
        rest = [str(p) for p in paths[len(verdicts):]]
        try:
            out = subprocess.run([sys.executable, "-c", _ORACLE_EACH, llama_cpp_lib_dir(), *rest],
                                 capture_output=True, timeout=timeout)
            said, stuck = out.stdout, "crashed" if out.returncode != 0 else None
        except subprocess.TimeoutExpired as exc:
            said, stuck = exc.stdout or b"", "hung"
        verdicts += said.decode(errors="replace").split()
        if stuck and len(verdicts) < len(paths):
            verdicts.append(stuck)
    return verdicts
