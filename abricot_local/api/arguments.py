"""The Python API's arguments checked by type once, at each call's entry: its parameters by their
annotations, its ``**options`` by the option fields they set (the tasks' and the backends':
option_fields.Spec's kind, many, optional), so that a value of the wrong type is one
:class:`UsageError` naming the keyword, what it takes and what it got, never a TypeError from
deep inside. Values are not converted here: ``sample="3"`` is refused, as ``sample=True`` is; an on/off
option takes True/False besides its words (option_fields.Spec.switch: ``flash_attn=True`` is "on")."""

from __future__ import annotations

import functools
import numbers
import os
import types
import typing
from pathlib import Path
from typing import Any

from abricot_local.errors import UsageError

PathLike = str | os.PathLike
# what the API takes besides the option fields' own types (data in three shapes, folders as paths); the run's
# options (run.request.RunOptions) take their fields' types, a path field's as a path (:func:`run_hint`)
EDGE: dict[str, Any] = {
    "data": dict[str, PathLike] | str | list[str | tuple[str, PathLike]] | tuple[str | tuple[str, PathLike], ...],
    "data_dir": PathLike | None,
    "backend": str,
}
WHAT = {  # what a keyword takes, in words, where its type alone says it poorly (a field's: its ``words``)
    "model": "a model name or a .gguf path ('gemma-3-270m'), or a list of them",
    "tasks": "task names as text ('discotex', 'abricot_abs,discotex'), a list of them, or None",
    "data": "{task: path}, 'task=path', or a list of 'task=path' and (task, path)",
}


def _names_a_task(value) -> bool:
    """Whether ``data``'s texts each name a task (``task=path``): 'discotex' alone is no form ``data`` takes."""
    texts = [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else []
    return all("=" in t for t in texts if isinstance(t, str))


SHAPES = {"data": _names_a_task}  # a keyword whose type alone does not say every value it refuses


def _shaped(name: str, value) -> bool:
    return SHAPES[name](value) if name in SHAPES else True


def fits(value, hint) -> bool:
    """Whether ``value`` is of the type ``hint`` (int, float, str, bool, Path, os.PathLike, None,
    unions, list[X], tuple[X, ...], tuple[X, Y], dict[K, V], a class); an int is no bool, a float
    takes an int."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, a) for a in args)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint in (Path, os.PathLike):
        return isinstance(value, os.PathLike)
    if origin is list or origin is tuple:
        if not isinstance(value, (list, tuple)) or (origin is list and not isinstance(value, list)):
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(fits(v, a) for v, a in zip(value, args))
        return all(fits(v, args[0]) for v in value) if args else True
    if origin is dict:
        return isinstance(value, dict) and all(fits(k, args[0]) and fits(v, args[1]) for k, v in value.items())
    return isinstance(value, origin or hint)


def words(hint) -> str:
    """``hint`` as a message says it ("an integer or None")."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        parts = [words(a) for a in args if a is not type(None)]
        parts = list(dict.fromkeys(parts))
        return " or ".join(parts + (["None"] if type(None) in args else []))
    if origin is tuple and args and args[-1] is not Ellipsis:
        return f"a pair ({', '.join(words(a) for a in args)})"
    if origin in (list, tuple):  # a tuple of X is a list to a reader
        plural = {int: "integers", float: "numbers", str: "texts", bool: "True or False"}
        return f"a list of {plural.get(args[0]) or words(args[0])}" if args else "a list"
    if origin is dict:
        return f"a dict {{{words(args[0])}: {words(args[1])}}}"
    named = {bool: "True or False", int: "an integer", float: "a number", str: "text", Path: "a path",
             os.PathLike: "a path", type(None): "None", Any: "anything"}
    return named.get(hint, getattr(hint, "__name__", str(hint)))


@functools.cache
def option_hints() -> dict[str, Any]:
    """Each option keyword's type, from the option fields (TaskOptions', SettleOptions', every backend's, then
    the run's: RunOptions, :func:`run_hint`), then the API's own shapes (:data:`EDGE`)."""
    from abricot_local.backends import option_specs
    from abricot_local.option_fields import specs
    from abricot_local.run.request import RunOptions, SettleOptions
    from abricot_local.tasks.base import TaskOptions

    out: dict[str, Any] = {}
    for spec in [*specs(TaskOptions), *specs(SettleOptions), *(s for s, _ in option_specs())]:
        if spec.kind is None or spec.name in out:
            continue
        hint: Any = spec.kind
        if spec.many or spec.listed:  # a list, a tuple, or text holding the values
            hint = list[spec.kind] | tuple[spec.kind, ...] | str  # type: ignore[valid-type]
        elif spec.switch:  # True/False: "on"/"off" (option_fields.Spec.switch)
            hint = str | bool
        out[spec.name] = hint | None  # None: not given (the default)
    out.update({spec.name: run_hint(spec) for spec in specs(RunOptions)})
    out.update(EDGE)
    return out


@functools.cache
def list_fields() -> frozenset[str]:
    """The option fields that take several values (a tuple field, a ``listed`` text: ``protocol``, ``quants``): a
    parameter of that name takes what its field takes (a list too), whatever its annotation says."""
    from abricot_local.backends import option_specs
    from abricot_local.option_fields import specs
    from abricot_local.run.request import RunOptions, SettleOptions
    from abricot_local.tasks.base import TaskOptions

    every = [*specs(TaskOptions), *specs(SettleOptions), *specs(RunOptions), *(s for s, _ in option_specs())]
    return frozenset(s.name for s in every if s.kind is not None and (s.many or s.listed))


def run_hint(spec) -> Any:
    """The type the API takes for a run option (a RunOptions field): its field's, a path field's a path (text or a
    path object) or a list of them; None only where the field takes None (``force`` is True or False)."""
    one: Any = PathLike if spec.path else spec.kind
    hint = one | list[one] | tuple[one, ...] if spec.many or spec.listed else one  # type: ignore[valid-type]
    return hint | None if spec.optional else hint


@functools.cache
def field_words() -> dict[str, str]:
    """What each option field's keyword takes, in words, where the field says it (option_fields.Spec.words)."""
    from abricot_local.option_fields import specs
    from abricot_local.run.request import RunOptions
    from abricot_local.tasks.base import TaskOptions

    return {s.name: s.words for s in (*specs(TaskOptions), *specs(RunOptions)) if s.words}


@functools.cache
def switch_words() -> dict[str, str]:
    """What each on/off option takes, in words (option_fields.Spec.switch): its choices, or True/False."""
    from abricot_local.backends import option_specs

    return {s.name: f"{', '.join(repr(c) for c in s.choices)}, or True/False ('on'/'off')"
            for s, _ in option_specs() if s.switch}


@functools.cache
def _hints(fn) -> dict[str, Any]:
    return typing.get_type_hints(fn)


def _refuse(call: str, name: str, hint, value) -> UsageError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    what = WHAT.get(name) or field_words().get(name) or switch_words().get(name) or words(hint)
    return UsageError(f"{call}(): {name} must be {what}, got {shown} ({type(value).__name__})")


def check_call(fn, given: dict) -> None:
    """Refuse any argument of ``fn`` (its parameters by name, as bound at its entry) that is not of
    its type: the annotations' for its parameters (each element of a ``*args``), the option fields'
    for ``**options`` (an unknown option is left to the caller, which names the valid ones)."""
    import inspect

    hints = _hints(fn)
    params = inspect.signature(fn).parameters
    for name, value in given.items():
        param = params.get(name)
        if param is None:
            continue
        if param.kind is param.VAR_KEYWORD:
            known = option_hints()
            for key, v in value.items():
                if key in known and not (fits(v, known[key]) and _shaped(key, v)):
                    raise _refuse(fn.__name__, key, known[key], v)
        elif param.kind is param.VAR_POSITIONAL:
            for v in value:
                if name in hints and not fits(v, hints[name]):
                    raise _refuse(fn.__name__, name, hints[name], v)
        elif name in hints:
            hint = option_hints()[name] if name in list_fields() else hints[name]
            if not (fits(value, hint) and _shaped(name, value)):
                raise _refuse(fn.__name__, name, hint, value)


def bind(fn, args: tuple, kwargs: dict) -> dict:
    """``fn``'s arguments by name, as its call binds them; a call it cannot take (a keyword it has not,
    misspelt or not; more positional arguments than it takes; one given twice; one missing) is one
    :class:`UsageError` naming the keyword, not Python's TypeError."""
    import inspect

    from abricot_local.errors import fold
    from abricot_local.names import did_you_mean

    params = inspect.signature(fn).parameters.values()
    call = f"{fn.__name__}()"
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if not any(p.kind is p.VAR_POSITIONAL for p in params) and len(args) > len(positional):
        rest = ", ".join(f"{n}=..." for n in named if n not in positional)
        raise UsageError(fold(f"{call} takes {len(positional)} positional argument{'s' * (len(positional) != 1)} "
                         f"({', '.join(positional)}), got {len(args)}: give the others by keyword ({rest})"))
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        for key in kwargs:
            if key not in named:
                raise UsageError(fold(f"{call} has no keyword {key!r}.{did_you_mean(key, named)} It takes: "
                                      f"{', '.join(named)}"))
    for name in positional[:len(args)]:
        if name in kwargs:
            raise UsageError(f"{call}: {name} given twice, by position and as {name}=")
    missing = [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
               p.KEYWORD_ONLY) and p.name not in kwargs and p.name not in positional[:len(args)]]
    if missing:
        raise UsageError(f"{call}: {missing[0]} is missing (give it: {fn.__name__}({missing[0]}=...))")
    return dict(inspect.signature(fn).bind(*args, **kwargs).arguments)


def entry(call):
    """``call``, one of the API's entry points: its arguments bound and checked first (:func:`bind`, then
    :func:`check_call`: each refused as one UsageError naming its keyword); an OSError naming a path (a
    name over 255 bytes, a file where a folder is wanted...) leaves it as that path's one-line AbricotError
    (paths.path_error), as the command line's group turns it; any other OSError is left whole (a bug to
    see); an AbricotError no door claimed leaves in the API's words, a call it tells the user to make as this
    API's call (api.words.words_of: ``plan([...])`` from plan)."""
    @functools.wraps(call)
    def door(*args, **kwargs):
        from abricot_local.backends import waiting
        from abricot_local.errors import AbricotError

        check_call(call, bind(call, args, kwargs))
        try:
            with waiting():  # a signal llama.cpp does not return from: waited for, never the process ended
                return call(*args, **kwargs)
        except AbricotError as err:
            from abricot_local.api.words import words_of

            raise (err if err.namer else err.said_by(words_of(call.__name__)))
        except OSError as err:
            from abricot_local.paths import path_error

            known = path_error(err)
            if known is None:
                raise
            raise known from None

    return door


def user_level() -> int:
    """``warnings.warn``'s stacklevel, for a warning issued by the function calling this one, that points at
    the user's line: the first frame outside this package (a call made inside another, a sweep's runs, a
    load_run inside load_runs, is not the user's)."""
    import sys

    here = str(Path(__file__).resolve().parents[1]) + os.sep  # abricot_local/
    frame, level = sys._getframe(1), 1
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(here):
        frame, level = frame.f_back, level + 1
    return level
