"""The Python API (for notebooks): ``evaluate``, ``plan``, ``load_run``, ``load_runs``,
``compare``, ``merge``, ``check``; ``Run`` (analysis.runs.Run, the one finished-run type), ``Comparison``,
``Plan`` and ``Check``. Each call
follows its command's path (docs/python.md). Importing it loads neither llama.cpp nor pandas: a call
loads what it needs."""

from abricot_local.analysis.runs import Run
from abricot_local.api.calls import Plan, SweepError, evaluate, plan
from abricot_local.api.comparison import Comparison, compare
from abricot_local.api.maintain import Check, check, merge
from abricot_local.api.options import AbricotWarning
from abricot_local.api.run import load_run, load_runs

__all__ = ["evaluate", "plan", "load_run", "load_runs", "compare", "merge", "check", "Run", "Comparison", "Plan",
           "Check", "AbricotWarning", "SweepError"]
