"""The Python API's arguments as `run`'s: option fields by name (the tasks' and the backends'),
checked like the command line's; progress through tqdm.auto; the run's lines as Python warnings."""

from __future__ import annotations

import warnings
from pathlib import Path

from abricot_local.core import DEFAULT_SEED
from abricot_local.errors import UsageError

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
    """``run``'s option values (evaluation.arguments' ``kw``) from the API's: an unknown name is
    refused with the valid ones; ``data`` may be {task: path} or ("task=path", ...)."""
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
    kw["data"] = tuple(f"{t}={p}" for t, p in data.items()) if isinstance(data, dict) else tuple(data)
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
