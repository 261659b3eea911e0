"""A quant ladder made here: ``abricot-local quantize SOURCE --to F16,Q8_0,Q4_K_M,...``.

Each rung is written by llama.cpp's own quantizer (backends/llama_cpp/quantize.py, through
llama-cpp-python's binding), beside a models.toml naming the rungs as quants of one ``base`` (so
that ``run --quants`` and ``report``'s ladder know them), each with its SHA-256 and its SOURCE's
(``from_sha256``). A SOURCE whose weights are quantized (what its tensors hold, whatever its header
or name says) is refused unless ``allow_requantize``: then the F16 rung is written first (the
SOURCE's function at 16 bits, not the original weights) and every other rung is made from it;
such a ladder's base says ``<stem>-<quant>-dequantized``, true of every rung. The types llama.cpp
cannot write here (an importance matrix needed; MXFP4 of a dense model) are refused up front
(quant_types.py). The folder is checked and held first (quant_folder.py), then the disk, every
tensor counted at the type llama.cpp will give it: each rung's size, the total and the free space are
said before anything is written (:class:`LadderPlan`; ``quantize --dry-run`` says it and stops). A rung already there is kept only when
models.toml lists it, with that SHA-256, as made from this SOURCE; a file there that it does not
list is the user's and refused, never overwritten; a second SOURCE whose rungs would take the
names of another's gets a base of its own (``<base>-<its SHA-256's first 8 digits>``). A rung is
written to a temporary file, listed in models.toml, then renamed: a Ctrl-C or SIGTERM leaves no
partial file, and a full disk is said as such. A call refused or stopped removes the folders it made
for --out and left empty (never a folder that was there).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from abricot_local import hashing
from abricot_local.cache import cache_dir, publish, shown
from abricot_local.errors import ModelError, NoSpaceError, UsageError, opt
from abricot_local.gguf.file import FILE_TYPES, facts, headers, strip_quant
from abricot_local.models import quant_folder
from abricot_local.names import path_part
from abricot_local.models.quant_types import (UNQUANTIZED, estimate, refuse_experts_only, refuse_unwritable,
                                              weights_quant)

REFERENCE = "F16"
Notify = Callable[[str], None]


@dataclass(frozen=True)
class Rung:
    quant: str
    path: Path
    sha256: str
    size: int
    made_from: str  # the quant of the file it was written from
    kept: bool  # already there, made from this SOURCE: not written again
    seconds: float
    fallbacks: str  # llama.cpp's fallbacks in one line ("" when none)


@dataclass(frozen=True)
class Ladder:
    source: str  # the SOURCE as given
    source_path: Path
    source_quant: str
    source_sha256: str
    base: str  # the rungs' models.toml ``base``
    requantized: bool  # the reference is a dequantized quant
    rungs: tuple[Rung, ...]
    fragment: Path  # the models.toml beside the rungs
    ladder: tuple[str, ...] = ()  # every rung of ``base`` its models.toml lists, the reference first (:func:`listed`)

    def alias(self, quant: str) -> str:
        return alias_of(self.base, quant)


def listed(entries: dict, base: str, folder: Path) -> tuple[str, ...]:
    """The quants of ``base`` that a ladder's models.toml (``entries``) lists with their file in ``folder``: its
    whole ladder, made by this call or an earlier one (what `run --quants` runs, so a rung added later joins the
    ladder's runs), the reference first (gguf.file.highest_precision: F16 in a requantized ladder), then as listed."""
    from abricot_local.gguf.file import highest_precision

    quants = list(dict.fromkeys(str(e.get("quant", "")) for e in entries.values() if e.get("base") == base
                                and e.get("quant") and (folder / str(e.get("path", ""))).is_file()))
    if not quants:
        return ()
    first = quants.pop(highest_precision(quants))
    return (first, *quants)


def alias_of(base: str, quant: str) -> str:
    return f"{base}-{quant}".lower()


def _alias_part(name: str) -> str:
    """``name`` as the base of the rungs' aliases (and file names): letters, digits, ``_`` and ``-``, every other
    run of characters one ``-``, as a models.toml alias must be (models.registry; names.path_part keeps ``:``,
    spaces, dots: not an alias's rule)."""
    return re.sub(r"-{2,}", "-", re.sub(r"[^A-Za-z0-9_-]+", "-", name)).strip("-_") or "model"


def parse_rungs(text: str) -> tuple[str, ...]:
    """``--to`` as llama.cpp names its file types (any case), in the order given, each once; the types
    llama.cpp writes only with an importance matrix are refused."""
    names = [q.strip().upper() for q in (text or "").split(",") if q.strip()]
    known = set(FILE_TYPES.values())
    bad = [q for q in names if q not in known]
    if not names or bad:
        raise UsageError(f"{opt('to')}: {'unknown quant ' + ', '.join(bad) if bad else 'no quant given'}; llama.cpp "
                         f"writes {', '.join(sorted(known))}")
    refuse_unwritable(names)
    return tuple(dict.fromkeys(names))


def _source(source: str, models_file: str | None):
    """(label, path, its registry entry or None) of SOURCE: an alias, a file or a store reference."""
    from abricot_local.backends import DEFAULT_BACKEND
    from abricot_local.models.locate import resolve_model_ref

    ref = resolve_model_ref(source, backend=DEFAULT_BACKEND, models_file=models_file)  # _write quantizes with it
    if ref.path is None:
        raise UsageError(f"{source} names no model file: quantize needs a GGUF")
    return ref.label, Path(ref.path), ref.spec


def source_quant(path: Path, tensors) -> tuple[str, bool]:
    """(the SOURCE's quant, whether its weights are quantized), from what its matrices hold: a header
    or a name that says Q8_0 over F16 weights is not believed, nor one that says F16 over quantized ones."""
    said = facts(path).quant
    held, quantized = weights_quant(tensors)
    if quantized:
        return (said if said and said not in UNQUANTIZED else held), True
    return (said if said in UNQUANTIZED else held or said or "?"), False


def _pick_base(stem: str, quants, sha: str, entries: dict, say: Notify) -> str:
    """``stem``, unless models.toml gives that base, or the alias of one of ``quants`` under it, to
    another SOURCE's rungs: then ``stem-<sha[:8]>`` (longer while that is taken too)."""
    def taken(base: str) -> bool:
        aliases = {alias_of(base, q) for q in quants}
        return any(isinstance(t, dict) and t.get("from_sha256") != sha and (
            str(t.get("base", "")).lower() == base.lower() or alias.lower() in aliases)
            for alias, t in entries.items())

    if not taken(stem):
        return stem
    base = next(b for n in (8, 16, 64) if not taken(b := f"{stem}-{sha[:n]}"))
    say(f"the folder already holds rungs named {stem}-... made from another file: these are named {base}-...")
    return base


def _keep(dst: Path, alias: str, entries: dict, sha: str) -> bool:
    """Whether the rung at ``dst`` is there, listed in models.toml as made from this SOURCE with its
    SHA-256 (kept); False when nothing is there; anything else there is refused, never overwritten."""
    if not dst.is_symlink() and not dst.exists():
        return False
    entry = entries.get(alias)
    mine = isinstance(entry, dict) and entry.get("path") == dst.name and entry.get("from_sha256") == sha
    if dst.is_symlink() or not dst.is_file():
        kind = "a symbolic link" if dst.is_symlink() else "a folder" if dst.is_dir() else "not a regular file"
        raise UsageError(f"{dst} is {kind}, where quantize would write a rung: remove it or give another folder")
    if not mine:
        raise UsageError(f"{dst} is there and {quant_folder.FRAGMENT} does not list it as a rung quantize made from "
                         "this SOURCE: it is not overwritten; remove it or give another folder")
    if hashing.sha256_file(dst) != entry.get("sha256"):
        raise UsageError(f"{dst} is not the file quantize wrote (its SHA-256 differs from {quant_folder.FRAGMENT}'s): "
                         "it is not overwritten; remove it to have it written again")
    return True


@dataclass(frozen=True)
class LadderPlan:
    """What a quantize call will write, said before it writes (and all that ``quantize --dry-run`` does): each
    rung's bytes as llama.cpp will write them (quant_types.estimate: every tensor at the type it gives it), the
    rungs already there (kept, not written), and the free space where they go."""

    source: str
    folder: Path
    sizes: tuple[tuple[str, int], ...]  # (quant, bytes) of each rung, in the order they are written
    kept: tuple[str, ...]
    where: Path  # the folder, or the nearest one above it that is there
    free: int | None  # bytes; None: not known

    @property
    def need(self) -> int:
        return sum(n for q, n in self.sizes if q not in self.kept)

    def line(self) -> str:
        """One line: "plan: F16 271 MB, Q8_0 145 MB, ... to write: 615 MB in all; /data has 51.4 GB free"."""
        todo = [f"{q} {_size(n)}" for q, n in self.sizes if q not in self.kept]
        kept = f" ({', '.join(self.kept)} there already: kept)" if self.kept else ""
        free = f"{self.where} has {_size(self.free)} free" if self.free is not None else "free space not known"
        if not todo:
            return f"plan: nothing to write{kept}; {free}"
        return f"plan: {', '.join(todo)} to write{kept}: {_size(self.need)} in all; {free}"


def _check_disk(plan: LadderPlan) -> None:
    todo = [q for q, _ in plan.sizes if q not in plan.kept]
    if plan.free is not None and plan.need > plan.free:
        raise NoSpaceError(f"not enough disk space: {len(todo)} rung(s) ({', '.join(todo)}) need about "
                           f"{_size(plan.need)} but {plan.where} has {_size(plan.free)} free; free some space or give "
                           "another folder on a larger disk")


def _size(n: int) -> str:
    """Bytes as quantize's listing says a rung's size: decimal MB, GB from 1 GB."""
    return f"{n / 1e9:.1f} GB" if n >= 10**9 else f"{n / 1e6:.0f} MB"


def _write(src: Path, dst: Path, quant: str, requantize: bool, threads: int, need: int,
           listed: Callable[[str], None]) -> tuple[str, str]:
    """One rung through llama.cpp, into a temporary file that ``listed(sha256)`` names in models.toml
    before it is renamed; (its fallbacks' line, its SHA-256). A failure on a full disk says so."""
    from abricot_local.backends import DEFAULT_BACKEND, quantizer

    quantize = quantizer(DEFAULT_BACKEND)  # the backend _source found SOURCE for
    tmp = quant_folder.temp_for(dst)
    try:
        try:
            written = quantize(src, tmp, quant, allow_requantize=requantize, threads=threads)
        except ModelError as err:
            raise _full_disk(dst, tmp, need) or err
        if facts(tmp).quant != quant:
            raise ModelError(f"llama.cpp wrote {dst.name} but its header does not say {quant}")
        sha = hashing.sha256_file(tmp, memo=False)
        listed(sha)
        publish(tmp, dst)
    except BaseException:  # a Ctrl-C or SIGTERM (run by the CLI as one) too: no partial file left
        tmp.unlink(missing_ok=True)
        raise
    hashing.memo_store(dst, sha)
    return written.fallbacks, sha


def _full_disk(dst: Path, tmp: Path, need: int) -> NoSpaceError | None:
    """The error of a rung that stopped because the disk filled (what llama.cpp says of it is
    "basic_ios::clear: iostream error"), measured before its temporary file is removed."""
    from abricot_local.memory import free_disk

    where, free = free_disk(dst.parent)
    try:
        got = tmp.stat().st_size
    except OSError:
        got = 0
    if free is None or (free >= 16 << 20 and got + free >= need):
        return None
    return NoSpaceError(f"the disk is full: writing {dst.name} stopped at {_size(got)} of about {_size(need)}, "
                        f"with {_size(free)} free on {where}; free some space or give another folder (the partial "
                        "file is removed)")


@dataclass(frozen=True)
class _Asked:
    """A call's SOURCE and rungs, checked before anything is written (:func:`_asked`)."""

    label: str
    path: Path
    spec: object  # its registry entry, or None
    quant: str  # what its weights hold
    requantized: bool
    quants: tuple[str, ...]  # the rungs, in the order they are written (the F16 reference first when requantized)
    folder: Path
    sizes: tuple[tuple[str, int], ...]  # (quant, bytes llama.cpp will write)


def _asked(source: str, to: str, out: str | None, allow_requantize: bool, models_file: str | None,
           say: Notify) -> _Asked:
    quants = parse_rungs(to)
    label, path, spec = _source(source, models_file)
    infos = headers(path)
    tensors = [t for info in infos for t in info.tensors]
    src_quant, requantized = source_quant(path, tensors)
    refuse_experts_only(quants, tensors, label)
    if requantized and not allow_requantize:
        raise UsageError(f"{label} is already quantized ({src_quant}): its rungs would be made from a dequantized "
                         f"{src_quant}, not from the original weights. Give {opt('allow_requantize', True)} to do it anyway "
                         "(the F16 rung is then the reference: the same function at 16 bits)")
    if requantized and REFERENCE not in quants:
        quants = (REFERENCE, *quants)
        say(f"{label} is {src_quant}: the {REFERENCE} rung is written first, the reference every other rung is made from")
    elif requantized:
        quants = (REFERENCE, *(q for q in quants if q != REFERENCE))
    folder = Path(out) if out else cache_dir() / "quants" / path_part(label, "model")
    quant_folder.check(folder)
    sizes = tuple((q, estimate(tensors, q, infos[0].data_offset, infos[0].metadata)) for q in quants)
    return _Asked(label, path, spec, src_quant, requantized, quants, folder, sizes)


def _plan(source: str, asked: _Asked, kept: Sequence[str]) -> LadderPlan:
    from abricot_local.memory import free_disk

    where, free = free_disk(asked.folder)
    return LadderPlan(source, asked.folder, asked.sizes, tuple(kept), where, free)


def _named(asked: _Asked, entries: dict, sha: str, say: Notify) -> tuple[str, dict, tuple[str, ...]]:
    """(the rungs' base, each rung's file, the rungs there already, made from this SOURCE: kept)."""
    stem = _alias_part(strip_quant(asked.label))
    base = _pick_base(f"{stem}-{asked.quant.lower()}-dequantized" if asked.requantized else stem, asked.quants, sha,
                      entries, say)
    dsts = {q: asked.folder / f"{alias_of(base, q)}.gguf" for q in asked.quants}
    return base, dsts, tuple(q for q in asked.quants if _keep(dsts[q], alias_of(base, q), entries, sha))


def plan_ladder(source: str, to: str, *, out: str | None = None, allow_requantize: bool = False,
                models_file: str | None = None, notify: Notify | None = None) -> LadderPlan:
    """``quantize --dry-run``: what :func:`make_ladder` would write, checked as it checks it (the same refusals),
    each rung's size and the free disk; nothing is written and no folder made."""
    say = notify or (lambda _text: None)
    asked = _asked(source, to, out, allow_requantize, models_file, say)
    entries = quant_folder.read_entries(asked.folder) if asked.folder.is_dir() else {}
    _, _, kept = _named(asked, entries, hashing.sha256_file(asked.path) if entries else "", say)  # none: none kept
    return _plan(source, asked, kept)


def make_ladder(source: str, to: str, *, out: str | None = None, allow_requantize: bool = False,
                models_file: str | None = None, threads: int = 0, notify: Notify | None = None) -> Ladder:
    """Write ``source`` at each quant of ``to`` (see the module's text); ``notify`` hears the plan (each rung's
    size, the free disk: :class:`LadderPlan`) before anything is written, then each rung."""
    say = notify or (lambda _text: None)
    asked = _asked(source, to, out, allow_requantize, models_file, say)
    folder = asked.folder
    made = [d for d in (folder, *folder.parents) if not os.path.lexists(d)]  # this call's folders, the deepest first
    quant_folder.make(folder)
    try:
        with quant_folder.held(folder):
            gone = quant_folder.clean_stale(folder)
            if gone:
                say(f"removed {len(gone)} temporary file(s) an interrupted quantize left: {', '.join(gone)}")
            entries = quant_folder.read_entries(folder)
            sha = hashing.sha256_file(asked.path)
            base, dsts, kept = _named(asked, entries, sha, say)
            plan = _plan(source, asked, kept)
            say(plan.line())
            _check_disk(plan)
            ladder = Ladder(source, asked.path, asked.quant, sha, base, asked.requantized, (),
                            folder / quant_folder.FRAGMENT)
            needs = dict(asked.sizes)
            rungs = []
            for k, q in enumerate(asked.quants, 1):
                rungs.append(_rung(ladder, asked.spec, entries, q, dsts, q in kept, needs[q], threads,
                                   f"[{k}/{len(asked.quants)}]", say))
    except BaseException:  # refused, failed or stopped: the folders this call made go, where it left them empty
        _remove_empty(made)
        raise
    return replace(ladder, rungs=tuple(rungs), ladder=listed(entries, base, folder))


def _remove_empty(made: Sequence[Path]) -> None:
    """The folders quantize made (``made``: the deepest first) that hold nothing, removed: it removes only what it
    made; a folder that was there, or that holds anything, stays."""
    for d in made:
        try:
            d.rmdir()
        except OSError:  # not empty (or not ours to remove): it and the folders above it stay
            return


def _rung(ladder: Ladder, spec, entries: dict, q: str, dsts: dict, kept: bool, need: int, threads: int, at: str,
          say: Notify) -> Rung:
    """One rung: kept as it is, or written from the SOURCE (the F16 rung, in a requantized ladder)."""
    made_from = REFERENCE if ladder.requantized and q != REFERENCE else ladder.source_quant
    src = dsts[REFERENCE] if ladder.requantized and q != REFERENCE else ladder.source_path
    dst, alias = dsts[q], ladder.alias(q)
    if kept:
        say(f"{at} {q}: {shown(dst)} is there, made from this SOURCE: kept")
        return Rung(q, dst, entries[alias]["sha256"], dst.stat().st_size, made_from, True, 0.0, "")
    say(f"{at} {q}: writing from {made_from}" + (f" (the {ladder.source_quant} dequantized)" if made_from == REFERENCE
                                                   and ladder.requantized else "") + " ...")
    start = time.perf_counter()

    def listed(sha: str) -> None:
        entries[alias] = entry(ladder, spec, q, dst.name, sha)
        quant_folder.write_entries(dst.parent, entries)

    fallbacks, sha = _write(src, dst, q, ladder.requantized and q == REFERENCE, threads, need, listed)
    rung = Rung(q, dst, sha, dst.stat().st_size, made_from, False, time.perf_counter() - start, fallbacks)
    say(f"{at} {q}: {rung.size / 1e6:.0f} MB in {rung.seconds:.1f} s" + (f"; llama.cpp: {fallbacks}" if fallbacks else ""))
    return rung


def entry(ladder: Ladder, spec, quant: str, name: str, sha: str) -> dict:
    """A rung's models.toml table: the file, its SHA-256, its quant and base, its SOURCE's SHA-256, what
    the SOURCE's registry entry says of the model, and for a requantized ladder what its reference is."""
    table = {"source": "local", "path": name, "sha256": sha, "quant": quant, "base": ladder.base,
             "from_sha256": ladder.source_sha256}
    if spec is not None:
        table.update({k: getattr(spec, k) for k in ("tokenizer", "chat_template", "license", "params") if getattr(spec, k)})
        if spec.n_ctx:
            table["n_ctx"] = spec.n_ctx
    if ladder.requantized:
        note = (f"made from {ladder.source} ({ladder.source_quant}) dequantized: the reference {REFERENCE} is the "
                f"{ladder.source_quant} function at 16 bits, not the original weights")
        table["notes"] = note if quant == REFERENCE else f"made from the {REFERENCE} rung; {note}"
    return table
