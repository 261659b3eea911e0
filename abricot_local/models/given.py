"""The options a model is opened with, built once: the backend's defaults, then the registry
entry's (its ``n_ctx``), then what was given (the command line's flags, lm-eval's model_args).

:class:`Given` holds only what was given, so "was n_ctx given?" is a question of the value,
not a flag carried beside it; :meth:`Given.for_model` builds the backend's own options for a
model (a registry entry may name another backend than the one asked for). :func:`load`
opens the backend, its memory checked: ``models.locate.open_model`` returns an :class:`Opened`
whose ``load()`` it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from abricot_local.backends import BACKENDS, DEFAULT_BACKEND, backend_options, open_backend, options_class
from abricot_local.backends.base import Backend
from abricot_local.backends.options import ScoringOptions
from abricot_local.errors import ModelError
from abricot_local.hashing import RECORDED


@dataclass(frozen=True)
class Given:
    """Backend options as given: ``values`` holds only the keys given (text or typed, parsed by
    each field's type), for ``backend``, the backend asked for."""

    backend: str = DEFAULT_BACKEND
    values: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, options: ScoringOptions, *, backend: str | None = None, but: tuple[str, ...] = ()) -> Given:
        """Every field of ``options`` as given, but the fields ``but`` (left to the model's registry entry)."""
        kind = backend or next((k for k in BACKENDS if type(options) is options_class(k)), DEFAULT_BACKEND)
        return cls(kind, {f.name: getattr(options, f.name) for f in fields(options) if f.name not in but})

    def checked(self) -> ScoringOptions:
        """The asked backend's options from what was given, each value parsed and checked
        (an option it lacks is an error): the errors a user can fix before any model is looked up."""
        return backend_options(self.backend, dict(self.values))

    def for_model(self, kind: str | None = None, n_ctx: int | None = None) -> ScoringOptions:
        """Backend ``kind``'s options (default: the one asked for) for a model whose registry entry
        says ``n_ctx``: the backend's defaults, then ``n_ctx``, then what was given."""
        kind = kind or self.backend
        defaults = {"n_ctx": n_ctx} if n_ctx else {}
        return backend_options(kind, {**defaults, **self.values}, strict=kind == self.backend)


def load(ref, options: ScoringOptions, *, force: bool = False, lost=None) -> Backend:
    """The backend for ``ref`` (a models.ref.ModelRef) with ``options`` (its backend's own), after the memory
    check (unless ``force``: backends.open_backend's ``weights``); ``lost``: told when a remote device goes away
    (backends.open_backend). A model a finished run's --resume took as recorded (its file not here) is refused."""
    if ref.sha256_origin == RECORDED:  # (models.locate: nothing fetched for a run that scores nothing)
        raise ModelError(f"model {ref.as_written}: its file is not here (taken as its finished run recorded it), and "
                         "scoring needs it: put the file back, or download it again")
    return open_backend(ref.backend, str(ref.path) if ref.path else ref.label, options,
                        weights=None if force else ref.path, lost=lost)


@dataclass(frozen=True)
class Opened:
    """A model found, fetched and verified (``ref``, a models.ref.ModelRef) with the options it
    opens with (``options``: its backend's own, the registry's n_ctx applied unless given)."""

    ref: Any
    options: ScoringOptions

    @classmethod
    def of(cls, ref, given: Given) -> Opened:
        return cls(ref, given.for_model(ref.backend, ref.spec.n_ctx if ref.spec else None))

    def load(self, *, force: bool = False) -> Backend:
        return load(self.ref, self.options, force=force)
