"""An entry's ``quant`` held to its file: the GGUF header's ``general.file_type`` is the one truth, read without
loading the model. A models.toml entry whose ``quant`` its file contradicts is refused where the file is first
known here (models.locate: a file on this machine; models.ref: one just downloaded; models.quants: the rungs a
``--quants`` ladder picks by their quant), naming the line to fix: else a run would show it, and a sweep pick and
order its rungs, by a quant the file is not."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from abricot_local.errors import ModelError, UsageError
from abricot_local.gguf.file import declared_quant, file_type_name, same_quant
from abricot_local.models.spec import ModelSpec
from abricot_local.models.sources import source_of


def same(a: str, b: str) -> bool:
    """Whether quant names ``a`` (non-empty) and ``b`` are one file type (``Q4_K`` is ``Q4_K_M``'s)."""
    return bool(a) and same_quant(a, b)


def contradicted(spec: ModelSpec, path: Path | None = None) -> str:
    """The quant the file of registry entry ``spec`` declares (its GGUF header's ``general.file_type``: the one
    truth, read without loading the model) where it contradicts the entry's ``quant``; "" where it does not, or
    cannot be told: no ``quant``, one that is no llama.cpp file type (a label of the user's own), no file here
    (``path``, else the entry's file on this machine), a file that is no GGUF or is damaged (said when it is
    opened), a header that declares no file type or one with no quant name."""
    return _declared(spec, path)[0]


def _declared(spec: ModelSpec, path: Path | None) -> tuple[str, Path | None]:
    """:func:`contradicted`'s quant, and the file read."""
    if not spec.quant or not file_type_name(spec.quant):
        return "", None
    path = path if path is not None else source_of(spec).local_file(spec)
    if path is None:
        return "", None
    try:
        declared = declared_quant(path)
    except ModelError:
        return "", path
    return ("" if not declared or same_quant(declared, spec.quant) else declared), path


def require_labelled(specs: Sequence[ModelSpec], path: Path | None = None) -> None:
    """Refuse registry entries whose ``quant`` their file contradicts (:func:`contradicted`; ``path``: the file
    of a single entry, found already), naming each, the file's own quant and the models file line to fix: else a
    run would show it, and a sweep pick and order its rungs, by a quant the file is not."""
    wrong = []
    for spec in specs:
        declared, file = _declared(spec, path)
        if declared:
            wrong.append(f"[{spec.name}] in {spec.origin or 'your models.toml'} says quant = \"{spec.quant}\", but its "
                         f"file {file} is {declared} (its GGUF header's general.file_type); fix that `quant` line "
                         f"(quant = \"{declared}\"), or its `path` if it names another file")
    if wrong:
        raise UsageError("a models.toml `quant` contradicts its file: " + "; ".join(wrong))
