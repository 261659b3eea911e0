"""The command line: click commands that parse arguments and print what console renders.

One module per command group, each registering on the group in ``app.py``. Nothing
here computes: commands call the library and print through :mod:`abricot_local.console`.
"""

from __future__ import annotations

from abricot_local.cli import check, compare, lm_eval, models, quants, report, rpc, run, tasks  # noqa: F401  (register the commands)
from abricot_local.cli.app import cli

__all__ = ["cli", "main"]


def main() -> None:
    cli(prog_name="abricot-local")
