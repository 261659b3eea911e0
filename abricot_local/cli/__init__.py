"""The command line: click commands that parse arguments and print what console renders.

One module per command group, each registering on the group in ``app.py``. Nothing
here computes: commands call the library and print through :mod:`abricot_local.console`.

This package imports nothing as it is imported: the console script's entry, :func:`main` (pyproject's
``abricot-local``, ``python -m abricot_local``), takes Ctrl-C and SIGTERM from its first instruction, before the
commands (a fraction of a second of imports) are loaded. ``cli``, the group with every command registered, is
loaded on first use (``from abricot_local.cli import cli``).
"""

from __future__ import annotations

import os
import signal

__all__ = ["cli", "main"]

EARLY = "\ninterrupted: before the command began, nothing was written; run the same command again\n"


def main() -> None:
    """The console script's entry. From its first instruction until the command begins (the commands imported, the
    command line read), a Ctrl-C or SIGTERM ends the process with one line (:data:`EARLY`) and exit code 130
    (:func:`_early`), never a traceback or a silent 143; from then on (:func:`begun`, app.Group.invoke) SIGTERM is
    taken as Ctrl-C, as the command takes it (a run: saved for --resume). An ignored signal stays ignored."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            try:
                signal.signal(sig, _early)
            except ValueError:  # (called outside the main thread: no handler can be set there)
                break
    _group()(prog_name="abricot-local")


def _early(signum, frame) -> None:
    """A signal before the command began: nothing was written; the line said and the process ended (130) at once,
    in whatever import it came."""
    os.write(2, EARLY.encode())
    os._exit(130)


def _as_ctrl_c(signum, frame) -> None:
    raise KeyboardInterrupt


def begun() -> None:
    """The command begins (app.Group.invoke, in the console script's process): :func:`main`'s handlers replaced,
    Ctrl-C raising KeyboardInterrupt again, SIGTERM raising it too (a command that takes it otherwise installs its
    own: `run`, `quantize`, `kld`)."""
    for sig, then in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, _as_ctrl_c)):
        if signal.getsignal(sig) is _early:
            signal.signal(sig, then)


def _group():
    """The click group with every command registered on it (importing a command's module registers it)."""
    from abricot_local.cli import check, compare, lm_eval, models, quants, report, rpc, run, tasks  # noqa: F401
    from abricot_local.cli.app import cli

    return cli


def __getattr__(name: str):
    if name == "cli":
        return _group()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
