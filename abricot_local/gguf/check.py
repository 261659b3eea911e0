"""Structural check of a GGUF model file before llama.cpp sees it.

A strict reader of the GGUF header (format versions 2 and 3, little-endian), written against
llama.cpp's own parser (ggml/src/gguf.cpp): magic and version, header counts that a file of its
size can hold, every metadata value's type and length inside the file, and for every tensor a
name, at most 4 sane dimensions, a ggml type llama.cpp reads, and data stored where llama.cpp
expects it (each tensor right after the previous one, padded to ``general.alignment``) and inside the
file. Stricter than llama.cpp's parser: data past the end of the file (llama.cpp's loader finds it
later), bytes after the last tensor, and integer-typed weights (llama.cpp aborts on them mid-run).
A split model's parts (``NAME-00001-of-00003.gguf``) are named by :func:`split_parts` and checked
together by gguf/file.py's ``verify_gguf``.

Only the header is read, never tensor data, in bounded steps: a damaged count or length is refused
before anything is allocated, so a 4 GB model takes milliseconds and no header can make it hang.
Metadata arrays are walked, not kept: where each one's bytes lie is (``ArraySpan``). The ``gguf``
package's GGUFReader was not used: it turns every metadata array into numpy objects (seconds for a
262k-token vocabulary), fails on damaged files with numpy's IndexError/ValueError, and accepts
overlapping tensors (a flipped type).
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from abricot_local.errors import ModelError

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NAME = 63  # GGML_MAX_NAME (64) less the terminating NUL
MAX_KEY = 65535  # real keys are tens of bytes
MAX_TENSORS = 1 << 20  # real models: hundreds to a few tens of thousands
MAX_KV = 1 << 20  # real models: tens
MAX_STRINGS = 1 << 24  # a string array (vocabularies: up to ~300k entries)
SHORT_STRING = 1024  # string values kept in GGUFInfo.metadata
LONG_STRINGS = {"tokenizer.chat_template": 1 << 20}  # longer strings kept whole, up to these sizes
SPLIT_NAME = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")

# ggml type id -> (name, elements per block, bytes per block), as ggml's type_traits;
# tests/test_gguf_check.py compares it with the ggml that llama-cpp-python ships (0.3.36: types 0-42)
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292), 16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98), 19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18), 42: ("Q2_0", 64, 18),
}
# integer and f64 tensors: ggml has them, but no llama.cpp model computes with such weights; a float
# tensor whose type field flipped to one of these passes every size check and makes llama.cpp abort
# mid-run (binary_op: unsupported types), so they are refused too
NOT_WEIGHT_TYPES = {24, 25, 26, 27, 28}
REMOVED_TYPES = {4: "Q4_2", 5: "Q4_3", 31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8",
                 36: "IQ4_NL_4_4", 37: "IQ4_NL_4_8", 38: "IQ4_NL_8_8"}

# GGUF metadata value types: id -> (name, fixed size in bytes; 0 for string and array)
KV_TYPES = {0: ("uint8", 1), 1: ("int8", 1), 2: ("uint16", 2), 3: ("int16", 2), 4: ("uint32", 4),
            5: ("int32", 4), 6: ("float32", 4), 7: ("bool", 1), 8: ("string", 0), 9: ("array", 0),
            10: ("uint64", 8), 11: ("int64", 8), 12: ("float64", 8)}
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY, UINT32 = 8, 9, 4
_U64 = struct.Struct("<Q")


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header describes it; ``start`` is its first byte in the file."""

    name: str
    type_id: int
    type_name: str
    shape: tuple[int, ...]
    offset: int  # as stored: relative to the data section
    start: int
    nbytes: int


@dataclass(frozen=True)
class ArraySpan:
    """A metadata array: its element type, count, and its elements' bytes [start, end) in the file."""

    etype: int
    count: int
    start: int
    end: int


@dataclass(frozen=True)
class GGUFInfo:
    """What the header of one checked GGUF file says."""

    path: Path
    version: int
    file_size: int
    n_kv: int
    alignment: int
    data_offset: int
    tensors: tuple[TensorInfo, ...]
    metadata: dict = field(default_factory=dict)  # scalar values and strings up to SHORT_STRING bytes
    arrays: dict = field(default_factory=dict)  # key -> ArraySpan: where each metadata array's bytes lie


TRUNCATED = "the file is incomplete (an interrupted download or copy?): download it again"
DAMAGED = "the file is damaged: download it again, or check its SHA-256 against the publisher's"
TRUNCATED_OR_DAMAGED = ("the file is incomplete (an interrupted download or copy?) or its header is damaged: "
                        "download it again")


class _Damaged(Exception):
    """A structural problem, turned into a ModelError naming the file by read_header."""

    def __init__(self, detail: str, truncated: bool = False, hint: str | None = None):
        super().__init__(detail)
        self.hint = hint or (TRUNCATED if truncated else DAMAGED)


def _shape(dims) -> str:
    return "x".join(str(d) for d in dims) or "scalar"


class _Reader:
    """Bounded reads of the header: every length is checked against the file size first,
    and bytes are read in windows of 1 MiB around the current position."""

    WINDOW = 1 << 20

    def __init__(self, fh, size: int):
        self.fh, self.size, self.pos = fh, size, 0
        self.buf, self.base = b"", 0

    def left(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str, claimed: bool = False) -> None:
        """Refuse reading n more bytes past the end; ``claimed``: n is a length read from the file."""
        if claimed and n > self.size:
            raise _Damaged(f"{what} at byte {self.pos} claims {n} bytes, more than the whole file ({self.size} bytes)")
        if n > self.left():
            raise _Damaged(f"the file ends inside the header: {what} at byte {self.pos} needs {n} bytes, "
                           f"{self.left()} are left", truncated=True)

    def take(self, n: int, what: str, claimed: bool = False) -> int:
        """Advance by n bytes; return their offset in self.buf."""
        self.need(n, what, claimed)
        if self.pos < self.base or self.pos + n > self.base + len(self.buf):
            self.fh.seek(self.pos)
            self.buf, self.base = self.fh.read(max(n, self.WINDOW)), self.pos
            if len(self.buf) < n:
                raise _Damaged(f"the file shrank while being read (byte {self.pos})", truncated=True)
        off = self.pos - self.base
        self.pos += n
        return off

    def skip(self, n: int, what: str) -> None:
        self.need(n, what, claimed=True)
        self.pos += n

    def unpack(self, fmt: str, what: str):
        off = self.take(struct.calcsize(fmt), what)  # may refill self.buf
        return struct.unpack_from(fmt, self.buf, off)[0]

    def u64(self, what: str) -> int:
        off = self.take(8, what)
        return _U64.unpack_from(self.buf, off)[0]

    def text(self, what: str, limit: int) -> str:
        at = self.pos
        n = self.u64(f"the length of {what}")
        if n > limit:
            raise _Damaged(f"{what} at byte {at} claims {n} bytes (at most {limit} expected)")
        off = self.take(n, f"{what} at byte {at}", claimed=True)
        return self.buf[off : off + n].decode("utf-8", "replace")

    def skip_strings(self, count: int, what: str) -> None:
        """Walk ``count`` length-prefixed strings without keeping them (the hot loop: vocabularies)."""
        unpack, buf, base = _U64.unpack_from, self.buf, self.base
        rel, lim = self.pos - base, len(buf) - 8  # position in buf; the last one a length fits at
        for i in range(count):
            if rel > lim:  # the window is used up: read the next one (never past the end of the file)
                pos = base + rel
                if pos + 8 > self.size:
                    self.pos = min(pos, self.size)
                    if pos > self.size:
                        raise _Damaged(f"string {i - 1} of {what} runs past the end of the file", truncated=True)
                    self.need(8, f"the length of string {i} of {what}")  # raises
                self.fh.seek(pos)
                buf, base, rel = self.fh.read(self.WINDOW), pos, 0
                lim = len(buf) - 8
            rel += 8 + unpack(buf, rel)[0]
        self.buf, self.base, self.pos = buf, base, base + rel
        if self.pos > self.size:
            raise _Damaged(f"string {count - 1} of {what} runs past the end of the file", truncated=True)


def _read_kv(r: _Reader, seen: set[str]) -> tuple[str, int, object]:
    """One key-value pair: (key, value type, value); an ArraySpan for an array, None for a long string."""
    at = r.pos
    key = r.text("a metadata key", MAX_KEY)
    if key in seen:
        raise _Damaged(f"metadata key '{key}' appears twice (byte {at})")
    seen.add(key)
    vtype = r.unpack("<I", f"the type of key '{key}'")
    if vtype not in KV_TYPES:
        raise _Damaged(f"metadata key '{key}' has unknown value type {vtype} (byte {r.pos - 4})")
    if vtype == STRING:
        n = r.u64(f"the length of '{key}'")
        if n <= max(SHORT_STRING, LONG_STRINGS.get(key, 0)):
            off = r.take(n, f"the value of '{key}'", claimed=True)
            return key, vtype, r.buf[off : off + n].decode("utf-8", "replace")
        r.skip(n, f"the value of '{key}'")
        return key, vtype, None
    if vtype == ARRAY:
        etype = r.unpack("<I", f"the element type of '{key}'")
        if etype not in KV_TYPES or etype == ARRAY:
            raise _Damaged(f"metadata array '{key}' has invalid element type {etype} (byte {r.pos - 4})")
        count = r.u64(f"the length of array '{key}'")
        start = r.pos
        if etype == STRING:
            if count > min(MAX_STRINGS, r.left() // 8):
                raise _Damaged(f"metadata array '{key}' claims {count} strings, more than the file can hold")
            r.skip_strings(count, f"array '{key}'")
            return key, vtype, ArraySpan(etype, count, start, r.pos)
        size = KV_TYPES[etype][1]
        if count > r.left() // size:
            raise _Damaged(f"metadata array '{key}' claims {count} values of {size} bytes, more than the "
                           f"{r.left()} bytes left in the file", truncated=count * size <= r.size)
        r.skip(count * size, f"array '{key}'")
        return key, vtype, ArraySpan(etype, count, start, r.pos)
    return key, vtype, r.unpack(_SCALAR[vtype], f"the value of '{key}'")


def _read_tensor(r: _Reader, seen: set[str]) -> tuple[str, int, tuple[int, ...], int]:
    at = r.pos
    name = r.text("a tensor name", 1 << 16)
    if not name or len(name.encode("utf-8")) > MAX_NAME:
        raise _Damaged(f"tensor name at byte {at} is {'empty' if not name else 'longer than 63 bytes'} ({name[:80]!r})")
    if name in seen:
        raise _Damaged(f"tensor '{name}' appears twice (byte {at})")
    seen.add(name)
    n_dims = r.unpack("<I", f"the dimension count of '{name}'")
    if n_dims > MAX_DIMS:
        raise _Damaged(f"tensor '{name}' claims {n_dims} dimensions (llama.cpp allows at most {MAX_DIMS})")
    dims = tuple(r.unpack("<q", f"a dimension of '{name}'") for _ in range(n_dims))
    n = 1
    for d in dims:
        if d < 0:
            raise _Damaged(f"tensor '{name}' has a negative dimension ({_shape(dims)})")
        n *= d
    if n >= 1 << 63:
        raise _Damaged(f"tensor '{name}' claims {n} elements ({_shape(dims)})")
    type_id = r.unpack("<I", f"the type of '{name}'")
    if type_id in REMOVED_TYPES:
        raise _Damaged(f"tensor '{name}' has ggml type {type_id} ({REMOVED_TYPES[type_id]}), which llama.cpp no "
                       "longer reads", hint="get a conversion made with a current llama.cpp")
    if type_id not in GGML_TYPES:
        raise _Damaged(f"tensor '{name}' has unknown ggml type {type_id} (byte {r.pos - 4})")
    tname, block, _ = GGML_TYPES[type_id]
    if type_id in NOT_WEIGHT_TYPES:
        raise _Damaged(f"tensor '{name}' is stored as {tname}, a type no llama.cpp model computes with (llama.cpp "
                       "would abort mid-run); its type field is probably damaged")
    if dims and dims[0] % block:
        raise _Damaged(f"tensor '{name}' of type {tname} has {dims[0]} elements per row, not a multiple of its "
                       f"block size {block}")
    offset = r.u64(f"the data offset of '{name}'")
    return name, type_id, dims, offset


def _nbytes(type_id: int, dims: tuple[int, ...]) -> int:
    _, block, size = GGML_TYPES[type_id]
    n = (dims[0] // block * size) if dims else size
    for d in dims[1:]:
        n *= d
    return n


def _pad(n: int, align: int) -> int:
    return (n + align - 1) // align * align


def _parse(fh, size: int, path: Path) -> GGUFInfo:
    r = _Reader(fh, size)
    if size == 0:
        raise _Damaged("it is empty (0 bytes)", truncated=True)
    fh.seek(0)
    if fh.read(4) != MAGIC:
        raise _Damaged("it does not start with 'GGUF'", hint="llama.cpp needs a .gguf model")
    r.need(24, "the GGUF header")
    r.skip(4, "the magic")
    version = r.unpack("<I", "the version")
    if version not in VERSIONS:
        swapped = struct.unpack("<I", struct.pack(">I", version))[0]
        if swapped in VERSIONS:
            raise _Damaged(f"it is a big-endian GGUF (version {swapped})", hint="get the little-endian file")
        if version == 1:
            raise _Damaged("it is GGUF version 1, which llama.cpp no longer reads", hint="get a current conversion")
        raise _Damaged(f"unknown GGUF version {version} (llama.cpp reads versions 2 and 3)")
    n_tensors = r.u64("the tensor count")
    n_kv = r.u64("the metadata key count")
    # the smallest encodings: a key-value 8+0+4+1 bytes, a tensor 8+1+4+4+8 bytes
    if n_tensors > MAX_TENSORS or n_kv > MAX_KV or n_tensors * 25 + n_kv * 13 > r.left():
        raise _Damaged(f"the header claims {n_tensors} tensors and {n_kv} metadata keys, more than a file of "
                       f"{size} bytes can hold")
    metadata: dict = {}
    arrays: dict[str, ArraySpan] = {}
    types: dict[str, int] = {}
    seen: set[str] = set()
    for _ in range(n_kv):
        key, types[key], value = _read_kv(r, seen)
        if value is not None:
            (arrays if isinstance(value, ArraySpan) else metadata)[key] = value
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if "general.alignment" in types and (types["general.alignment"] != UINT32 or alignment <= 0
                                         or alignment & (alignment - 1)):
        # llama.cpp aborts the process on a non-uint32 alignment (an assert in gguf_get_val_u32)
        raise _Damaged(f"general.alignment must be a power of two stored as uint32, got {alignment!r} "
                       f"({KV_TYPES[types['general.alignment']][0]})")
    names: set[str] = set()
    raw = [_read_tensor(r, names) for _ in range(n_tensors)]
    data_offset = _pad(r.pos, alignment)
    tensors: list[TensorInfo] = []
    expected, prev = 0, None
    for name, type_id, dims, offset in raw:
        nbytes = _nbytes(type_id, dims)
        info = TensorInfo(name, type_id, GGML_TYPES[type_id][0], dims, offset, data_offset + offset, nbytes)
        what = f"tensor '{name}' ({info.type_name}, {_shape(dims)}, {nbytes} bytes)"
        if offset % alignment:
            raise _Damaged(f"{what} has data offset {offset}, not a multiple of the alignment {alignment}")
        if offset != expected and info.start >= size:
            raise _Damaged(f"{what} has data offset {offset}, which points past the end of the file ({size} "
                           f"bytes); it should be {expected}")
        if offset != expected and prev is None:
            raise _Damaged(f"{what} is the first tensor but has data offset {offset}, not 0")
        if offset != expected:
            how = "overlaps" if offset < expected else "leaves a gap after"
            raise _Damaged(f"{what} has data offset {offset} but tensor '{prev.name}' ({prev.type_name}, "
                           f"{_shape(prev.shape)}) ends at {expected}: it {how} it; a type or shape in the header "
                           "is wrong")
        if info.start + nbytes > size:
            raise _Damaged(f"{what} at file offset {info.start} ends at byte {info.start + nbytes}, past the end of "
                           f"the file ({size} bytes)", hint=TRUNCATED_OR_DAMAGED)
        tensors.append(info)
        expected, prev = offset + _pad(nbytes, alignment), info
    if tensors and size > data_offset + expected:
        raise _Damaged(f"{size - data_offset - expected} bytes follow the last tensor '{prev.name}' "
                       f"({prev.type_name}, {_shape(prev.shape)}), which the header does not account for; a type "
                       "or shape in the header is wrong, or other data was appended")
    return GGUFInfo(path, version, size, n_kv, alignment, data_offset, tuple(tensors), metadata, arrays)


def read_header(path: Path | str) -> GGUFInfo:
    """The checked header of one GGUF file, else a :class:`ModelError` saying what is wrong."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            return _parse(fh, size, path)
    except _Damaged as exc:
        raise ModelError(f"{path} is not a usable GGUF model: {exc}; {exc.hint}") from None
    except OSError as exc:
        raise ModelError(f"cannot read model file {path}: {exc.strerror or exc}") from None


def split_parts(path: Path) -> list[Path] | None:
    """All parts of a split model named like ``NAME-00001-of-00003.gguf``, else None."""
    m = SPLIT_NAME.match(path.name)
    if not m:
        return None
    count = int(m["count"])
    return [path.with_name(f"{m['prefix']}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
