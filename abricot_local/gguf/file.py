"""A model file before llama.cpp reads it: a regular file, GGUF, structurally sound
(checked once per file per process: per device and inode, so the hard links of one file
are parsed once), and the facts its header gives for listings."""

from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from abricot_local.errors import ModelError
from abricot_local.gguf.check import SPLIT_NAME, GGUFInfo, read_header, split_parts

_checked: dict[tuple, tuple[GGUFInfo, ...]] = {}  # (stat key, real path of a split part) -> headers checked

# llama.cpp's enum llama_ftype (general.file_type) -> the quant names files carry
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
              11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
              17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
              23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
              29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4"}
QUANT_RE = re.compile(r"(?i)(?<![A-Z0-9])((?:I?Q\d(?:_[A-Z0-9]+)*)|F16|BF16|F32)(?![A-Z0-9])")


def _stat_key(path: Path) -> tuple:
    """What names a file's content now: device, inode, size and times (hard links share it);
    a split model's part adds its real path, since its other parts are found by its name."""
    real = os.path.realpath(path)
    st = os.stat(real)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return (key, real if SPLIT_NAME.match(Path(real).name) or SPLIT_NAME.match(Path(path).name) else None)


def require_regular(path: Path) -> None:
    """A model must be a regular file: a folder, a pipe (whose open() would block forever) or a
    device is refused in one line."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ModelError(f"model file not found: {path}") from None
    except OSError as exc:
        raise ModelError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelError(f"{path} is a folder: give the .gguf file (for a split model, its -00001-of-0000N.gguf part)")
    if not stat.S_ISREG(st.st_mode):
        kind = "a named pipe (FIFO)" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) \
            else "a device"
        raise ModelError(f"{path} is {kind}, not a regular file: a model is a .gguf file on disk")


def verify_gguf(path: Path | str) -> tuple[GGUFInfo, ...]:
    """Check a model file, and every part of a split model; one GGUFInfo per part."""
    path = Path(path)
    first = read_header(path)
    parts = split_parts(path)
    n_split = first.metadata.get("split.count", 1)
    if parts is None:
        if isinstance(n_split, int) and n_split > 1:
            raise ModelError(f"{path} is part of a model split in {n_split} files (split.count) but is not named "
                             "NAME-00001-of-0000N.gguf; llama.cpp finds the other parts by that name: rename them")
        return (first,)
    if path != parts[0]:
        raise ModelError(f"{path} is part {SPLIT_NAME.match(path.name)['no']} of a split model: give the first "
                         f"part, {parts[0].name}")
    if "split.count" in first.metadata and n_split != len(parts):
        raise ModelError(f"{path}: its name says {len(parts)} parts but its header (split.count) says {n_split}")
    missing = [p.name for p in parts if not p.is_file()]
    if missing:
        raise ModelError(f"split model {path.name}: {len(missing)} of its {len(parts)} parts missing next to it "
                         f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); download every part")
    infos = [first]
    for k, part in enumerate(parts[1:], start=1):
        info = read_header(part)
        if info.metadata.get("split.no", k) != k:
            raise ModelError(f"{part} says it is part {info.metadata['split.no'] + 1} (split.no), not part {k + 1}")
        infos.append(info)
    total = first.metadata.get("split.tensors.count")
    found = sum(len(i.tensors) for i in infos)
    if isinstance(total, int) and total != found:
        raise ModelError(f"split model {path.name}: the header announces {total} tensors (split.tensors.count), "
                         f"the {len(parts)} parts hold {found}; a part is from another upload: download them again")
    return tuple(infos)


def check_gguf(path: Path) -> Path:
    """The path itself if it is a regular, readable, structurally sound GGUF file (every part of
    a split one), else :class:`ModelError`. Checked once per file per process."""
    headers(path)
    return path


def headers(path: Path) -> tuple[GGUFInfo, ...]:
    """The checked headers of a model (one per part), read once per unchanged file per process."""
    path = Path(path)
    require_regular(path)
    key = _stat_key(path)
    if key in _checked:
        return tuple(replace(info, path=path) if k == 0 and info.path != path else info
                     for k, info in enumerate(_checked[key]))
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ModelError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    if magic != b"GGUF"[: len(magic)]:  # an empty or cut-short file: verify_gguf says so
        raise ModelError(f"{path} is not a GGUF file (it does not start with 'GGUF'); llama.cpp needs a .gguf model")
    infos = verify_gguf(path)  # the header's structure (and every part of a split model)
    _checked[key] = infos
    return infos


@dataclass(frozen=True)
class GGUFFacts:
    """What a listing shows of a GGUF, from its header alone."""

    architecture: str
    name: str
    parameters: int  # elements of every tensor (all parts)
    quant: str
    context_length: int | None
    size: int  # bytes, every part
    chat_template: str | None


def quant_name(info: GGUFInfo, path: Path) -> str:
    ftype = info.metadata.get("general.file_type")
    if isinstance(ftype, int) and ftype in FILE_TYPES:
        return FILE_TYPES[ftype]
    m = QUANT_RE.search(path.name)
    return m.group(1).upper() if m else ""


def facts(path: Path) -> GGUFFacts:
    """The listing facts of a GGUF (checked first; :class:`ModelError` if it is not sound)."""
    infos = headers(path)
    meta = infos[0].metadata
    arch = str(meta.get("general.architecture") or "?")
    ctx = meta.get(f"{arch}.context_length")
    params = sum(math.prod(t.shape) for info in infos for t in info.tensors)
    return GGUFFacts(arch, str(meta.get("general.name") or ""), params, quant_name(infos[0], Path(path)),
                     ctx if isinstance(ctx, int) else None, sum(i.file_size for i in infos),
                     meta.get("tokenizer.chat_template"))


def human_params(n: int) -> str:
    """1_234_567_890 -> "1.2B"; 268_098_176 -> "268M"."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return str(n)


# -- quant tags in names -------------------------------------------------------------------
_QUANT_RE = re.compile(r"(?<![a-z0-9])(i?q[1-8](?:_[a-z0-9]+)*|bf16|f16|f32)(?![a-z0-9])", re.IGNORECASE)


def quant_of(text: str) -> str:
    """The last quant tag in a model name or file name ("...-Q4_K_M.gguf" -> "Q4_K_M")."""
    found = _QUANT_RE.findall(Path(text).name.removesuffix(".gguf"))
    return found[-1].upper() if found else ""


def strip_quant(name: str) -> str:
    """The name without its quant tag (:func:`quant_of`'s: the last one) and the separators around it, one kept
    between the parts it joined, then any tags the name still ends with (``model-f16-q8_0``, a Q8_0 made from
    ``model-f16``, is ``model``'s rung, as ``model-f16`` is): a tag inside the name stays, part of the model's name
    (quantize's requantized ladder ``x-q4_1-dequantized-f16`` is ``x-q4_1-dequantized``'s F16 rung)."""
    found = list(_QUANT_RE.finditer(name))
    if not found:
        return name.strip("-_. ") or name
    head, tail = name[:found[-1].start()], name[found[-1].end():]
    left, right = head.rstrip("-_. "), tail.lstrip("-_. ")
    joint = (head[len(left):] or tail[:len(tail) - len(right)])[:1] if left and right else ""
    out = (left + joint + right).strip("-_. ")
    while (last := list(_QUANT_RE.finditer(out))) and last[-1].end() == len(out) and last[-1].start() > 0:
        out = out[:last[-1].start()].rstrip("-_. ")  # a tag the stripped name still ends with
    return out or name


def header_quant(path: Path) -> str:
    """The quant its GGUF header names (the first part's), or ""."""
    infos = headers(path)
    return quant_name(infos[0], path) if infos else ""


def declared_quant(path: Path) -> str:
    """The quant a GGUF's own header declares (the first part's ``general.file_type``, by llama.cpp's names), ""
    when it declares none or a type no quant name is known for (its file name is not read: :func:`header_quant`)."""
    ftype = headers(Path(path))[0].metadata.get("general.file_type")
    return FILE_TYPES.get(ftype, "") if isinstance(ftype, int) and not isinstance(ftype, bool) else ""


def same_quant(a: str, b: str) -> bool:
    """Whether two quant names name one llama.cpp file type (any case; ``Q4_K`` is ``Q4_K_M``, as llama-quantize
    takes them)."""
    return _ALIASES.get(a.upper(), a.upper()) == _ALIASES.get(b.upper(), b.upper())


def file_type_name(quant: str) -> bool:
    """Whether ``quant`` names one of llama.cpp's file types (:data:`FILE_TYPES`; ``Q4_K`` too), not a label of
    a user's own (``UD-Q4_K_XL``)."""
    return any(same_quant(quant, name) for name in FILE_TYPES.values())


def model_bytes(path: Path) -> int:
    """Size of a GGUF, every part of a split one (name-0000k-of-0000N.gguf) included."""
    parts = split_parts(Path(path)) or [Path(path)]
    return sum(p.stat().st_size for p in parts if p.exists())


# -- which model a file is a quant of: its architecture and vocabulary --------------------
@dataclass(frozen=True)
class Identity:
    """What every quant of one model shares: the architecture, and the tokenizer's vocabulary (its
    type, size and the SHA-256 of its token strings as stored); quants of two models differ in one."""

    architecture: str
    tokenizer: str  # tokenizer.ggml.model ("llama", "gpt2"...); "" when the header names none
    n_tokens: int | None  # None: the header lists no tokens
    tokens_sha256: str  # of the token strings' bytes as the header stores them ("" without tokens)

    def describe(self) -> str:
        vocab = f"{self.n_tokens:,}-token {self.tokenizer or '?'} vocabulary" if self.n_tokens else "no vocabulary"
        return f"{self.architecture}, {vocab}"

    def differs(self, other: "Identity") -> str:
        """What differs from ``other`` ("architecture", "vocabulary"), "" when nothing does."""
        if self.architecture != other.architecture:
            return "architecture"
        if (self.tokenizer, self.n_tokens, self.tokens_sha256) != (other.tokenizer, other.n_tokens, other.tokens_sha256):
            return "vocabulary"
        return ""


def identity(path: Path) -> Identity:
    """The :class:`Identity` of a GGUF, from its (checked) header; the token strings are read once
    (a few MB for a 262k-token vocabulary), never the weights."""
    import hashlib

    from abricot_local.gguf.check import STRING

    info = headers(Path(path))[0]
    meta, span = info.metadata, info.arrays.get("tokenizer.ggml.tokens")
    arch, tok = str(meta.get("general.architecture") or "?"), meta.get("tokenizer.ggml.model")
    if span is None or span.etype != STRING:
        return Identity(arch, tok if isinstance(tok, str) else "", None, "")
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            fh.seek(span.start)
            left = span.end - span.start
            while left > 0:
                chunk = fh.read(min(left, 1 << 20))
                if not chunk:
                    raise ModelError(f"{path} shrank while its vocabulary was read")
                digest.update(chunk)
                left -= len(chunk)
    except OSError as exc:
        raise ModelError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    return Identity(arch, tok if isinstance(tok, str) else "", span.count, digest.hexdigest())


# -- the order of precision: bits per weight ------------------------------------------------
# The name rule: bits per weight of each llama.cpp file type as llama-quantize --help gives it (the bpw it
# lists, else its Llama-3-8B size: GiB x 2^33 / 8.03e9 weights; F32, F16, BF16 and MXFP4: ggml's block
# bytes x 8 / block size). Only for a run that recorded no ``model.bits_per_weight`` (recorded from the file's tensors).
NAME_BITS: dict[str, float] = {
    "F32": 32.0, "F16": 16.0, "BF16": 16.0, "Q8_0": 8.52, "Q6_K": 6.57, "Q5_1": 6.04, "Q5_K_M": 5.70,
    "Q5_K_S": 5.57, "Q5_0": 5.57, "Q4_1": 5.11, "Q4_K_M": 4.90, "Q4_K_S": 4.68, "Q4_0": 4.64, "IQ4_NL": 4.5,
    "Q3_K_L": 4.31, "MXFP4": 4.25, "IQ4_XS": 4.25, "Q3_K_M": 4.0, "IQ3_M": 3.66, "Q3_K_S": 3.65, "IQ3_S": 3.44,
    "IQ3_XS": 3.3, "Q2_K": 3.17, "Q2_K_S": 3.17, "IQ3_XXS": 3.06, "IQ2_M": 2.7, "IQ2_S": 2.5, "IQ2_XS": 2.31,
    "IQ2_XXS": 2.06, "TQ2_0": 2.06, "IQ1_M": 1.75, "TQ1_0": 1.69, "IQ1_S": 1.56,
}
_ALIASES = {"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M", "MXFP4_MOE": "MXFP4"}  # llama-quantize's


def quant_bits(quant: str) -> float:
    """A quant's bits per weight as its name says (:data:`NAME_BITS`: F16 16, Q8_0 8.52, Q4_K_M 4.9, Q4_0 4.64; a
    name it lacks, the digit after Q: ``Q4_X`` 4; -1: not a quant name)."""
    q = quant.upper()
    q = _ALIASES.get(q, q)
    if q in NAME_BITS:
        return NAME_BITS[q]
    m = re.match(r"I?Q(\d+)", q)
    return float(m.group(1)) if m else -1.0


def bits_per_weight(path: Path | str) -> float | None:
    """A model file's real bits per weight, as llama.cpp's loader prints it (``file size = ... (4.85 BPW)``):
    every tensor's bytes x 8 over its elements, every part of a split file, from the checked header's tensor
    infos (ggml's block size and bytes per block of each tensor's type), to 4 decimals; None: no tensor (a
    vocabulary-only file)."""
    infos = headers(Path(path))
    n = sum(math.prod(t.shape) for info in infos for t in info.tensors)
    return round(8 * sum(t.nbytes for info in infos for t in info.tensors) / n, 4) if n else None


@dataclass(frozen=True)
class Precision:
    """What orders a ladder's members (:func:`by_precision`): the quant's name, its file's real bits per weight
    when known (a run's recorded ``model.bits_per_weight``, a registry file on disk; None: not known), and the
    names that break a tie (a run's label and folder, a registry alias)."""

    quant: str
    bits: float | None = None
    tie: tuple[str, ...] = ()

    def named(self) -> bool:
        """Whether its quant's name is one :data:`NAME_BITS` sizes."""
        q = self.quant.upper()
        return _ALIASES.get(q, q) in NAME_BITS


def by_precision(members: Sequence[str | Precision]) -> list[int]:
    """The indices of ``members`` (quant names, or :class:`Precision`) from the most precise down, on ONE scale for
    the whole set: the names' (:func:`quant_bits`, llama-quantize's sizes) where every member's is one
    :data:`NAME_BITS` sizes, else the files' real bits per weight where every member has them, else the names'
    (the digit after Q where a name is not sized). Never the two mixed: a small model's real figure (gemma-3-270m
    Q4_K_M: 7.36, its embeddings at higher precision) is far above the name's (4.90), so a mixed order would put a
    Q4_K_M on disk above a Q6_K not downloaded, and a ladder's reference would depend on what is downloaded. Ties:
    the quant's name in alphabetical order, then the tie's names; the same order whatever order they are given in,
    but for members alike in every part (given twice)."""
    ps = [Precision(m) if isinstance(m, str) else m for m in members]
    real = not all(p.named() for p in ps) and all(p.bits is not None for p in ps)
    keys = [((-p.bits,) if real else ()) + (-quant_bits(p.quant), p.quant.upper(), p.tie) for p in ps]
    return sorted(range(len(keys)), key=lambda i: (keys[i], i))


def highest_precision(members: Sequence[str | Precision]) -> int:
    """The index of a ladder's reference among ``members``: the first of :func:`by_precision` (compare's
    equivalence verdict, the quant ladder's table and ``run --quants --until-settled``)."""
    return by_precision(members)[0]
