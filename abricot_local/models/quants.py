"""A model's quant ladder from the registry: ``run MODEL --quants Q4_K_M,Q5_K_M,Q8_0``.

The registry knows which entries are quants of one model: they share ``base`` (models.toml)
and each names its ``quant``. :func:`ladder` turns a model (an alias, or a ``base`` itself) and
the quants asked for, spelled as the registry spells them (any case), into the aliases to run,
in the order asked; a quant the registry lacks for that model is refused with the ones it has.
"""

from __future__ import annotations

from typing import Sequence

from abricot_local.errors import UnknownModelError, UsageError
from abricot_local.models.registry import ModelSpec, load_registry, lookup


def parse_quants(text: str) -> tuple[str, ...]:
    """``Q4_K_M,Q8_0`` as a tuple (each once, in order); an empty list is refused."""
    out = tuple(dict.fromkeys(q.strip() for q in text.split(",") if q.strip()))
    if not out:
        raise UsageError("--quants needs quant names, comma-separated, as the registry spells them (e.g. Q4_K_M,Q8_0)")
    return out


def _family(model: str, registry: dict[str, ModelSpec]) -> tuple[str, ModelSpec | None, list[ModelSpec]]:
    """The base, the entry named (None when ``model`` is a base name) and every entry of the base with a quant."""
    try:
        given: ModelSpec | None = lookup(model, registry)
        base = given.base
        if not base:
            raise UsageError(f"--quants: the registry entry {given.name} names no `base` (models.toml), so no other "
                             "quant of it is known; give the aliases to run, or add `base` to your models.toml entries")
    except UnknownModelError:
        given = None
        base = next((s.base for s in registry.values() if s.base and s.base.lower() == model.lower()), "")
        if not base:
            raise UsageError(f"--quants: {model} is neither a registry alias nor a registry `base` (models.toml); "
                             "`abricot-local models` lists them") from None
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
    base, given, family = _family(model, registry)
    have = list(dict.fromkeys(s.quant for s in family))
    out = []
    for q in quants:
        cands = [s for s in family if s.quant.lower() == q.lower()]
        if not cands:
            raise UsageError(f"--quants: the registry has no {q} of {base}; it has {', '.join(have) or 'no quant'} "
                             f"(models.toml `base = \"{base}\"`)")
        if given is not None and given in cands:
            out.append(given.name)
            continue
        same_repo = [s for s in cands if given is not None and given.repo and s.repo == given.repo]
        cands = same_repo or cands
        files = list(dict.fromkeys(_file_key(s) for s in cands))
        if len(files) > 1:
            raise UsageError(f"--quants: the registry has {len(files)} {cands[0].quant} files of {base} "
                             f"({', '.join(s.name for s in cands)}); give the alias of the one to run")
        out.append(cands[0].name)
    return tuple(dict.fromkeys(out))


def expand(models: Sequence[str], quants: str, models_file: str | None) -> tuple[str, ...]:
    """`run MODEL --quants ...`: the one MODEL replaced by its quants' aliases."""
    if len(models) != 1:
        raise UsageError(f"--quants takes one MODEL (its quants are run), got {len(models)}: {', '.join(models)}")
    return ladder(models[0], parse_quants(quants), load_registry(models_file))
