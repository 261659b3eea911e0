"""The Python API's arguments as `run`'s: option fields by name (the tasks' and the backends'),
checked like the command line's; progress through tqdm.auto; the run's lines as Python warnings."""

from __future__ import annotations

import functools
import re
import warnings
from pathlib import Path

from abricot_local.core import DEFAULT_SEED
from abricot_local.errors import AbricotError, UsageError

# the tasks' options as `run` takes them (tasks.base.TaskOptions), by name, with `run`'s defaults
TASK_OPTIONS = {"data": (), "data_dir": None, "seed": DEFAULT_SEED, "shots": None, "shot_sampler": None,
                "prompt_variant": None, "chat_template": False}
# `--models FILE`, `--model-dir DIR`, `--margin M` (the published verdict's)
RUN_OPTIONS = {"models_file": None, "model_dirs": (), "margin": None}


class AbricotWarning(UserWarning):
    """What a run says besides its results: a task skipped, a task's note, --limit's caution."""


def valid_options() -> list[str]:
    from abricot_local.backends import option_specs

    return sorted({*TASK_OPTIONS, *RUN_OPTIONS, "backend", "force",
                   *(spec.name for spec, _ in option_specs() if spec.flag)})


def run_kw(tasks, protocol: str | None, options: dict) -> dict:
    """``run``'s option values (run.arguments' ``kw``) from the API's: an unknown name is
    refused with the valid ones; ``data`` may be {task: path}, "task=path", or a list of "task=path"
    and (task, path); ``prompt_variant`` a list. Types are checked before (api/arguments.py)."""
    from abricot_local.backends import DEFAULT_BACKEND, option_specs
    from abricot_local.errors import fold
    from abricot_local.names import did_you_mean

    valid = valid_options()
    unknown = [k for k in options if k not in valid]
    if unknown:
        raise UsageError(fold(f"unknown option {unknown[0]!r}.{did_you_mean(unknown[0], valid)} The options (the "
                              f"tasks' and the backends'): {', '.join(valid)}"))
    kw = {**TASK_OPTIONS, **RUN_OPTIONS, "backend": DEFAULT_BACKEND,
          **{spec.name: None for spec, _ in option_specs() if spec.flag}}
    kw.update({k: v for k, v in options.items() if k != "force"})
    data = kw["data"]
    data = data.items() if isinstance(data, dict) else (data,) if isinstance(data, str) else data
    kw["data"] = tuple(d if isinstance(d, str) else f"{d[0]}={d[1]}" for d in data)  # "task=path", or a pair
    if isinstance(kw["prompt_variant"], (list, tuple)):
        kw["prompt_variant"] = ",".join(kw["prompt_variant"])
    kw["data_dir"] = None if kw["data_dir"] is None else str(kw["data_dir"])
    dirs = kw["model_dirs"]
    kw["model_dirs"] = (str(dirs),) if isinstance(dirs, (str, Path)) else tuple(str(d) for d in dirs)
    kw["models_file"] = None if kw["models_file"] is None else str(kw["models_file"])
    kw["tasks"] = ",".join(tasks) if isinstance(tasks, (list, tuple)) else tasks
    kw["protocol"] = protocol
    return kw


def warn(line: str) -> None:
    """A run's line as a Python warning (without the CLI's "warning: ")."""
    warnings.warn(line.removeprefix("warning: "), AbricotWarning, stacklevel=4)


def progress_bars(enabled: bool):
    """(callback(task, done, total), close()): a tqdm.auto bar per task (a widget in Jupyter, a
    line in a terminal); nothing at all when not ``enabled``."""
    if not enabled:
        return None, lambda: None
    from tqdm.auto import tqdm

    from abricot_local.console import task_bars

    return task_bars(lambda **kw: tqdm(unit="item", leave=True, **kw))


# -- errors in the API's words: `data_dir=DIR`, not `--data-dir DIR` -------------------------
# the calls' own arguments (evaluate, plan, compare) besides the option fields, with their kinds
CALL_ARGS = {"sample": int, "limit": int, "shard": str, "protocol": str, "out": str, "resume": bool, "quants": str,
             "calibrate": bool, "force": bool, "margin": float, "reference": str, "near_tie": float,
             "tolerance": float, "alpha": float}
FLAG_KEYWORDS = {"models": "models_file", "model-dir": "model_dirs"}  # flags whose keyword is another name
# a flag, and its value when it is a placeholder (DIR, K/N), a number or KEY=PLACEHOLDER
_FLAG = re.compile(r"--([a-z][a-z0-9-]*)(?: ([A-Z][A-Z_/]*(?![\w/])|\d[\d.]*(?![\w.])|[a-z_]+=[A-Z_]+(?!\w)))?")


def _kinds() -> dict[str, type | None]:
    from abricot_local.backends import option_specs

    kinds: dict[str, type | None] = {**{k: type(v) if v is not None else None for k, v in TASK_OPTIONS.items()},
                                     **dict.fromkeys(RUN_OPTIONS), "backend": str, **CALL_ARGS}
    kinds.update({spec.name: spec.kind for spec, _ in option_specs() if spec.flag})
    return kinds


def as_keywords(text: str) -> str:
    """``text`` with each of `run`'s and `compare`'s flags that the API takes as a keyword written as
    that keyword: ``--data-dir DIR`` -> ``data_dir=DIR``, ``--force`` -> ``force=True``, ``--data
    abricot=FILE`` -> ``data={"abricot": FILE}``, ``--limit`` -> ``limit``; other text unchanged."""
    kinds = _kinds()

    def keyword(m: re.Match) -> str:
        flag, value = m.group(1), m.group(2)
        name = FLAG_KEYWORDS.get(flag, flag.replace("-", "_"))
        if name not in kinds:
            return m.group(0)
        if value is None:
            return f"{name}=True" if kinds[name] is bool else name
        if "=" in value:
            key, _, placeholder = value.partition("=")
            return f'{name}={{"{key}": {placeholder}}}'
        return f"{name}={value}"

    return _FLAG.sub(keyword, text)


@functools.lru_cache(maxsize=None)
def _keyworded(cls: type) -> type:
    """``cls`` whose text names the API's keywords (the same class for ``except``: a subclass)."""
    return type(cls.__name__, (cls,), {"__str__": lambda self: as_keywords(cls.__str__(self)), "__keyworded__": True,
                                       "__module__": cls.__module__, "__qualname__": cls.__qualname__})


def keyword_hints(call):
    """The API call ``call``, whose AbricotErrors say the API's keywords instead of `run`'s flags
    (:func:`as_keywords`): the one place the API's errors are worded for Python."""
    @functools.wraps(call)
    def wrapped(*args, **kwargs):
        try:
            return call(*args, **kwargs)
        except AbricotError as err:
            if not hasattr(type(err), "__keyworded__"):
                err.__class__ = _keyworded(type(err))
            raise

    return wrapped
