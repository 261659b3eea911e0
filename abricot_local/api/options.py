"""The Python API's options: the option fields by name (the tasks' and the backends'), passed typed
into the run's request (run/request.py parses each by its field); progress through tqdm.auto; the
run's lines as Python warnings. Its errors need no rewording: an AbricotError names options by field
(errors.opt), which ``str(err)`` writes as the API's keywords, and a call it tells the user to make by the command
(errors.call), which the API writes as its own call (api/words.py)."""

from __future__ import annotations

import warnings

from abricot_local.api.arguments import user_level
from abricot_local.api.words import said
from abricot_local.errors import UsageError



class AbricotWarning(UserWarning):
    """What a run says besides its results: a task skipped, a task's note or warning, --limit's caution; a folder
    load_runs leaves out."""


def run_keywords(whole) -> tuple[str, ...]:
    """The run's options (run.request.RunOptions' fields, by their names) the API takes among ``**options``: those
    ``whole`` (``evaluate``, the API's whole run) does not take as parameters of its own (``limit``, ``out``...)."""
    import inspect

    from abricot_local.option_fields import specs
    from abricot_local.run.request import RunOptions

    own = inspect.signature(whole).parameters
    return tuple(s.name for s in specs(RunOptions) if s.name not in own)


def valid_options(whole) -> list[str]:
    """Every keyword ``**options`` takes: the option fields (the tasks', the backends'), ``backend``, the run's
    options that are no parameter of ``whole`` (:func:`run_keywords`)."""
    from abricot_local.run.request import option_names

    return sorted({*option_names(), "backend", *run_keywords(whole)})


def refuse_unknown(options: dict, call, whole) -> None:
    """An option name the API does not take, refused with every keyword ``call`` takes (its own, then the options:
    the tasks' and the backends') and the close match among them (``limt``: limit); ``whole``: ``evaluate``."""
    import inspect

    from abricot_local.errors import fold
    from abricot_local.names import did_you_mean

    valid = valid_options(whole)
    unknown = [k for k in options if k not in valid]
    if unknown:
        own = [p.name for p in inspect.signature(call).parameters.values() if p.kind is not p.VAR_KEYWORD]
        close = did_you_mean(unknown[0], [*own, *valid])
        others = [k for k in valid if k not in own]
        raise UsageError(fold(f"unknown option {unknown[0]!r}.{close} {call.__name__}() takes {', '.join(own)}, "
                              f"and the options (the tasks' and the backends'): {', '.join(others)}"))


def warn(line: str) -> None:
    """A run's line as a Python warning (without the CLI's "warning: "), in the API's words (api.words.said: its
    options as keywords, a call as the API's), pointing at the user's line (arguments.user_level)."""
    warnings.warn(said(line.strip().removeprefix("warning: ")), AbricotWarning, stacklevel=user_level())


def progress_bars(enabled: bool):
    """(callback(task, done, total), close()): a tqdm.auto bar per task (a widget in Jupyter, a
    line in a terminal); nothing at all when not ``enabled``."""
    if not enabled:
        return None, lambda: None
    from tqdm.auto import tqdm

    from abricot_local.console import task_bars

    return task_bars(lambda **kw: tqdm(unit="item", leave=True, **kw))
