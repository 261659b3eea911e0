"""Frozen dataclasses to and from JSON objects, validated on the way in.

A :class:`Section` is one JSON object of a run's files. Its typed fields are read and
checked by their annotations (``str``, ``int``, ``float`` (any JSON number, NaN
included), ``bool``, ``X | None``, ``tuple[T, ...]``, ``tuple[T, T]``,
``dict[str, T]``, ``Literal[...]``, ``Any`` and other sections); keys it does not
type are kept in ``extra`` and written back. What a field means, and when it is
written, is in its metadata (:func:`spec`), which docs/RESULTS.md is generated from.

Written back, a section read from a file gives the same keys in the same order: a
field marked ``write="always"`` is written whenever the source had it (or, for a
section built in code, always, as ``null`` when None); ``write="set"`` only when it
holds something. Keys new to a section read from a file come after the known ones.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from abricot_local.errors import ResultsError

REQUIRED = dataclasses.MISSING


class Invalid(ResultsError):
    """A value that does not fit its field; the message names the key path."""


def spec(doc: str, *, default: Any = REQUIRED, write: str = "always", check=None):
    """A documented field. ``default``: a value, or a callable for a fresh dict;
    ``write``: "always" or "set"; ``check(value, at)``: a further check (raises :class:`Invalid`)."""
    meta = {"doc": doc, "write": write, "check": check}
    if default is REQUIRED:
        return field(metadata=meta)
    if callable(default):
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Section:
    """Base class: ``extra`` keeps the keys a section does not type; ``_keys`` the source's key order."""

    extra: dict[str, Any] = field(default_factory=dict, kw_only=True, metadata={"internal": True})
    _keys: tuple[str, ...] = field(default=(), kw_only=True, compare=False, repr=False, metadata={"internal": True})

    @classmethod
    def from_dict(cls, data: Any, at: str = ""):
        if not isinstance(data, dict):
            raise Invalid(f"{at or 'it'} is {describe(data)}, not a JSON object")
        values = {}
        for name, read, check, required in _readers(cls):
            if name in data:
                here = f"{at}.{name}" if at else name
                values[name] = read(data[name], here)
                if check:
                    check(values[name], here)
            elif required:
                raise Invalid(f"{at}.{name} is missing" if at else f"{name} is missing")
        known = _known(cls)
        extra = {k: v if type(v) in _ATOMIC else copy.deepcopy(v) for k, v in data.items() if k not in known}
        return cls(**values, extra=extra, _keys=tuple(data))

    @classmethod
    def joined(cls, *parts: dict, at: str = "", **fields):
        """A section made in code of its own ``fields`` (typed values) and ``parts``, other objects' recorded
        forms (an options object's: option_fields.recorded, the JSON edge they are recorded at), their keys in
        that order: read as the one object merged from them is from a file (a key it types checked, the rest
        kept in ``extra`` as written)."""
        merged = dict(fields)
        for part in parts:
            merged.update(part)
        return cls.from_dict(dump(merged), at)

    def written_keys(self) -> tuple[str, ...]:
        """The keys :meth:`to_dict` writes, in its order (nothing dumped)."""
        out = [f.name for f, _ in typed_fields(type(self)) if written(f, getattr(self, f.name), self._keys)]
        out += [k for k in self.extra if k not in out]
        first = [k for k in self._keys if k in out]
        return (*first, *(k for k in out if k not in first))

    def placed(self, first: tuple[str, ...] = (), last: tuple[str, ...] = (), **changes):
        """A copy with ``changes`` (its fields, ``extra``) that writes the keys ``first`` first and ``last`` last,
        its own between in its order: a section made in code from another (a backend's provenance), written as
        one JSON object merged from theirs would be. A field named in ``first`` or ``last`` is written."""
        made = dataclasses.replace(self, **changes)
        keys = (*first, *(k for k in self.written_keys() if k not in first and k not in last), *last)
        return dataclasses.replace(made, _keys=tuple(dict.fromkeys(keys)))

    def to_dict(self) -> dict:
        out = {}
        for f, _ in typed_fields(type(self)):
            value = getattr(self, f.name)
            if written(f, value, self._keys):
                out[f.name] = dump(value)
        plain = _PLAIN_VALUES.issuperset(map(type, self.extra.values()))  # deepcopy returns these as they are
        out.update(self.extra if plain else copy.deepcopy(self.extra))
        if not self._keys:
            return out
        first = [k for k in self._keys if k in out]
        return {**{k: out[k] for k in first}, **{k: v for k, v in out.items() if k not in first}}


@cache
def typed_fields(cls) -> tuple[tuple[dataclasses.Field, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls) if not f.metadata.get("internal"))


@cache
def _readers(cls) -> tuple:
    """Per typed field: its name, its reader, its check, whether it is required."""
    return tuple((f.name, reader(tp), f.metadata["check"], f.default is REQUIRED and f.default_factory is REQUIRED)
                 for f, tp in typed_fields(cls))


@cache
def _known(cls) -> frozenset:
    return frozenset(f.name for f, _ in typed_fields(cls))


def default_of(f: dataclasses.Field):
    return f.default_factory() if f.default_factory is not REQUIRED else f.default


def written(f: dataclasses.Field, value, keys: tuple[str, ...]) -> bool:
    if f.metadata["write"] == "set":
        return value is not None and value != () and value != {}
    return not keys or f.name in keys or value != default_of(f)


_ATOMIC = (str, int, float, bool, type(None))  # deepcopy returns these as they are
_PLAIN_VALUES = frozenset(_ATOMIC)


def dump(value):
    if type(value) in _ATOMIC:
        return value
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, tuple):
        return list(value) if _PLAIN_VALUES.issuperset(map(type, value)) else [dump(v) for v in value]
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items()}
    return copy.deepcopy(value)


def describe(value) -> str:
    """How a wrong value reads in an error: "a string ('0.5')", "a JSON list", "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    return {list: "a JSON list", dict: "a JSON object"}.get(type(value), type(value).__name__)


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_samples_file(value, at: str) -> None:
    """A samples file is named inside the run folder: relative, no ``..``."""
    parts = value.replace("\\", "/").split("/") if isinstance(value, str) else []
    if value is not None and (not value or value.startswith(("/", "\\")) or ".." in parts or ":" in value[:3]):
        raise Invalid(f"{at} is {describe(value)}, not a file name inside the run folder")


def check_positive(value, at: str) -> None:
    """A finite number above 0 (or null)."""
    if value is not None and not (is_number(value) and 0 < value < float("inf")):
        raise Invalid(f"{at} is {describe(value)}, not a finite number above 0")


def _fail(value, want: str, at: str):
    raise Invalid(f"{at} is {describe(value)}, not {want}")


def parse(tp, value, at: str):
    """``value`` read as type ``tp`` (lists become tuples, objects sections), or :class:`Invalid`."""
    return reader(tp)(value, at)


def _copy(value, at):
    return value if type(value) in _ATOMIC else copy.deepcopy(value)


# the element types whose reader returns each value of these exact types as it is (a list of them read at once)
_PLAIN = {str: frozenset({str}), int: frozenset({int}), bool: frozenset({bool}), float: frozenset({float, int})}


@cache
def reader(tp):
    """The function ``(value, at) -> value`` that :func:`parse` applies for ``tp``: the annotation read once
    per type, not once per value."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return _copy
    if origin in (typing.Union, types.UnionType):
        nullable = type(None) in args
        inner = [a for a in args if a is not type(None)]
        readers = [reader(a) for a in inner]

        def union(value, at):
            if value is None and nullable:
                return None
            if len(readers) == 1:
                return readers[0](value, at)
            for read in readers:
                try:
                    return read(value, at)
                except Invalid:
                    continue
            _fail(value, " or ".join(type_name(a) for a in inner), at)  # e.g. "string or number"
        return union
    if origin is Literal:
        def literal(value, at):
            if value not in args:
                _fail(value, " or ".join(repr(a) for a in args), at)
            return value
        return literal
    if tp is float:
        def number(value, at):
            if not is_number(value):
                _fail(value, "a number", at)
            return value
        return number
    if tp in (int, bool, str):
        want = {int: "an integer", bool: "a boolean", str: "a string"}[tp]

        def scalar(value, at):
            if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
                _fail(value, want, at)
            return value
        return scalar
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            each, plain = reader(args[0]), _PLAIN.get(args[0])

            def many(value, at):
                if not isinstance(value, list):
                    _fail(value, "a list", at)
                if plain is not None and plain.issuperset(map(type, value)):  # each one as its reader returns it
                    return tuple(value)
                try:  # each item's place named only when one does not fit (read again, the same first one refused)
                    return tuple([each(v, at) for v in value])
                except Invalid:
                    return tuple(each(v, f"{at}[{k}]") for k, v in enumerate(value))
            return many
        readers = [reader(a) for a in args]

        def fixed(value, at):
            if not isinstance(value, list):
                _fail(value, "a list", at)
            if len(value) != len(readers):
                _fail(value, f"a list of {len(readers)}", at)
            try:
                return tuple([read(v, at) for read, v in zip(readers, value)])
            except Invalid:
                return tuple(read(v, f"{at}[{k}]") for k, (read, v) in enumerate(zip(readers, value)))
        return fixed
    if origin is dict:
        each = reader(args[1])

        def mapping(value, at):
            if not isinstance(value, dict):
                _fail(value, "a JSON object", at)
            try:
                return {k: each(v, at) for k, v in value.items()}
            except Invalid:
                return {k: each(v, f"{at}.{k}") for k, v in value.items()}
        return mapping
    if isinstance(tp, type) and issubclass(tp, Section):
        return tp.from_dict
    raise TypeError(f"no reader for {tp!r}")  # a schema bug, not bad input


def check_options(cls, values, at="config") -> None:
    """Refuse a value a run recorded (JSON) for a field of the options class ``cls`` (option_fields: the
    tasks', a backend's) that is not of the field's type, read as a section's fields are (a tuple is a JSON
    list; a field with its own parser, recorded as text, may be text too: ``prompt_variant "card,ita-bench"``).
    Keys ``cls`` lacks, and null, are left to the reader. :class:`Invalid` names the key, under ``at`` (its
    section: ``config``; or a callable of the key)."""
    from abricot_local.option_fields import specs

    hints = typing.get_type_hints(cls)
    for s in specs(cls):
        value = values.get(s.name)
        if value is None or s.internal:
            continue
        tp = hints[s.name] if s.parse is None else str | hints[s.name]
        reader(tp)(value, f"{at(s.name) if callable(at) else at}.{s.name}")


def type_name(tp) -> str:
    """A field's type in words, as docs/RESULTS.md and the errors say it."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return "any JSON value"
    if origin in (typing.Union, types.UnionType):
        inner = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(inner) + (" or null" if type(None) in args else "")
    if origin is Literal:
        return " or ".join(f'`"{a}"`' for a in args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"list of {plural(type_name(args[0]))}"
        return "[" + ", ".join(type_name(a) for a in args) + "]"
    if origin is dict:
        return f"object: name -> {type_name(args[1])}"
    if isinstance(tp, type) and issubclass(tp, Section):
        return f"object ({tp.__name__})"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(tp, tp.__name__)


def plural(name: str) -> str:
    head, sep, rest = name.partition(" ")
    return f"{head}s{sep}{rest}" if " or " not in name else f"({name})s"
