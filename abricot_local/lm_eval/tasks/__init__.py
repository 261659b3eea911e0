"""abricot-local's lm-eval tasks: the published protocols as task YAMLs for lm-eval 0.4.10 and later
(docs/lm-eval.md). ``abricot-local lm-eval`` adds this folder to lm-eval's ``--include_path``;
``abricot-local lm-eval --tasks-path`` prints it for ``lm-eval run --include_path``."""

from pathlib import Path

TASKS_PATH = Path(__file__).resolve().parent
