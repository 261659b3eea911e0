"""The Python API (for notebooks): ``evaluate``, ``plan``, ``load_run``, ``load_runs``,
``compare``; ``Run`` and ``Comparison``. Each call follows its command's path (docs/python.md).
Importing it loads neither llama.cpp nor pandas: a call loads what it needs."""

from abricot_local.api.calls import SweepError, compare, evaluate, load_run, plan
from abricot_local.api.comparison import Comparison
from abricot_local.api.options import AbricotWarning
from abricot_local.api.run import Run, load_runs

__all__ = ["evaluate", "plan", "load_run", "load_runs", "compare", "Run", "Comparison", "AbricotWarning",
           "SweepError"]
