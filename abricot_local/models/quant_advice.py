"""What a refused `run MODEL --quants` says to do (docs/compare.md#making-the-rungs-quantize): a quant the registry
lacks is made by `quantize` (:func:`quantize_advice`: a ladder quantize wrote gets its missing rungs added, by the
SOURCE its models.toml records, into its folder; any other ladder is made here from the model's highest-precision
file), and a model file given with the quants of a registry model is run as files (:func:`files_advice`), or as the
ladder the models.toml quantize wrote beside it names. Every `quantize` command it prints is a shell command, the
same in every door (errors.command), that works as printed; the run of files is a call each door makes its own way
(errors.call: the command line's `abricot-local run A B`, the API's ``evaluate(["A", "B"])``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from abricot_local.errors import UsageError, opt
from abricot_local.models.registry import ModelSpec


def quantize_advice(given: ModelSpec | None, family: Sequence[ModelSpec], quants: Sequence[str],
                     registry: dict[str, ModelSpec]) -> str:
    """What to do when the registry lacks a quant asked for (docs/compare.md#making-the-rungs-quantize). A ladder
    `quantize` wrote (:func:`_made_from`): the missing rungs added to it by `quantize` of the SOURCE its models.toml
    records, into its folder (:func:`_add_rungs`). Any other: make the ladder here with `quantize` from the model's
    highest-precision GGUF file by name (the entry named where it is that quant; its --models file carried where the
    entry is a file's the user named), requantizing when that is not F16, BF16 or F32, of the quants asked for at or
    below its precision. Either way a quant above that precision is said to need a higher-precision source (made
    from it, it would be that quant in disguise). "" when a quant asked for is no type llama.cpp writes (a misspelt
    name: the quants the registry has are the answer) or no quant of the model names a GGUF file (a synthetic
    entry: nothing to quantize)."""
    from abricot_local.errors import command
    from abricot_local.gguf.file import FILE_TYPES, Precision, highest_precision, quant_bits
    from abricot_local.models.quant_types import UNQUANTIZED

    asked = list(dict.fromkeys(q.upper() for q in quants))
    files = [s for s in family if _gguf(s)]
    if not files or not set(asked) <= set(FILE_TYPES.values()):
        return ""
    source = files[highest_precision([Precision(s.quant, None, (s.name,)) for s in files])]
    source = given if given in files and given.quant.upper() == source.quant.upper() else source
    quant = source.quant.upper()
    above = [q for q in asked if quant_bits(q) > quant_bits(quant) >= 0]  # (a quant name not sized: none known)
    rungs = [q for q in asked if q not in above]
    have = {s.quant.upper() for s in family}
    said = ""
    if above:
        said = (f"; {', '.join(above)} {'is' if len(above) == 1 else 'are'} above {quant}, the highest precision "
                f"the registry has of {source.base}: made from {source.name}, {'it' if len(above) == 1 else 'each'} "
                f"would be its {quant} in disguise (no more than its weights hold); a higher quant needs a "
                f"higher-precision source (an F16, BF16 or F32 GGUF of the model, or a higher quant: add its entry "
                f"to your models.toml with `base = \"{source.base}\"` and its `quant`)")
    if not set(rungs) - have:  # every quant asked for at or below the source's is there: nothing to make
        return said
    made = _made_from(source, registry)
    if made is not None:
        return _add_rungs(made, [q for q in rungs if q not in have]) + said
    requantize = quant not in UNQUANTIZED
    line = command("quantize", source.name, to=",".join(rungs), models=_models_file(source),
                   allow_requantize=requantize)
    make = f"; make {'its rungs up to ' + quant if above else 'this ladder'} here with `{line}`"
    if not requantize:
        return f"{make}, which prints the command that runs its rungs (docs/compare.md#making-the-rungs-quantize){said}"
    return (f"{make} ({source.name} is a {quant}: every rung is made from it dequantized to F16, the ladder's "
            "reference, not from the original weights), which prints the command that runs its rungs "
            f"(docs/compare.md#making-the-rungs-quantize){said}")


@dataclass(frozen=True)
class _Made:
    """A ladder `quantize` wrote, as its models.toml records it."""

    sha256: str  # its rungs' `from_sha256`: the SOURCE's
    folder: str  # the folder of its models.toml, as the user named that file
    source: ModelSpec | None  # the registry entry of that file that quantize, given it, files under ``base``
    requantized: str  # the SOURCE's quant where the ladder's base says it was requantized, else ""


def _made_from(top: ModelSpec, registry: dict[str, ModelSpec]) -> _Made | None:
    """The ladder of ``top`` (the family's highest-precision file) where `quantize` wrote it: ``top`` a rung (its
    ``from_sha256``) listed in the models.toml quantize keeps in its folder; None for an entry written by hand. Its
    SOURCE: the registry entry of the file of that SHA-256 (its ``sha256``) whose alias, given to quantize, names
    the rungs by ``top``'s ``base`` (models.quantize: the alias less its quant tag, then ``-<quant>-dequantized``
    for a quantized SOURCE, then the SHA-256's first digits where another SOURCE's rungs took the name); None where
    the registry has none. Requantized: where the base says so, as quantize writes it."""
    from abricot_local.gguf.file import strip_quant
    from abricot_local.models import quant_folder

    if not top.from_sha256 or not top.origin or Path(top.origin).name != quant_folder.FRAGMENT:
        return None
    folder = Path(top.origin).parent
    try:
        listed = quant_folder.read_entries(folder.expanduser())  # refused: not quantize's own models.toml
    except (UsageError, OSError):
        return None
    if top.name not in listed:
        return None
    sha, base = top.from_sha256, top.base.lower()
    tail = r"(-([a-z0-9_]+)-dequantized)?(-[0-9a-f]{8,64})?"
    source, shape = None, re.fullmatch(r".*?" + tail, base)
    for spec in sorted(registry.values(), key=lambda s: s.name):
        if spec.sha256[:1] == (sha,) and not spec.from_sha256 and _gguf(spec):
            fits = re.fullmatch(re.escape(strip_quant(spec.name).lower()) + tail, base)
            if fits is not None:
                source, shape = spec, fits
                break
    requantized = shape.group(2).upper() if shape is not None and shape.group(2) else ""
    return _Made(sha, str(folder), source, requantized)


def _add_rungs(made: _Made, missing: Sequence[str]) -> str:
    """The advice that adds the ``missing`` quants to the ladder quantize wrote (:func:`_made_from`), as a command
    that does so run as printed: its SOURCE again (else a placeholder, the file said by its SHA-256), only the
    missing quants, its own folder (quantize gives them its ``base``: the same SOURCE there), and a quantized
    SOURCE's requantizing (each new rung made from the ladder's F16 rung, as the others were)."""
    from abricot_local.errors import command

    src = made.source
    line = command("quantize", src.name if src is not None else "SOURCE", to=",".join(missing), out=made.folder,
                   models=_models_file(src) if src is not None else None, allow_requantize=bool(made.requantized))
    what = "its SOURCE again" if src is not None else (
        f"SOURCE: the file its rungs were made from, SHA-256 {made.sha256[:12]}... as its models.toml's `from_sha256` "
        "says, named as it was then (no registry entry here names that file)")
    how = (f": each new rung is made from its F16 rung, the {made.requantized} dequantized, as the others were"
           if made.requantized else "")
    return (f"; add {', '.join(missing)} to this ladder with `{line}` ({what}, into its folder{how}), which prints "
            "the command that runs its rungs (docs/compare.md#making-the-rungs-quantize)")


def _gguf(spec: ModelSpec) -> bool:
    """Whether registry entry ``spec`` names a GGUF file (quantize's SOURCE): not a synthetic one (no file), nor a
    plugin backend's file of its own format."""
    from abricot_local.models.sources import source_of

    return source_of(spec).has_file and spec.file.lower().endswith(".gguf")


def _models_file(spec: ModelSpec) -> str | None:
    """The --models file that names ``spec`` (as the user gave it); None for an entry of the shipped registry or
    of the default user file (every command reads those)."""
    from abricot_local.models.registry import default_user_file, packaged_file

    if not spec.origin:
        return None
    here = Path(spec.origin).expanduser()
    try:
        read_always = any(here.resolve() == f.resolve() for f in (packaged_file(), default_user_file()))
    except OSError:
        read_always = False
    return None if read_always else spec.origin


def files_advice(model: str, quants: Sequence[str]) -> str:
    """The refusal of a model file given with the quants of a registry model, saying how its ladder is made: each
    file given as a MODEL (a sweep; report draws their ladder, their runs grouped by their names less the quant
    tag), the file given and the files of the quants asked for beside it listed where each is there (the file
    given and one rung: a ladder of two). Only for a .gguf file here (a path, or a file name in llama.cpp's cache);
    a path to no file: said missing; "" for anything else (a store's reference, ``hf:...``: the plain refusal)."""
    from abricot_local.errors import Call, call
    from abricot_local.gguf.file import quant_of, strip_quant
    from abricot_local.models import stores

    if stores.prefix_of(model):
        return ""
    path, named = Path(model).expanduser(), model.lower().endswith(".gguf")
    if named and not path.exists() and "/" not in model and "\\" not in model:  # run finds a bare file name in
        hit = stores.find_by_file_name(model)  # llama.cpp's cache too
        path = hit.path if hit is not None else path
    if named and not path.exists():
        return (f"{opt('quants')}: there is no file {model} here, and it is neither a registry alias nor a registry "
                f"`base` (models.toml): {opt('quants')} names quants of a registry model (`abricot-local models` "
                "lists them)")
    if not path.is_file() or path.suffix.lower() != ".gguf":
        return ""
    stem, found = strip_quant(path.name.removesuffix(path.suffix)).lower(), {}
    try:
        beside = sorted(path.parent.glob("*.gguf")) if path.parent.is_dir() else []
    except OSError:
        beside = []
    own = quant_of(path.name)
    found[own] = path  # the file given is its own quant's rung
    for f in beside:
        if strip_quant(f.name.removesuffix(f.suffix)).lower() == stem:
            found.setdefault(quant_of(f.name), f)
    wanted = list(dict.fromkeys(q.upper() for q in quants))
    ladder = wanted if own in wanted else [own, *wanted]  # the file given, and the rungs asked for beside it
    files = [str(path.parent / found[q].name) for q in ladder if q in found]
    missing = [q for q in wanted if q not in found]
    known = len(files) > 1 and not missing
    run = Call("run", tuple(files)) if known else Call("run", ("FILE", "FILE", "..."), placeholders=True)
    said = f"; no {', '.join(missing)} file of that name is beside it" if missing else ""
    return (f"{opt('quants')} names quants of a registry model (an alias or a `base`, models.toml), and {model} is a "
            f"model file: to run files as a ladder, give each as a MODEL, without {opt('quants')} "
            f"(`{call(run)}`, with your other options): they run one after another, and `report` "
            "draws their ladder where their file names differ only in the quant "
            f"(docs/compare.md#a-quant-ladder-run---quants-and-report){said}{_named_beside(path, ladder)}")


def _named_beside(path: Path, quants: Sequence[str]) -> str:
    """Where `quantize` wrote the model file ``path``, the ladder as its models.toml beside it names it: the
    `run --quants` command of ``quants`` with that file; "" where no models.toml of quantize's lists the file."""
    from abricot_local.errors import Call, call
    from abricot_local.models import quant_folder

    try:
        entries = quant_folder.read_entries(path.parent)
    except (UsageError, OSError):  # not quantize's models.toml: not read as a ladder's
        return ""
    alias = next((a for a, t in entries.items() if t.get("path") == path.name and t.get("base")), None)
    if alias is None:
        return ""
    made = Call("run", (alias,), (("quants", "quants", list(quants)),
                                  ("models_file", "models", str(path.parent / quant_folder.FRAGMENT))))
    return (f"; or by the names quantize gave them, the ladder {entries[alias]['base']} of the {quant_folder.FRAGMENT} "
            f"it wrote beside the file (`{call(made)}`, with your other options)")
