"""What a backend declares, checked when it loads (as tasks/contract.py checks a task), so that a plugin's slip is
refused by name at once rather than met as an AttributeError in the middle of a run:

- its options (when the registry is read, :func:`clash`): each option declared as every backend before it declares
  an option of that name (what checking a value reads of it: :data:`CHECKED`), else the later backend is refused,
  named with the other one and the option: the command line and lm-eval's model_args check one declaration;
- its class (when it is asked for, :func:`checked_class`): every member of ``base.BackendClass`` and
  ``base.Backend`` (:data:`CLASS_MEMBERS`, :data:`INSTANCE_MEMBERS`, and per capability :data:`BY_CAPABILITY`),
  its ``Options`` the options class its registration names, and no ``reads_model_file`` or ``build_keys`` set
  in its own body that contradicts its registration (which declares them: ``backends.Registered``, read without
  loading the backend; its ``build_keys`` a tuple of provenance keys, checked as the registry is read);
- its session (when the backend opens, before any item is scored, :func:`check_session`): a backend that scores
  through an engine holds it as ``engine``, and that engine's session has every member of ``session.Session``
  the engines use (``session.missing``).

Each refusal is a :class:`BackendError` naming the backend and its class.
"""

from __future__ import annotations

import functools

from abricot_local.backends.base import GENERATE, ROLLING, SCORE, Declared
from abricot_local.backends.session import missing
from abricot_local.errors import UsageError
from abricot_local.option_fields import Spec

CAPABILITIES = (SCORE, ROLLING, GENERATE)
# What checking a value reads of an option's declaration: two backends' declarations of one option agree on these
CHECKED = ("kind", "many", "optional", "choices", "min", "max", "parse", "sep", "repeat", "path", "flag", "internal",
           "declared_choices")
CLASS_MEMBERS = ("name", "Options", "capabilities", "config", "preflight", "speed_settings", "watch_remote",
                 "kernel_threads")
INSTANCE_MEMBERS = ("score", "score_many", "batch_size", "schedule", "piece", "render_chat", "provenance",
                    "start_facts", "counters", "n_ctx", "close")
BY_CAPABILITY = {ROLLING: ("tokenize", "prefix_token", "score_tokens"), GENERATE: ("generate",)}
FIX = "fix the backend's package (or upgrade it, or uninstall it); ARCHITECTURE.md, \"Add a backend\", lists what it needs"


class BackendError(UsageError):
    """A backend that cannot be used: its plugin does not load, takes a name another one has, declares an option
    as another backend does not, or its class or its session lacks what the contract needs."""


def where(kind: str, ref: str) -> str:
    """A backend and its class, as every refusal names them: ``backend 'x' (module:Class)``."""
    return f"backend {kind!r} ({ref})"


def clash(kind: str, spec: Spec, other: str, theirs: Spec) -> str | None:
    """Why backend ``kind``'s declaration ``spec`` of an option cannot stand beside backend ``other``'s, or None."""
    differ = [a for a in CHECKED if getattr(spec, a) != getattr(theirs, a)]
    if not differ:
        return None
    said = "; ".join(f"{a} {_shown(getattr(theirs, a))} there, {_shown(getattr(spec, a))} here" for a in differ)
    return (f"backend {kind!r} declares option {spec.name!r} unlike backend {other!r} does ({said}): one flag "
            f"and one model_args key cannot check both; rename the option in one of them (or declare it alike)")


@functools.cache
def checked_class(kind: str, ref: str, cls: object, options: type, reads_model_file: bool,
                  build_keys: tuple[str, ...] = ()) -> object:
    """``cls`` (backend ``kind``'s class, ``ref`` its ``module:Class``) if it has what the contract needs (module
    docstring), else a :class:`BackendError` naming what it lacks; once per class and registration."""
    named = where(kind, ref)
    if not isinstance(cls, type):
        raise BackendError(f"{named} is not a class; {FIX}")
    caps = getattr(cls, "capabilities", frozenset())
    if not isinstance(caps, (set, frozenset)) or not all(c in CAPABILITIES for c in caps):
        raise BackendError(f"{named}: capabilities must be a frozenset of {', '.join(CAPABILITIES)}, "
                           f"got {caps!r}; {FIX}")
    lacks = [m for m in (*CLASS_MEMBERS, *INSTANCE_MEMBERS, *(m for c in CAPABILITIES if c in caps
                                                               for m in BY_CAPABILITY.get(c, ())))
             if not hasattr(cls, m)]
    if getattr(cls, "schedule", None) is Declared.schedule and not hasattr(cls, "make_schedule"):
        lacks.append("make_schedule (Declared.schedule calls it)")
    if lacks:
        raise BackendError(f"{named} lacks {', '.join(lacks)}; {FIX}")
    if not isinstance(cls.name, str) or not cls.name:
        raise BackendError(f"{named}: name must be a non-empty string, got {cls.name!r}; {FIX}")
    if cls.Options is not options:
        raise BackendError(f"{named}: its Options ({_ref(cls.Options)}) is not the options class its registration "
                           f"names ({_ref(options)}); {FIX}")
    for member, registered in (("reads_model_file", reads_model_file), ("build_keys", build_keys)):
        own = vars(cls).get(member, registered)  # one its own body sets (the shipped ones' agree)
        if own != registered:
            raise BackendError(f"{named} sets {member} = {own!r} on its class, but its registration says "
                               f"{registered!r}: it is declared once, in its backends.Registered "
                               f"({member}={own!r}), read without loading the backend; {FIX}")
    return cls


def check_session(kind: str, ref: str, backend: object) -> None:
    """Refuse backend ``kind``'s new instance whose engine's session lacks what the engines use (a
    :class:`BackendError` naming the backend, its class and every member missing), before any item is scored.
    A backend without an ``engine`` is not checked here (its own methods are the contract's)."""
    from abricot_local.backends.engines import Engine

    engine = getattr(backend, "engine", None)
    if not isinstance(engine, Engine):
        return
    session = engine.session
    lacks = missing(session, generates=GENERATE in getattr(backend, "capabilities", ()))
    if lacks:
        raise BackendError(f"{where(kind, ref)}: its session ({_ref(type(session))}) lacks {', '.join(lacks)} "
                           f"(backends/session.py: Session); {FIX}")


def _shown(value: object) -> str:
    return value.__name__ if isinstance(value, type) else repr(value)


def _ref(obj: object) -> str:
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', obj)}"
