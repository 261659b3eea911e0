"""gguf_check: the GGUF header verification, on files written here and on the real small models.

Every damaged header is also given to llama.cpp's own GGUF parser (gguf_init_from_file from the
libggml-base that llama-cpp-python ships, in a child process): the verifier refuses what llama.cpp
refuses, and where it is stricter (data past the end of the file, which only llama.cpp's model
loader checks; bytes after the last tensor; integer-typed weights) the test says so.
"""

from __future__ import annotations

import collections
import ctypes
import os
import random
import re
import struct
import time

import pytest

from abricot_local.gguf import check as gguf_check, file as model_file
from abricot_local.models import locate as modellocate
from abricot_local.errors import ModelError
from abricot_local.gguf.check import GGML_TYPES, NOT_WEIGHT_TYPES, REMOVED_TYPES, read_header
from abricot_local.gguf.file import verify_gguf
from gguf_synth import F32, Synth, gstr, kv, llama_cpp_lib_dir, llama_cpp_parser_verdicts

GiB = 1 << 30


def base_kvs(*extra):
    return Synth().kvs + list(extra)


def with_version_bytes(version_bytes: bytes) -> bytes:
    b = Synth().to_bytes()
    return b[:4] + version_bytes + b[8:]


VALID = Synth().to_bytes()

# id -> (file content, what the message says, llama.cpp's parser verdict)
CASES = {
    "empty": (b"", "it is empty (0 bytes)", "refused"),
    "not_gguf": (b"PK\x03\x04" + b"x" * 100, "does not start with 'GGUF'", "refused"),
    "header_cut": (VALID[:20], "ends inside the header", "refused"),
    "version_1": (Synth(version=1).to_bytes(), "GGUF version 1", "refused"),
    "version_4": (Synth(version=4).to_bytes(), "unknown GGUF version 4", "refused"),
    "big_endian": (with_version_bytes(struct.pack(">I", 3)), "big-endian", "refused"),
    "huge_tensor_count": (Synth(n_tensors=1 << 63).to_bytes(), "claims 9223372036854775808 tensors", "refused"),
    "huge_kv_count": (Synth(n_kv=(1 << 64) - 1).to_bytes(), "18446744073709551615 metadata keys", "refused"),
    "kv_count_off_by_one": (Synth(n_kv=3).to_bytes(), "claims", "refused"),
    "tensor_count_off_by_one": (Synth(n_tensors=4).to_bytes(), "tensor name at byte", "refused"),
    "kv_unknown_type": (Synth(kvs=[gstr("x") + struct.pack("<I", 13) + bytes(8)]).to_bytes(),
                        "key 'x' has unknown value type 13", "refused"),
    "kv_huge_string": (Synth(kvs=[gstr("x") + struct.pack("<IQ", 8, 1 << 62)]).to_bytes(),
                       "the value of 'x' at byte 45 claims 4611686018427387904 bytes", "refused"),
    "kv_huge_key": (Synth(kvs=[struct.pack("<Q", 1 << 62) + b"abc"]).to_bytes(), "a metadata key at byte 24 claims",
                    "refused"),
    "kv_nested_array": (Synth(kvs=[gstr("x") + struct.pack("<IIQIQ", 9, 9, 1, 0, 0)]).to_bytes(),
                        "array 'x' has invalid element type 9", "refused"),
    "kv_huge_array": (Synth(kvs=[gstr("x") + struct.pack("<IIQ", 9, 4, 1 << 61)]).to_bytes(),
                      "array 'x' claims 2305843009213693952 values", "refused"),
    "kv_huge_string_array": (Synth(kvs=[gstr("x") + struct.pack("<IIQ", 9, 8, 1 << 61)]).to_bytes(),
                             "array 'x' claims 2305843009213693952 strings", "refused"),
    "kv_string_past_end": (Synth(kvs=[gstr("x") + struct.pack("<IIQ", 9, 8, 2) + gstr("a") + struct.pack("<Q", 900)],
                                 tensors=[]).to_bytes(), "string 1 of array 'x'", "refused"),
    "kv_duplicate": (Synth(kvs=base_kvs(kv("general.architecture", "str", "gemma"))).to_bytes(),
                     "key 'general.architecture' appears twice", "refused"),
    "alignment_u64": (Synth(kvs=base_kvs(kv("general.alignment", "u64", 32))).to_bytes(),
                      "general.alignment must be a power of two stored as uint32, got 32 (uint64)", "refused"),
    "alignment_48": (Synth(kvs=base_kvs(kv("general.alignment", "u32", 48))).to_bytes(), "got 48", "refused"),
    "alignment_0": (Synth(kvs=base_kvs(kv("general.alignment", "u32", 0))).to_bytes(), "got 0", "refused"),
    "five_dims": (Synth(tensors=[("t", (32, 1, 1, 1, 1), F32)]).to_bytes(), "'t' claims 5 dimensions", "refused"),
    "negative_dim": (Synth(dims={"output_norm.weight": (-64,)}).to_bytes(), "negative dimension (-64)", "refused"),
    "unknown_type": (Synth(types={"output_norm.weight": 99}).to_bytes(),
                     "'output_norm.weight' has unknown ggml type 99", "refused"),
    "removed_type": (Synth(types={"blk.0.w": 31}).to_bytes(), "type 31 (Q4_0_4_4), which llama.cpp no longer reads",
                     "refused"),
    "row_not_whole_blocks": (Synth(dims={"blk.0.w": (48, 1)}).to_bytes(),
                             "48 elements per row, not a multiple of its block size 32", "refused"),
    "name_64_bytes": (Synth(tensors=[("n" * 64, (64,), F32)]).to_bytes(), "longer than 63 bytes", "refused"),
    "name_duplicate": (Synth(tensors=[("t", (64,), F32), ("t", (64,), F32)]).to_bytes(), "'t' appears twice",
                       "refused"),
    "offset_misaligned": (Synth(offsets={"output_norm.weight": 304}).to_bytes(),
                          "offset 304, not a multiple of the alignment 32", "refused"),
    "tensors_overlap": (Synth(offsets={"output_norm.weight": 256}).to_bytes(), "ends at 288: it overlaps it",
                        "refused"),
    "first_tensor_moved": (Synth(offsets={"token_embd.weight": 32}).to_bytes(), "is the first tensor but has data "
                           "offset 32, not 0", "refused"),
    "tensors_gap": (Synth(offsets={"output_norm.weight": 320}).to_bytes(), "ends at 288: it leaves a gap", "refused"),
    "offset_past_end": (Synth(offsets={"blk.0.w": 1 << 40}).to_bytes(),
                        "'blk.0.w' (Q4_0, 32x2, 36 bytes) has data offset 1099511627776, which points past the end",
                        "refused"),
    "type_flip_smaller": (Synth(types={"token_embd.weight": 7}).to_bytes(), "(Q5_1, 64x4) ends at 192", "refused"),
    "type_flip_bigger": (Synth(types={"output_norm.weight": 1}).to_bytes(), "(F16, 64) ends at 416", "refused"),
    # stricter than llama.cpp's parser: these pass it and fail later (loader) or never
    "type_flip_same_size": (Synth(types={"output_norm.weight": 26}).to_bytes(), "stored as I32", "accepted"),
    "data_truncated": (VALID[:-40], "ends at byte 900, past the end of the file (888 bytes); the file is incomplete",
                       "accepted"),
    "bytes_after_last_tensor": (VALID + bytes(64), "64 bytes follow the last tensor 'blk.0.w'", "accepted"),
}


VALID_SYNTHS = {
    "default": Synth(),
    "align64": Synth(kvs=base_kvs(kv("general.alignment", "u32", 64)), alignment=64),
    "name63": Synth(tensors=[("n" * 63, (64,), F32)]),
    "no_tensors": Synth(tensors=[]),  # vocabulary-only files have no tensors
    "every_value_type": Synth(kvs=[kv(f"k.{t}", t, 1) for t in ("u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                                                 "u64", "i64", "f64")]
                              + [kv("a.f", "arr:f32", [1.0, 2.0]), kv("a.s", "arr:str", []),
                                 kv("s", "str", "x" * 5000)]),
}

@pytest.fixture(scope="module")
def llama_verdicts(tmp_path_factory) -> dict[str, str]:
    """llama.cpp's parser verdict on each damaged case's bytes and each valid file, by name: one child process
    reads them all in turn (llama_cpp_parser_verdicts: a new one after a file it dies or hangs on), not one
    process per file (42 of them, some 1.5 s)."""
    folder = tmp_path_factory.mktemp("llama-verdicts")
    paths = {}
    for case, (content, _, _) in CASES.items():
        paths[f"case-{case}"] = folder / f"case-{case}.gguf"
        paths[f"case-{case}"].write_bytes(content)
    for name, synth in VALID_SYNTHS.items():
        paths[f"valid-{name}"] = synth.write(folder / f"valid-{name}.gguf")
    return dict(zip(paths, llama_cpp_parser_verdicts(list(paths.values()))))


@pytest.mark.parametrize("case", list(CASES))
def test_damaged_header_is_refused_with_a_message_naming_it(case, tmp_path, llama_verdicts):
    content, message, llama_verdict = CASES[case]
    path = tmp_path / f"{case}.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelError) as err:
        verify_gguf(path)
    text = str(err.value)
    assert message in text and str(path) in text and "\n" not in text
    assert llama_verdicts[f"case-{case}"] == llama_verdict  # the same bytes, in llama.cpp's parser


def test_fuzzed_headers_never_pass_what_llama_cpp_refuses(tmp_path):
    """Seeded random bit flips and byte overwrites in a header: the verifier raises only ModelError,
    and accepts a file only where llama.cpp's parser accepts it too."""
    rng = random.Random(16)
    base = Synth().to_bytes()
    head = len(Synth().to_bytes(with_data=False))
    seen = collections.Counter()
    paths, ours = [], []
    for k in range(60):
        data = bytearray(base)
        for _ in range(rng.choice((1, 1, 2, 3))):
            i = rng.randrange(4, head)
            flip = rng.random() < 0.5
            data[i] = data[i] ^ (1 << rng.randrange(8)) if flip else rng.choice((0, 0xFF, rng.randrange(256)))
        paths.append(tmp_path / f"fuzz{k}.gguf")
        paths[-1].write_bytes(bytes(data))
        try:
            verify_gguf(paths[-1])
            ours.append("accepted")
        except ModelError:
            ours.append("refused")
    for k, theirs in enumerate(llama_cpp_parser_verdicts(paths)):  # llama.cpp's parser on each, in one process
        assert theirs in ("accepted", "refused") and not (ours[k] == "accepted" and theirs == "refused"), k
        seen[ours[k], theirs] += 1
    assert seen["refused", "refused"] > 10 and seen["accepted", "accepted"] > 5  # both kinds were exercised


@pytest.mark.parametrize("valid", list(VALID_SYNTHS))
def test_valid_files_pass_here_and_in_llama_cpp(valid, tmp_path, llama_verdicts):
    synth = VALID_SYNTHS[valid]
    path = synth.write(tmp_path / "ok.gguf")
    (info,) = verify_gguf(path)
    assert info.file_size == path.stat().st_size
    assert len(info.tensors) == len(synth.tensors) and info.alignment == synth.alignment
    for t, (name, dims, tid) in zip(info.tensors, synth.tensors):
        assert (t.name, t.shape, t.type_id) == (name, dims, tid) and t.start % synth.alignment == 0
    assert llama_verdicts[f"valid-{valid}"] == "accepted"  # the same bytes, in llama.cpp's parser


def test_type_table_matches_the_ggml_llama_cpp_ships():
    lib = ctypes.CDLL(os.path.join(llama_cpp_lib_dir(), "libggml-base.so"))
    lib.ggml_type_name.restype, lib.ggml_type_name.argtypes = ctypes.c_char_p, [ctypes.c_int]
    lib.ggml_blck_size.restype, lib.ggml_blck_size.argtypes = ctypes.c_int64, [ctypes.c_int]
    lib.ggml_type_size.restype, lib.ggml_type_size.argtypes = ctypes.c_size_t, [ctypes.c_int]
    for t in range(max(GGML_TYPES) + 1):
        if t in REMOVED_TYPES:
            assert lib.ggml_blck_size(t) == 0, t  # ggml keeps the number, without a layout
            continue
        name, block, size = GGML_TYPES[t]
        ggml = (lib.ggml_type_name(t).decode().upper(), lib.ggml_blck_size(t), lib.ggml_type_size(t))
        assert ggml == (name, block, size)
    assert {GGML_TYPES[t][0] for t in NOT_WEIGHT_TYPES} == {"I8", "I16", "I32", "I64", "F64"}


# -- the real small models ------------------------------------------------------------------------
@pytest.mark.real
def test_real_models_pass_in_milliseconds(gemma_path, smollm2_path):
    for path in (gemma_path, smollm2_path):
        start = time.perf_counter()
        (info,) = verify_gguf(path)
        assert time.perf_counter() - start < 2.0  # measured ~50 ms (gemma, 262k-token vocabulary)
        last = info.tensors[-1]
        assert info.tensors[0].start == info.data_offset
        assert info.data_offset + last.offset + last.nbytes <= info.file_size == path.stat().st_size
    gemma = read_header(gemma_path)
    assert gemma.metadata["general.architecture"] == "gemma3" and len(gemma.tensors) == 236
    embd = next(t for t in gemma.tensors if t.name == "token_embd.weight")
    assert (embd.type_name, embd.shape, embd.nbytes) == ("Q8_0", (640, 262144), 640 // 32 * 34 * 262144)


def counting_open(counter: list[int]):
    class Counted:
        def __init__(self, path, mode):
            self.fh = open(path, mode)

        def read(self, n=-1):
            data = self.fh.read(n)
            counter[0] += len(data)
            return data

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    return Counted


def test_a_4_gib_model_is_checked_from_its_header_alone(tmp_path, monkeypatch):
    synth = Synth(tensors=[("big.weight", (1 << 20, 1 << 10), F32)])  # 4 GiB of F32
    header = synth.to_bytes(with_data=False)
    path = tmp_path / "big.gguf"
    with open(path, "wb") as fh:
        fh.write(header)
        fh.truncate(len(header) + 4 * GiB)  # a hole: no disk used
    counter = [0]
    monkeypatch.setattr(gguf_check, "open", counting_open(counter), raising=False)
    start = time.perf_counter()
    (info,) = verify_gguf(path)
    elapsed = time.perf_counter() - start
    assert info.tensors[0].nbytes == 4 * GiB and info.file_size == len(header) + 4 * GiB
    assert 0 < counter[0] <= (1 << 20) + 4 and elapsed < 1.0  # the magic, then one 1 MiB window: never the data


@pytest.mark.parametrize("n_tensors, n_kv", [(1 << 63, 2), (2, (1 << 64) - 1), (1 << 40, 1 << 40), (3, 10 ** 7)])
def test_huge_counts_are_refused_at_once_even_in_a_huge_file(n_tensors, n_kv, tmp_path):
    header = Synth(n_tensors=n_tensors, n_kv=n_kv).to_bytes(with_data=False)
    path = tmp_path / "huge.gguf"
    with open(path, "wb") as fh:
        fh.write(header)
        fh.truncate(64 * GiB)  # sparse: room for 10 million keys by size alone
    start = time.perf_counter()
    with pytest.raises(ModelError, match="claims|metadata keys"):
        verify_gguf(path)
    assert time.perf_counter() - start < 1.0


# -- split models ---------------------------------------------------------------------------------
def split_model(folder, n=2, *, name="m", count_kv=None, no_kv=None, total=None, drop=()):
    tensors = Synth().tensors
    paths = []
    for k in range(n):
        kvs = [kv("split.no", "u16", k if no_kv is None else no_kv[k]),
               kv("split.count", "u16", n if count_kv is None else count_kv),
               kv("split.tensors.count", "i32", len(tensors) if total is None else total)]
        if k == 0:
            kvs = Synth().kvs + kvs
        mine = tensors[k::n]
        path = folder / f"{name}-{k + 1:05d}-of-{n:05d}.gguf"
        if k not in drop:
            Synth(kvs=kvs, tensors=mine).write(path)
        paths.append(path)
    return paths


def test_a_split_model_is_checked_part_by_part(tmp_path):
    parts = split_model(tmp_path, 3)
    infos = verify_gguf(parts[0])
    assert [i.path for i in infos] == parts and sum(len(i.tensors) for i in infos) == 3


@pytest.mark.parametrize("kwargs, given, message", [
    (dict(drop=(2,)), 0, "1 of its 3 parts missing next to it (m-00003-of-00003.gguf)"),
    (dict(), 1, "is part 00002 of a split model: give the first part, m-00001-of-00003.gguf"),
    (dict(count_kv=2), 0, "its name says 3 parts but its header (split.count) says 2"),
    (dict(no_kv=(0, 2, 1)), 0, "says it is part 3 (split.no), not part 2"),
    (dict(total=5), 0, "announces 5 tensors (split.tensors.count), the 3 parts hold 3"),
])
def test_split_model_problems(kwargs, given, message, tmp_path):
    parts = split_model(tmp_path, 3, **kwargs)
    with pytest.raises(ModelError, match=re.escape(message)):
        verify_gguf(parts[given])


def test_a_part_renamed_out_of_the_split_pattern_is_refused(tmp_path):
    first = split_model(tmp_path, 2)[0]
    alone = first.rename(tmp_path / "model.gguf")
    with pytest.raises(ModelError, match="split in 2 files .* not named NAME-00001-of-0000N.gguf"):
        verify_gguf(alone)


def test_damaged_part_is_named(tmp_path):
    parts = split_model(tmp_path, 2)
    parts[1].write_bytes(parts[1].read_bytes()[:-10])
    with pytest.raises(ModelError, match="m-00002-of-00002.gguf is not a usable GGUF model: .*past the end"):
        verify_gguf(parts[0])


# -- every load path checks -----------------------------------------------------------------------
def test_the_resolver_and_check_gguf_verify_the_structure(tmp_path):
    path = Synth(offsets={"blk.0.w": 1 << 40}).write(tmp_path / "bad.gguf")
    for call in (lambda: model_file.check_gguf(path), lambda: modellocate.resolve_model_ref(str(path))):
        with pytest.raises(ModelError, match="points past the end of the file"):
            call()
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(ModelError, match=re.escape("it is empty (0 bytes); the file is incomplete")):
        model_file.check_gguf(empty)
