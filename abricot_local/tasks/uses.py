"""Which task options a task uses, declared by the task (``Task.uses``, ``Task.prompt_variants``).

``--shots`` and ``--prompt-variant`` mean something only to a task that reads them. A task
built by :func:`abricot_local.tasks.make_task` gets the ones it does not declare at their
defaults (so a recorded run rebuilds the task it ran), and a value given that it does not use
is named: refused when no task of the run uses it (:func:`refuse_unused`), otherwise a note in
that task's warnings, recorded with the run (``Task.option_notes``). No task is named here.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from abricot_local.errors import UsageError

# the options a task receives only when it declares it uses them
DECLARED = ("shots", "prompt_variant", "protocol", "shot_sampler")


def _defaults() -> dict[str, Any]:
    from abricot_local.tasks.base import TaskOptions

    return {f.name: f.default for f in fields(TaskOptions) if f.name in DECLARED}


def flag(name: str, value: Any) -> str:
    return f"--{name.replace('_', '-')} {value}"


def given(options) -> dict[str, Any]:
    """The declared options set to something other than their default."""
    defaults = _defaults()
    return {n: getattr(options, n) for n in DECLARED if getattr(options, n) != defaults[n]}


def unused_by(cls, options) -> list[tuple[str, str]]:
    """(flag, why) for each option given that the task class ``cls`` does not use."""
    out = []
    for name, value in given(options).items():
        if name not in cls.uses:
            out.append((flag(name, value), f"{cls.name} uses no {name.replace('_', ' ')}"))
        elif name == "prompt_variant" and cls.prompt_variants and value not in cls.prompt_variants:
            out.append((flag(name, value), f"{cls.name}'s prompt variants are {', '.join(cls.prompt_variants)}"))
    return out


def for_task(cls, options):
    """The options ``cls`` is built with: each declared option it does not use at its default,
    a prompt variant it does not have replaced by its default."""
    defaults = _defaults()
    changes = {n: defaults[n] for n in DECLARED if n not in cls.uses and getattr(options, n) != defaults[n]}
    if "prompt_variant" in cls.uses and cls.prompt_variants and options.prompt_variant is not None \
            and options.prompt_variant not in cls.prompt_variants:
        changes["prompt_variant"] = cls.prompt_variants[0]  # the task's default
    return replace(options, **changes) if changes else options


def notes(cls, options) -> tuple[str, ...]:
    """The warnings a task records for the options given that it does not use."""
    return tuple(f"{f} does not apply to {cls.name} ({why}): not used" for f, why in unused_by(cls, options))


def refuse_unused(classes, options) -> None:
    """:class:`UsageError` for an option given that no task of the run uses."""
    per = [dict(unused_by(cls, options)) for cls in classes]
    for name, value in given(options).items():
        f = flag(name, value)
        if per and all(f in p for p in per):
            why = "; ".join(dict.fromkeys(p[f] for p in per))
            raise UsageError(f"{f} is used by no task of this run ({why}): leave it out")
