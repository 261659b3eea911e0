"""An :class:`~abricot_local.tasks.base.Item` checked as a task makes it, so that a plugin's slip is refused
by name when the task's items are prepared (before any model loads), not met later as a traceback from
shared code (an IndexError choosing a label, a TypeError writing JSON, a checkpoint's line refused).

An item holds together when: ``id`` is a string; ``source`` a string (or None) and ``context`` a string;
``choices`` and ``continuations`` are as many strings (one or more, a list or a tuple: kept as a tuple);
``gold`` an integer choice index (0 .. len(choices) - 1; not a bool); ``fields`` a dict of string keys and
JSON values (strings, numbers, booleans, None, lists, dicts), as its sample will be written.

NumPy scalars (``np.integer``, ``np.floating``, ``np.bool_``, ``np.str_``: what pandas hands out) are taken
as their Python values, converted here, once: in ``gold`` and anywhere in ``fields``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import numpy as np

from abricot_local.errors import TaskError


class ItemError(TaskError):
    """An item a task made that does not hold together: names the item; the task's ``items()`` names the
    task and its class around it (``Task.__init_subclass__``)."""

    def __init__(self, item: Any, why: str, task: str = ""):
        self.item, self.why, self.task = item, why, task
        shown = repr(item) if isinstance(item, str) else f"{item!r} (a {type(item).__name__})"
        super().__init__(f"{task}{': ' if task else ''}item {shown}: {why}")

    def of(self, task: str) -> "ItemError":
        """This error naming ``task`` (``task 'x' (module.Class)``); one naming a task already is kept."""
        return self if self.task else ItemError(self.item, self.why, task)


_PLAIN = frozenset((str, int, float, bool, type(None)))  # JSON's scalars, as Python makes them


def _plain(value: Any) -> bool:
    """Whether ``value`` is JSON made of Python's own types only (the common case, checked fast)."""
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind is list or kind is tuple:
        return all(map(_plain, value))
    return kind is dict and all(type(k) is str and _plain(v) for k, v in value.items())


def _python(value: Any) -> Any:
    """``value`` with every NumPy scalar in it (nested in lists, tuples and dicts too) as its Python value;
    ``value`` itself when it holds none."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        out = [_python(v) for v in value]
        return type(value)(out) if any(a is not b for a, b in zip(out, value)) else value
    if isinstance(value, dict):
        out = {k: _python(v) for k, v in value.items()}
        return out if any(out[k] is not value[k] for k in value) else value
    return value


def _not_json(value: Any, at: str) -> str | None:
    """What in ``value`` (a field, ``at``) is no JSON value, or None."""
    stack = [(value, at)]
    while stack:
        v, at = stack.pop()
        if type(v) in _PLAIN or v is None or isinstance(v, (str, int, float)):
            continue
        if isinstance(v, (list, tuple)):
            stack.extend((x, f"{at}[{k}]") for k, x in enumerate(v))
        elif isinstance(v, dict):
            key = next((k for k in v if not isinstance(k, str)), None)
            if key is not None:
                return f"its field {at} has the key {key!r} (a {type(key).__name__}): a JSON object's keys are strings"
            stack.extend((x, f"{at}.{k}") for k, x in v.items())
        else:
            return (f"its field {at} is a {type(v).__module__}.{type(v).__qualname__}, not a JSON value (a string, "
                    "number, boolean, None, list or dict): it is written to the samples file as it is")
    return None


def _texts(name: str, values: Any) -> tuple[tuple[str, ...] | None, str | None]:
    """``values`` (choices or continuations) as a tuple of strings, or why they are not."""
    if type(values) is tuple and all(type(v) is str for v in values):
        return values, None
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        return None, f"{name} is a {type(values).__name__}: give a tuple of strings, one per choice"
    values = tuple(_python(v) for v in values)
    bad = next((k for k, v in enumerate(values) if not isinstance(v, str)), None)
    if bad is not None:
        return None, f"{name}[{bad}] is {values[bad]!r} (a {type(values[bad]).__name__}), not a string"
    return values, None


def checked(item: Any) -> dict[str, Any]:
    """The values of ``item``'s fields that change (NumPy scalars as Python values, lists as tuples), or
    :class:`ItemError` naming the item and what is wrong."""
    choices, gold = item.choices, item.gold
    if type(item.id) is str and type(item.context) is str and (type(item.source) is str or item.source is None) \
            and type(choices) is tuple and type(item.continuations) is tuple and type(gold) is int \
            and 0 <= gold < len(choices) == len(item.continuations) and _strings(choices) \
            and _strings(item.continuations) and type(item.fields) is dict and _plain(item.fields):
        return {}  # the common case, checked fast (a task makes thousands of items)
    return _checked(item)


def _strings(values: tuple) -> bool:
    try:
        "".join(values)
    except TypeError:
        return False
    return True


def _checked(item: Any) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    ident = _python(item.id)
    if not isinstance(ident, str):
        raise ItemError(ident, "an item's id is a string (give str(...))")
    if ident is not item.id:
        changes["id"] = ident

    def refuse(why: str) -> ItemError:
        return ItemError(ident, why)

    for name in ("source", "context"):
        value = _python(getattr(item, name))
        if not isinstance(value, str) and not (name == "source" and value is None):
            raise refuse(f"its {name} is {value!r} (a {type(value).__name__}), not a string")
        if value is not getattr(item, name):
            changes[name] = value
    for name in ("choices", "continuations"):
        values, why = _texts(name, getattr(item, name))
        if why:
            raise refuse(why)
        if values is not getattr(item, name):
            changes[name] = values
    choices = changes.get("choices", item.choices)
    continuations = changes.get("continuations", item.continuations)
    if not choices:
        raise refuse("it has no choices")
    if len(continuations) != len(choices):
        raise refuse(f"it has {len(choices)} choices but {len(continuations)} continuations: one continuation "
                     "per choice, in the same order")
    gold = _python(item.gold)
    if isinstance(gold, bool) or not isinstance(gold, int):
        raise refuse(f"its gold is {gold!r} (a {type(gold).__name__}), not an integer choice index")
    if not 0 <= gold < len(choices):
        raise refuse(f"its gold {gold} is not a choice index (0..{len(choices) - 1}: {len(choices)} choices)")
    if gold is not item.gold:
        changes["gold"] = gold
    if not isinstance(item.fields, dict):
        raise refuse(f"its fields are a {type(item.fields).__name__}, not a dict")
    fields = _python(item.fields)
    why = next(filter(None, (f"its fields have the key {k!r} (a {type(k).__name__}): a field's name is a string"
                             if not isinstance(k, str) else _not_json(v, k) for k, v in fields.items())), None)
    if why:
        raise refuse(why)
    if fields is not item.fields:
        changes["fields"] = fields
    return changes


def where(cls: type, name: str | None = None) -> str:
    """A task and its class, as every refusal names them: ``task 'x' (module.Class)`` (``name``: the name it was
    asked by, a key with its options; default: the class's own)."""
    return f"task {name if name is not None else getattr(cls, 'name', '?')!r} ({cls.__module__}.{cls.__qualname__})"


def naming(items: Any) -> Any:
    """A task class's own ``items`` method, wrapped so that an item's refusal names the task (its key) and its
    class: ``task 'x' (module.Class): item 'id': ...`` (anything else, an abstract method, kept as it is)."""
    if not inspect.isfunction(items) or getattr(items, "__isabstractmethod__", False):
        return items

    @functools.wraps(items)
    def named(self):
        try:
            return items(self)
        except ItemError as err:
            raise err.of(where(type(self), self.key)) from None

    return named
