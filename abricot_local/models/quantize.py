"""A quant ladder made here: ``abricot-local quantize SOURCE --to F16,Q8_0,Q4_K_M,...``.

Each rung is written by llama.cpp's own quantizer (backends/llama_cpp/quantize.py, through
llama-cpp-python's binding), beside a models.toml fragment naming the rungs as quants of one
``base`` (so that ``run --quants`` and ``report``'s ladder know them). A quantized SOURCE is
refused unless ``allow_requantize``: then the F16 rung is written first (the SOURCE's function at
16 bits, not the original weights; the fragment says so) and every other rung is made from it.
The disk is checked before anything is written; a rung already there and whole (a sound GGUF of
that quant) is kept; a rung is written to a temporary file and renamed when complete.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from abricot_local import hashing
from abricot_local.cache import cache_dir, publish, shown
from abricot_local.errors import AbricotError, ModelError, UsageError
from abricot_local.gguf.file import FILE_TYPES, facts, model_bytes, strip_quant

UNQUANTIZED = ("F32", "F16", "BF16")
REFERENCE = "F16"
# bits per weight, roughly (llama.cpp's quantize --help): the disk check's estimate, over-counted
_BPW = {"F32": 32, "F16": 16, "BF16": 16, "Q8_0": 8.5, "Q6_K": 6.6, "Q5_K_M": 5.7, "Q5_K_S": 5.6, "Q5_0": 5.5,
        "Q5_1": 6, "Q4_K_M": 4.9, "Q4_K_S": 4.6, "Q4_0": 4.5, "Q4_1": 5, "Q3_K_L": 4.3, "Q3_K_M": 3.9,
        "Q3_K_S": 3.5, "Q2_K": 3.4}
_SLACK = 1.15  # tensors kept at higher precision (embeddings, norms), fallbacks
_HEAD = "# written by abricot-local quantize"
Notify = Callable[[str], None]


@dataclass(frozen=True)
class Rung:
    quant: str
    path: Path
    sha256: str
    size: int
    made_from: str  # the quant of the file it was written from
    kept: bool  # already there and whole: not written again
    seconds: float
    fallbacks: str  # llama.cpp's fallbacks in one line ("" when none)


@dataclass(frozen=True)
class Ladder:
    source: str  # the SOURCE as given
    source_path: Path
    source_quant: str
    base: str  # the rungs' models.toml ``base``
    requantized: bool  # the reference is a dequantized quant
    rungs: tuple[Rung, ...]
    fragment: Path  # the models.toml written beside the rungs

    def alias(self, quant: str) -> str:
        return alias_of(self.base, quant)

    def command(self) -> str:
        """The `run --quants` command line over these rungs."""
        quants = ",".join(r.quant for r in self.rungs)
        return (f"abricot-local run {self.alias(self.rungs[0].quant)} --quants {quants} --models "
                f"{shown(self.fragment)} --tasks TASKS")


def alias_of(base: str, quant: str) -> str:
    return f"{base}-{quant}".lower()


def parse_rungs(text: str) -> tuple[str, ...]:
    """``--to`` as llama.cpp names its file types (any case), in the order given, each once."""
    names = [q.strip().upper() for q in (text or "").split(",") if q.strip()]
    known = set(FILE_TYPES.values())
    bad = [q for q in names if q not in known]
    if not names or bad:
        raise UsageError(f"--to: {'unknown quant ' + ', '.join(bad) if bad else 'no quant given'}; llama.cpp "
                         f"writes {', '.join(sorted(known))}")
    return tuple(dict.fromkeys(names))


def _source(source: str, models_file: str | None):
    """(label, path, its registry entry or None) of SOURCE: an alias, a file or a store reference."""
    from abricot_local.models.ref import resolve_model_ref

    ref = resolve_model_ref(source, backend="llama.cpp", models_file=models_file)
    if ref.path is None:
        raise UsageError(f"{source} names no model file: quantize needs a GGUF")
    return ref.label, Path(ref.path), ref.spec


def _whole(path: Path, quant: str) -> bool:
    """A rung already there: a regular GGUF, structurally sound, of that quant."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        return facts(path).quant == quant
    except AbricotError:
        return False


def _check_disk(todo: list[str], params: int, folder: Path) -> None:
    from abricot_local.memory import free_disk

    need = int(sum(params * _BPW.get(q, 16) / 8 for q in todo) * _SLACK)
    where, free = free_disk(folder)
    if free is not None and need > free:
        raise ModelError(f"not enough disk space: {len(todo)} rung(s) ({', '.join(todo)}) need about "
                         f"{need / 2**30:.1f} GiB but {where} has {free / 2**30:.1f} GiB free; free some "
                         f"space or give --out on a larger disk")


def _write(src: Path, dst: Path, quant: str, requantize: bool, threads: int) -> str:
    """One rung through llama.cpp, into a temporary file renamed when whole; its fallbacks' line."""
    from abricot_local.backends import quantizer

    quantize = quantizer()

    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    try:
        written = quantize(src, Path(tmp), quant, allow_requantize=requantize, threads=threads)
        if facts(Path(tmp)).quant != quant:
            raise ModelError(f"llama.cpp wrote {dst.name} but its header does not say {quant}")
        publish(Path(tmp), dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return written.fallbacks


def make_ladder(source: str, to: str, *, out: str | None = None, allow_requantize: bool = False,
                models_file: str | None = None, threads: int = 0, notify: Notify | None = None) -> Ladder:
    """Write ``source`` at each quant of ``to`` (see the module's text); ``notify`` hears each rung."""
    say = notify or (lambda _text: None)
    quants = parse_rungs(to)
    label, path, spec = _source(source, models_file)
    info = facts(path)
    src_quant = info.quant or "?"
    requantized = src_quant not in UNQUANTIZED
    if requantized and not allow_requantize:
        raise UsageError(f"{label} is already quantized ({src_quant}): its rungs would be made from a dequantized "
                         f"{src_quant}, not from the original weights. Give --allow-requantize to do it anyway "
                         "(the F16 rung is then the reference: the same function at 16 bits)")
    if requantized and REFERENCE not in quants:
        quants = (REFERENCE, *quants)
        say(f"{label} is {src_quant}: the {REFERENCE} rung is written first, the reference every other rung is made from")
    elif requantized:
        quants = (REFERENCE, *(q for q in quants if q != REFERENCE))
    folder = Path(out) if out else cache_dir() / "quants" / label
    if folder.is_symlink():
        raise UsageError(f"--out {folder} is a symbolic link; give the folder itself")
    folder.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", strip_quant(label)).strip("-") or "model"
    base = f"{stem}-from-{src_quant.lower()}" if requantized else stem
    dsts = {q: folder / f"{alias_of(base, q)}.gguf" for q in quants}
    for q, d in dsts.items():
        if d.is_symlink():
            raise UsageError(f"{d} is a symbolic link: quantize writes only files of its own; remove it or give --out")
    todo = [q for q in quants if not _whole(dsts[q], q)]
    _check_disk(todo, info.parameters, folder)
    rungs = []
    for k, q in enumerate(quants, 1):
        from_path, from_quant = ((dsts[REFERENCE], REFERENCE) if requantized and q != REFERENCE else (path, src_quant))
        start = time.perf_counter()
        fallbacks, kept = "", q not in todo
        if kept:
            say(f"[{k}/{len(quants)}] {q}: {shown(dsts[q])} is there and whole: kept")
        else:
            say(f"[{k}/{len(quants)}] {q}: writing from {from_quant} ...")
            fallbacks = _write(from_path, dsts[q], q, requantized and q == REFERENCE, threads)
        seconds = time.perf_counter() - start
        rung = Rung(q, dsts[q], hashing.sha256_file(dsts[q]), model_bytes(dsts[q]), from_quant, kept, seconds, fallbacks)
        rungs.append(rung)
        if not kept:
            say(f"[{k}/{len(quants)}] {q}: {rung.size / 1e6:.0f} MB in {seconds:.1f} s"
                + (f"; llama.cpp: {fallbacks}" if fallbacks else ""))
    ladder = Ladder(source, path, src_quant, base, requantized, tuple(rungs), folder / "models.toml")
    _write_fragment(ladder, spec)
    return ladder


def fragment_text(ladder: Ladder, spec=None, earlier: dict | None = None) -> str:
    """The models.toml fragment: one entry per rung (``base``, ``quant``, ``path``, ``sha256``), after the
    entries of ``earlier`` (alias -> table: an earlier fragment's rungs this call did not write, still there)."""
    head = [f"{_HEAD}: {ladder.source} ({ladder.source_quant}), each rung by llama.cpp's quantizer"]
    note = ""
    if ladder.requantized:
        note = (f"made from {ladder.source} ({ladder.source_quant}) dequantized: the reference {REFERENCE} is "
                f"the {ladder.source_quant} function at 16 bits, not the original weights")
        head.append(f"# {note}")
    extra = {}
    if spec is not None:
        extra = {k: getattr(spec, k) for k in ("tokenizer", "chat_template", "license", "params") if getattr(spec, k)}
        if spec.n_ctx:
            extra["n_ctx"] = spec.n_ctx
    lines = head
    for alias, table in (earlier or {}).items():
        lines += ["", f"[{_q(alias)}]"] + [f"{k} = {v if isinstance(v, int) else _q(v)}" for k, v in table.items()]
    for r in ladder.rungs:
        lines += ["", f"[{_q(ladder.alias(r.quant))}]", 'source = "local"', f"path = {_q(r.path.name)}",
                  f"sha256 = {_q(r.sha256)}", f"quant = {_q(r.quant)}", f"base = {_q(ladder.base)}"]
        lines += [f"{k} = {v if isinstance(v, int) else _q(v)}" for k, v in extra.items()]
        if note:
            lines.append(f"notes = {_q(note if r.quant == REFERENCE else f'made from the {REFERENCE} rung; ' + note)}")
    return "\n".join(lines) + "\n"


def _q(text: str) -> str:
    import json

    return json.dumps(str(text), ensure_ascii=False)


def _write_fragment(ladder: Ladder, spec) -> None:
    from abricot_local.jsonfiles import atomic_write

    f = ladder.fragment
    if f.is_symlink() or (f.exists() and not f.read_text(errors="replace").startswith(_HEAD)):
        raise UsageError(f"{f} is there and was not written by quantize: give another --out")
    earlier = {}
    if f.exists():  # an earlier call's rungs stay named, while their files are there
        import sys

        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib
        try:
            old = tomllib.loads(f.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            old = {}
        mine = {ladder.alias(r.quant) for r in ladder.rungs}
        earlier = {a: t for a, t in old.items() if isinstance(t, dict) and a not in mine and t.get("base") == ladder.base
                   and isinstance(t.get("path"), str) and (f.parent / t["path"]).is_file()
                   and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in t.values())}
    atomic_write(ladder.fragment, fragment_text(ladder, spec, earlier))
