"""Options declared as dataclass fields: each field's type and default, and in its metadata
its help, choices, range and role. The one declaration the command line's flags, the API's keywords,
lm-eval's ``model_args`` keys, the checks of every value and the recorded config are made from.

A field is declared with :func:`option`; :func:`specs` reads a class's fields back as
:class:`Spec` records. Values arrive as text (lm-eval, a flag holding a list), typed (click,
JSON) or as a Python value; :func:`from_values` parses each by its field's type, checks its
choices and range, and names the option in every message by its field (``errors.opt``: each door
writes it its own way). Imports nothing of the project but errors.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable

from abricot_local.errors import UsageError, flag_of, opt

C_INT_MAX = 2**31 - 1  # the bound of a value handed to a C int (messages say only "at least" below it)


@dataclass(frozen=True)
class Spec:
    """One option: its field, and what its metadata declares."""

    name: str
    kind: type | None  # int, float, str or bool (of each element when ``many``); None: not a simple value
    many: bool  # a tuple of ``kind``
    optional: bool  # None is a value (meaning ``default_text``)
    default: Any
    help: str = ""
    choices: tuple[str, ...] = ()
    min: float | None = None
    max: float | None = None
    default_text: str = ""  # the help's [default: ...] when the default needs words
    metavar: str = ""
    flag: bool = True  # a flag (and model_args key) of its own; False: another option sets it (--seed)
    internal: bool = False  # set by the program, never by a user
    record: Any = None  # in a run's config: "always", "if_set" (only when not the default), or options -> dict
    recheck: bool = False  # may be given again to `check` (changes no number)
    parse: Callable[[Any], Any] | None = None  # the field's own parser of a given value (idempotent)
    sep: str = ",;"  # what separates the elements of a text given for a tuple
    repeat: bool = False  # a flag given once per element (--data A=X --data B=Y)
    path: bool = False  # a file or folder
    shown_default: bool = False  # the help shows its default
    per_task: bool = False  # reaches a task only when the task declares it uses it (tasks.uses)
    declared_choices: bool = False  # its choices are the tasks' declarations (Task.choices), known once they load
    cli: str = ""  # its flag where the command line's is not made from the field (models_file: --models)
    model_arg: str = ""  # its lm-eval model_args key, where lm-eval's front end takes it (models_file: models)
    words: str = ""  # what the Python API's keyword takes, in words, where its type says it poorly
    listed: bool = False  # text naming several, comma-separated (--protocol paper,calamita): a list of them is joined

    @property
    def flag_name(self) -> str:
        return self.cli or flag_of(self.name)

    @property
    def switch(self) -> bool:
        """An on/off option (text with "on" and "off" among its choices: ``flash_attn``, ``extra_bufts``), which
        takes True/False too, as "on"/"off": the one rule of every door (the API's ``flash_attn=True``, lm-eval's
        ``model_args flash_attn=true`` read as a bool)."""
        return self.kind is str and not self.many and {"on", "off"} <= set(self.choices)

    def default_help(self) -> str:
        """The default as the help shows it."""
        if self.default_text:
            return self.default_text
        if self.many:
            return ",".join(map(str, self.default)) or "none"
        return str(self.default).lower() if isinstance(self.default, bool) else str(self.default)


def option(default: Any, help: str = "", **meta: Any):
    """A dataclass field holding an option (``meta``: any :class:`Spec` attribute)."""
    bad = set(meta) - {f.name for f in dataclasses.fields(Spec)}
    if bad:
        raise TypeError(f"unknown option metadata {', '.join(sorted(bad))}")
    return dataclasses.field(default=default, metadata={"option": {"help": help, **meta}})


def _kind(hint) -> tuple[type | None, bool, bool]:
    """(element type, many, optional) of a field's type hint."""
    args = typing.get_args(hint)
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        optional = len(rest) < len(args)
        if len(rest) != 1:
            return None, False, optional
        hint, args = rest[0], typing.get_args(rest[0])
    if typing.get_origin(hint) is tuple:
        if len(args) == 2 and args[1] is Ellipsis and args[0] in (int, float, str, bool):
            return args[0], True, optional
        return None, True, optional
    return (hint if hint in (int, float, str, bool) else None), False, optional


@functools.cache
def specs(cls: type) -> tuple[Spec, ...]:
    """Every field of the dataclass ``cls`` as a :class:`Spec`, in declaration order."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        kind, many, optional = _kind(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else None
        out.append(Spec(f.name, kind, many, optional, default, **f.metadata.get("option", {})))
    return tuple(out)


# -- parsing and checking ----------------------------------------------------------------------
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}
_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "text"}


def _one(spec: Spec, raw: Any) -> Any:
    """One value of type ``spec.kind`` from ``raw`` (typed, or text)."""
    kind = spec.kind
    if isinstance(raw, bool) and spec.switch:
        return "on" if raw else "off"
    try:
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in _TRUE | _FALSE:
                return text in _TRUE
        elif kind is int and not isinstance(raw, bool):
            if isinstance(raw, int):
                return raw
            if isinstance(raw, str) and re.fullmatch(r"\s*[-+]?\d+\s*", raw):
                return int(raw)
            return _whole(float(raw), raw, spec.name)  # lm-eval reads n_ctx=-5 as -5.0 and seed=1e3 as 1000.0
        elif kind is float and not isinstance(raw, bool):
            if math.isfinite(x := float(raw)):
                return x
        elif kind is str and isinstance(raw, (str, int, float)):
            return str(raw).strip()
    except (ValueError, TypeError):  # text that is no number, or no number at all (a list, an object)
        pass
    raise UsageError(f"{opt(spec.name)}: expected {_WORDS.get(kind, 'a value')}, got {raw!r}")


def _whole(x: float, raw: Any, name: str) -> int:
    """A number given for an integer option: the integer it is (its range is checked next), or
    what is wrong with it, naming the option."""
    if not math.isfinite(x):
        raise UsageError(f"{opt(name)} must be an integer, got {raw!r}")
    if not x.is_integer():
        raise UsageError(f"{opt(name)} must be an integer, got {_number(x)} (not a whole number)")
    if abs(x) > 2**53:
        raise UsageError(f"{opt(name)} must be an integer written in digits, got {raw!r} (too large to be exact)")
    return int(x)


def parse(spec: Spec, raw: Any) -> Any:
    """``raw`` as the field's type: a field's own parser, else by its type (a text for a
    tuple split at ``spec.sep``); None stays None."""
    if raw is None or spec.kind is None:
        return raw
    if spec.listed and isinstance(raw, (list, tuple)):  # the names as a list: the text the command line takes
        raw = ",".join(str(r).strip() for r in raw)
    if spec.parse is not None:
        return spec.parse(raw)
    if spec.many:
        if isinstance(raw, str):
            raw = [p for p in re.split(f"[{re.escape(spec.sep)}]", raw) if p.strip()]
        elif not isinstance(raw, (list, tuple)):
            raw = [raw]
        return tuple(_one(spec, r) for r in raw)
    return _one(spec, raw)


def _number(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def check(spec: Spec, value: Any) -> None:
    """Refuse a value outside the field's choices or range, naming the option."""
    name = opt(spec.name)
    if value is None:
        if spec.optional or spec.kind is None:
            return
        raise UsageError(f"{name} needs a value")
    if spec.choices and value not in spec.choices:
        raise UsageError(f"{name} must be one of {', '.join(spec.choices)}, got {value!r}")
    if spec.min is None and spec.max is None:
        return
    for v in value if spec.many else (value,):
        if not isinstance(v, numbers.Real):  # a value never parsed (text, a list): named, not compared
            raise UsageError(f"{name}: expected {_WORDS.get(spec.kind, 'a number')}, got {v!r}")
        low, high = spec.min is not None and v < spec.min, spec.max is not None and v > spec.max
        if spec.min is not None and spec.max is not None and spec.max < C_INT_MAX and (low or high):
            raise UsageError(f"{name} must be between {_number(spec.min)} and {_number(spec.max)}, got {_number(v)}")
        if low:
            raise UsageError(f"{name} must be at least {_number(spec.min)}, got {_number(v)}")
        if high:
            raise UsageError(f"{name} must be at most {_number(spec.max)}, got {_number(v)}")


def settle(obj: Any) -> None:
    """Parse, in place, each field of a frozen options object whose field has its own parser (a value
    given as text or in another shape: ``prompt_variant="a,b"``, ``data={"abricot": PATH}``; a list for a listed
    text: ``protocol=["paper", "calamita"]``)."""
    for spec in specs(type(obj)):
        value = getattr(obj, spec.name)
        if spec.listed and isinstance(value, (list, tuple)):
            object.__setattr__(obj, spec.name, parse(spec, value))
        elif spec.parse is not None and value is not None:
            object.__setattr__(obj, spec.name, spec.parse(value))


def validate(obj: Any) -> None:
    """Check every field of a constructed options object (its ``__post_init__`` calls this)."""
    for spec in specs(type(obj)):
        check(spec, getattr(obj, spec.name))


def from_values(cls: type, values: dict, *, owner: str, strict: bool = True):
    """An instance of ``cls`` from a mapping (CLI values, lm-eval's model_args, a recorded
    config): each value parsed and checked; None means "not given". With ``strict``, a given
    value for an option ``cls`` lacks is refused ("the fake backend has no option --x")."""
    known = {s.name: s for s in specs(cls)}
    out, foreign = {}, []
    for key, raw in values.items():
        spec = known.get(key)
        if spec is None:
            if not (raw is None or raw is False or (isinstance(raw, (str, tuple)) and not raw)):  # (0 is given)
                foreign.append(key)
            continue
        if raw is None:
            continue
        if spec.parse is not None and raw == spec.default:  # the default as it is (a recorded run's options)
            out[key] = raw
            continue
        value = parse(spec, raw)
        check(spec, value)
        out[key] = value
    if foreign and strict:
        raise UsageError(f"{owner} has no option {', '.join(opt(k) for k in sorted(foreign))}")
    return cls(**out)


def recorded(obj: Any) -> dict:
    """The fields a run records in its config (their ``record`` metadata), in declaration order."""
    out: dict = {}
    for spec in specs(type(obj)):
        value = getattr(obj, spec.name)
        if callable(spec.record):
            out.update(spec.record(obj))
        elif spec.record == "always" or (spec.record == "if_set" and value != spec.default):
            out[spec.name] = list(value) if spec.many else value
    return out


_BARE = object()  # an lm-eval option named without a value


def lm_eval_option(name: str, given: str = "", python: Any = _BARE) -> str:
    """lm-eval's own option ``name`` (not one of these fields: :func:`errors.opt` names those) as a message names
    it: lm-eval has two doors of its own, its command line and simple_evaluate, and a message about what lm-eval
    did (an output read back, a request our model got) cannot know which one the user ran, so it names both: the
    flag with ``given`` (its value there, if any), then simple_evaluate's keyword with ``python`` where one is
    shown: ``--apply_chat_template (simple_evaluate's apply_chat_template)``, ``--fewshot_as_multiturn false
    (simple_evaluate's fewshot_as_multiturn=False)``."""
    flag = f"--{name} {given}" if given else f"--{name}"
    return f"{flag} (simple_evaluate's {name}{'' if python is _BARE else f'={python!r}'})"
