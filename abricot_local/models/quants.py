"""A model's quant ladder from the registry: ``run MODEL --quants Q4_K_M,Q5_K_M,Q8_0``.

The registry knows which entries are quants of one model: they share ``base`` (models.toml)
and each names its ``quant``. :func:`ladder` turns a model (an alias, or a ``base`` itself) and
the quants asked for, spelled as the registry spells them (any case), into the aliases to run,
in the order asked; a quant the registry lacks for that model is refused with the ones it has.

Quants of one model share its architecture and vocabulary: a ladder whose members differ in
either is not one model's, and is refused (:func:`same_model` for the registry's files before a
run: their GGUF headers, and ``from_sha256`` where quantize wrote them; :func:`refuse_mixed` for
finished runs grouped by ``base``, from what their records say, for the report's and compare's
ladders). An entry's ``quant`` is checked against its file's own header where the file is here
(models/labelled.py), before a ladder is picked by it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from abricot_local.errors import ModelError, UsageError, opt
from abricot_local.models.labelled import contradicted, require_labelled, same
from abricot_local.models.quant_advice import files_advice, quantize_advice
from abricot_local.models.registry import ModelSpec, find

if TYPE_CHECKING:
    from abricot_local.gguf.file import Precision


def parse_quants(text: str) -> tuple[str, ...]:
    """``Q4_K_M,Q8_0`` as a tuple (each once, in order); an empty list is refused."""
    out = tuple(dict.fromkeys(q.strip() for q in text.split(",") if q.strip()))
    if not out:
        raise UsageError(f"{opt('quants')} needs quant names, comma-separated, as the registry spells them (e.g. "
                         "Q4_K_M,Q8_0)")
    return out


def _family(model: str, registry: dict[str, ModelSpec], quants: Sequence[str] = ()
            ) -> tuple[str, ModelSpec | None, list[ModelSpec]]:
    """The base, the entry named (None when ``model`` is a base name) and every entry of the base with a quant.
    A ``model`` that is neither is refused (a model file: with how to run the files of ``quants``,
    :func:`models.quant_advice.files_advice`)."""
    given = find(model, registry)
    if given is not None:
        base = given.base
        if not base:
            raise UsageError(f"{opt('quants')}: the registry entry {given.name} names no `base` (models.toml), so no other "
                             "quant of it is known; give the aliases to run, or add `base` to your models.toml entries")
    else:
        base = next((s.base for s in registry.values() if s.base and s.base.lower() == model.lower()), "")
        if not base:
            raise UsageError(files_advice(model, quants) or f"{opt('quants')}: {model} is neither a registry alias "
                             "nor a registry `base` (models.toml); `abricot-local models` lists them")
    return base, given, [s for s in registry.values() if s.base.lower() == base.lower() and s.quant]


def _file_key(spec: ModelSpec) -> tuple:
    """What makes two entries the same file (an alias with ``same_as``); a synthetic entry is its own."""
    if spec.files or spec.path:
        return spec.source, spec.repo, spec.files, spec.path, spec.package
    return (spec.name,)


def ladder(model: str, quants: Sequence[str], registry: dict[str, ModelSpec]) -> tuple[str, ...]:
    """The registry aliases of ``model``'s quants ``quants``: the entry named when it is one of them,
    else one of the same repository, else the only file of that quant (several files: refused,
    naming their aliases)."""
    base, given, family = _family(model, registry, quants)
    have = list(dict.fromkeys(s.quant for s in family))
    out = []
    for q in quants:
        cands = [s for s in family if s.quant.lower() == q.lower()]
        if not cands:  # a file here of that quant labelled another is the answer: its entry's `quant` is wrong
            require_labelled([s for s in family if same(contradicted(s), q)])
            raise UsageError(f"{opt('quants')}: the registry has no {q} of {base}; it has {', '.join(have) or 'no quant'} "
                             f"(models.toml `base = \"{base}\"`)" + quantize_advice(given, family, quants, registry))
        if given is not None and given in cands:
            out.append(given.name)
            continue
        same_repo = [s for s in cands if given is not None and given.repo and s.repo == given.repo]
        cands = same_repo or cands
        files = list(dict.fromkeys(_file_key(s) for s in cands))
        if len(files) > 1:  # one of them mislabelled: named, as the alias could not be given inside --quants
            require_labelled(cands)
            raise UsageError(f"{opt('quants')}: the registry has {len(files)} {cands[0].quant} files of {base} "
                             f"({', '.join(s.name for s in cands)}); give the alias of the one to run")
        out.append(cands[0].name)
    out = list(dict.fromkeys(out))
    same_model(base, [registry[a] for a in out])
    require_labelled([registry[a] for a in out])  # before the sweep runs its first rung
    return tuple(out)


def reference(models: Sequence[str], registry: dict[str, ModelSpec]) -> str:
    """A ladder's reference (a --until-settled sweep's, run/settle_sweep.py): its highest-precision quant by the
    rule compare's equivalence verdict and the report's ladder take (gguf.file.by_precision, one scale for the
    set): the quants ``registry`` names, sized by their names (a name that is no registry quant, the lowest), or,
    where a name is not sized, each file's real bits per weight where every file is here (its header's tensors,
    as the run will record them); a tie, the alias first in alphabetical order."""
    from abricot_local.gguf.file import Precision, bits_per_weight, highest_precision
    from abricot_local.models.ref import local_file

    def precision(alias: str) -> Precision:
        spec = find(alias, registry)
        if spec is None:
            return Precision("", None, (alias,))
        path, bits = local_file(spec), None
        if path is not None:
            try:
                bits = bits_per_weight(path)
            except ModelError:  # a damaged file is said when it is opened
                pass
        return Precision(spec.quant or "", bits, (alias,))

    return models[highest_precision([precision(m) for m in models])]


def precision_of(run) -> "Precision":
    """A finished run's place in the order of precision (gguf.file.Precision): its quant, its model file's bits
    per weight as its record says (``model.bits_per_weight``; an older run without it: None, the name rule) and
    its label and folder for a tie. ``run``: an analysis.runs.Run, or anything with ``label``, ``path`` and a
    quant (``quant``, else a ``settings`` mapping's ``quant``) and perhaps a ``record``."""
    from abricot_local.gguf.file import Precision

    quant = getattr(run, "quant", None)
    if quant is None:
        settings = getattr(run, "settings", None)
        quant = settings.get("quant", "") if settings is not None else ""
    record = getattr(run, "record", None)
    model = getattr(record, "model", None)
    bits = getattr(model, "bits_per_weight", None)
    return Precision(str(quant or "").upper(), bits if isinstance(bits, (int, float)) else None,
                     (str(getattr(run, "label", "")), str(getattr(run, "path", ""))))


def same_model(base: str, specs: Sequence[ModelSpec]) -> None:
    """Refuse registry entries given as quants of ``base`` that are not one model's: made by quantize
    from different files (``from_sha256``), or whose files here differ in architecture or vocabulary
    (files not here yet are not read: nothing is downloaded)."""
    made = {s.from_sha256 for s in specs if s.from_sha256}
    if len(made) > 1:
        listed = "; ".join(f"{s.name}: {'from ' + s.from_sha256[:12] if s.from_sha256 else 'not recorded'}" for s in specs)
        raise UsageError(f"the quants of {base} were made from different files ({listed}): they are not one model's "
                         "ladder; give each its own `base` in models.toml")
    from abricot_local.gguf.file import identity
    from abricot_local.models.ref import local_file

    found = []
    for s in specs:
        path = local_file(s)
        if path is not None:
            try:
                found.append((s.name, identity(path)))
            except ModelError:  # a damaged file is said when it is opened
                continue
    for name, ident in found[1:]:
        what = ident.differs(found[0][1])
        if what:
            raise UsageError(f"the quants of {base} differ in {what} ({found[0][0]}: {found[0][1].describe()}; {name}: "
                             f"{ident.describe()}): they are not one model's ladder; give each its own `base` in "
                             "models.toml")


def refuse_mixed(base: str, runs: Sequence[tuple[str, object]]) -> None:
    """Refuse finished runs given as quants of ``base`` (a ladder: report, compare) that :func:`mixed` tells apart."""
    if what := mixed(runs):
        raise UsageError(f"the runs of {base} differ in {what}: they are not one model's quants, and no ladder is "
                         "drawn of them; give each model its own `base` in models.toml")


def mixed(runs: Sequence[tuple[str, object]]) -> str:
    """What finished runs' models differ in as their records say, with each one's (``architecture (A: llama; B:
    gemma3)``), "" for nothing: quants of one model share the architecture and the vocabulary size (also kld's rule).
    ``runs``: (label, a record.Record or the run's folder); a folder without results.json (lm-eval's) is passed over."""
    from abricot_local.record import RESULTS, read_run

    seen: list[tuple[str, str | None, int | None]] = []
    for label, rec in runs:
        if isinstance(rec, (str, Path)):
            if not (Path(rec) / RESULTS).is_file():
                continue
            rec = read_run(Path(rec))
        p = rec.provenance
        if p is None:  # a record that says nothing of its model
            continue
        seen.append((label, architecture(rec), p.n_vocab))
    for k, what in ((1, "architecture"), (2, "vocabulary size")):
        known = [x for x in seen if x[k] is not None]
        if len({x[k] for x in known}) > 1:
            return f"{what} ({'; '.join(f'{x[0]}: {x[k]}' for x in known)})"
    return ""


def architecture(rec) -> str | None:
    """A finished run's model architecture (GGUF ``general.architecture``), whatever backend scored it: its record's
    ``model.architecture``, else the GGUF header of the file it records when that file is here (of the size
    recorded), else an older record's ``provenance.architecture`` (a backend's own key); None: not known."""
    model = getattr(rec, "model", None)
    arch = getattr(model, "architecture", None)
    if isinstance(arch, str) and arch:
        return arch
    path = Path(model.path) if model is not None and model.path else None
    if path is not None and path.is_file() and (model.size is None or path.stat().st_size == model.size):
        from abricot_local.gguf.file import headers

        try:
            arch = headers(path)[0].metadata.get("general.architecture")
        except (ModelError, OSError):  # not a GGUF (a plugin backend's own format), or unreadable: not known here
            arch = None
        if isinstance(arch, str) and arch:
            return arch
    arch = rec.provenance.extra.get("architecture") if rec.provenance is not None else None
    return arch if isinstance(arch, str) and arch else None


def expand(models: Sequence[str], quants: str, registry: dict[str, ModelSpec]) -> tuple[str, ...]:
    """`run MODEL --quants ...`: the one MODEL replaced by its quants' aliases in ``registry``."""
    if len(models) != 1:
        raise UsageError(f"{opt('quants')} takes one MODEL (its quants are run), got {len(models)}: {', '.join(models)}")
    return ladder(models[0], parse_quants(quants), registry)
