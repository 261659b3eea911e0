"""Which task options a task uses, declared by the task (``Task.uses``, ``Task.prompt_variants``).

``--shots`` and ``--prompt-variant`` mean something only to a task that reads them. A task
built by :func:`abricot_local.tasks.make_task` gets the ones it does not declare at their
defaults (so a recorded run rebuilds the task it ran), and a value given that it does not use
is named: refused when no task of the run uses it (:func:`refuse_unused`), otherwise a note in
that task's warnings, recorded with the run (``Task.option_notes``). No task is named here.
An option only shots read (:data:`WITH_SHOTS`: ``--shot-sampler``, ``--shot-seed``) is used by a task that declares it only
where it draws shots (:func:`draws_shots`): not by a 0-shot one (DISCOTEX by default, ``--shots 0``, a
protocol of 0 shots). It still reaches such a task as given, so a run recorded with it rebuilds as it ran.

``--prompt-variant all`` (or a comma-separated list, :func:`several`) asks for several wordings
in one run: planning.instances builds one instance per variant, keyed ``task[@protocol]~variant``
(the instance's default variant keeps the plain key); :func:`variants_for` is what a task takes of
the list, :func:`refuse_unknown_variants` refuses a name no task of the run declares.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from abricot_local.errors import UsageError, opt
from abricot_local.tasks.options import ALL, names, normal  # noqa: F401  (a prompt-variant value, parsed once)

def declared() -> tuple[str, ...]:
    """The options a task receives only when it declares it uses them (TaskOptions' ``per_task`` fields)."""
    from abricot_local.option_fields import specs
    from abricot_local.tasks.options import TaskOptions

    return tuple(s.name for s in specs(TaskOptions) if s.per_task)


def _defaults() -> dict[str, Any]:
    from abricot_local.tasks.options import TaskOptions

    names = declared()
    return {f.name: f.default for f in fields(TaskOptions) if f.name in names}


def flag(name: str, value: Any) -> str:
    """The option given, as a message names it (each door writes it its own way)."""
    return opt(name, ",".join(value) if isinstance(value, tuple) else value)


def given(options) -> dict[str, Any]:
    """The declared options set to something other than their default."""
    defaults = _defaults()
    return {n: getattr(options, n) for n in defaults if getattr(options, n) != defaults[n]}


# the options a task that declares them uses only where it draws shots (ABRICOT's sampler draws none at 0 shots)
WITH_SHOTS = ("shot_sampler", "shot_seed")


def _protocols_under(cls, options) -> list:
    """The protocols of ``cls`` its instances run under: those --protocol names (one, several, all), else its first."""
    got = names(options.protocol)
    if not got:
        return list(cls.protocols[:1])
    return [p for p in cls.protocols if got == (ALL,) or p.name in got]


def draws_shots(cls, options) -> bool:
    """Whether task class ``cls`` built with ``options`` draws any shots (no data read): --shots, else the shots
    of a protocol it runs under (:func:`_protocols_under`, any of several) where it fixes them, else the
    task's ``default_shots``."""
    if options.shots is not None:
        return options.shots > 0
    under = _protocols_under(cls, options)
    return any(p.value("shots", cls.default_shots) > 0 for p in under) if under else cls.default_shots > 0


def _no_shots(cls, options) -> str:
    """Why ``cls`` draws no shots under ``options`` (:func:`draws_shots` false), as a refusal says it."""
    if options.shots is not None:
        return f"{cls.name} draws no shots at {opt('shots', options.shots)}"
    under = _protocols_under(cls, options)
    if any(p.fixes("shots") for p in under):
        return f"{cls.name} draws no shots under protocol {', '.join(p.name for p in under)}"
    return f"{cls.name} draws no shots unless {opt('shots')} is given"


def unused_by(cls, options) -> list[tuple[str, str]]:
    """(flag, why) for each option given that the task class ``cls`` does not use (one of :data:`WITH_SHOTS`:
    where it draws no shots)."""
    out = []
    for name, value in given(options).items():
        if name not in cls.uses:
            out.append((flag(name, value), f"{cls.name} uses no {name.replace('_', ' ')}"))
        elif name in WITH_SHOTS and not draws_shots(cls, options):
            out.append((flag(name, value), _no_shots(cls, options)))
        elif name == "prompt_variant" and cls.prompt_variants and not variants_for(cls, value):
            out.append((flag(name, value), f"{cls.name}'s prompt variants are {', '.join(cls.prompt_variants)}"))
    return out


def for_task(cls, options):
    """The options ``cls`` is built with: each declared option it does not use at its default,
    a prompt variant it does not have left out (None: the task resolves its own, its protocol's
    wording, else its first; not the task's first over its protocol's)."""
    defaults = _defaults()
    changes = {n: defaults[n] for n in defaults if n not in cls.uses and getattr(options, n) != defaults[n]}
    if several(options.prompt_variant):  # each instance's own is set by make_task (its key's, else the default)
        changes["prompt_variant"] = None
    elif "prompt_variant" in cls.uses and cls.prompt_variants and options.prompt_variant is not None \
            and options.prompt_variant[0] not in cls.prompt_variants:
        changes["prompt_variant"] = None  # not used: the wording the task resolves without it
    if several(options.protocol):  # --protocol paper,calamita: each instance's own is set by planning.instances
        changes["protocol"] = None
    return replace(options, **changes) if changes else options


def notes(cls, options) -> tuple[str, ...]:
    """The warnings a task records for the options given that it does not use (their options unrendered:
    errors.opt; the record writes them in its words, each door in its own)."""
    return tuple(f"{f} does not apply to {cls.name} ({why}): not used" for f, why in unused_by(cls, options))


def refuse_unused(classes, options) -> None:
    """:class:`UsageError` for an option given that no task of the run uses."""
    per = [dict(unused_by(cls, options)) for cls in classes]
    for name, value in given(options).items():
        f = flag(name, value)
        if per and all(f in p for p in per):
            why = "; ".join(dict.fromkeys(p[f] for p in per))
            raise UsageError(f"{f} is used by no task of this run ({why}): leave it out")


# -- several prompt variants in one run ---------------------------------------------------------
def several(spec) -> bool:
    """Whether a prompt-variant (or protocol) value asks for several (``all``, or a list)."""
    got = names(spec)
    return len(got) > 1 or got == (ALL,)


def variants_for(cls, spec: str | None) -> tuple[str, ...]:
    """The variants of task class ``cls`` a --prompt-variant value names, in the order given
    (``all``: every one it declares, the default first); () when it names none of them."""
    if "prompt_variant" not in cls.uses or not cls.prompt_variants:
        return ()
    got = names(spec)
    if got == (ALL,):
        return tuple(cls.prompt_variants)
    return tuple(n for n in got if n in cls.prompt_variants)


def refuse_unknown_variants(classes, spec: str | None) -> None:
    """:class:`UsageError` for a name in a list of variants that no task of the run declares,
    naming each task's variants."""
    if not several(spec) or names(spec) == (ALL,):
        return
    known = [c for c in classes if "prompt_variant" in c.uses and c.prompt_variants]
    for n in names(spec):
        if not any(n in c.prompt_variants for c in known):
            theirs = "; ".join(f"{c.name}'s are {', '.join(c.prompt_variants)}" for c in known) or \
                "no task of this run has prompt variants"
            raise UsageError(f"{flag('prompt_variant', spec)}: no task of this run has a prompt variant {n!r} ({theirs})")


# -- several protocols in one run ---------------------------------------------------------------
def protocols_for(cls, spec: str | None) -> tuple[str, ...]:
    """The protocols of task class ``cls`` a --protocol list (or ``all``) names, in the task's order."""
    got = names(spec)
    return tuple(p.name for p in cls.protocols if got == (ALL,) or p.name in got)


def refuse_unknown_protocols(classes, spec: str | None) -> None:
    """:class:`UsageError` for a --protocol list naming a protocol no task of the run has (or ``all`` in a
    list), naming each task's protocols."""
    if not several(spec):
        return
    got = names(spec)
    if ALL in (n.lower() for n in got) and got != (ALL,):
        raise UsageError(f"{opt('protocol', spec)}: `all` already names every protocol; give it alone")
    known = [c for c in classes if c.protocols]
    for n in got if got != (ALL,) else ():
        if not any(p.name == n for c in known for p in c.protocols):
            theirs = "; ".join(f"{c.name}'s are {', '.join(p.name for p in c.protocols)}" for c in known) or \
                "no task of this run has protocols"
            raise UsageError(f"{opt('protocol', spec)}: no task of this run has a protocol {n!r} ({theirs})")
