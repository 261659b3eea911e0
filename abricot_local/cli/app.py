"""The click group every command registers on, the one place an AbricotError (or an OSError on a path:
paths.path_error) becomes its one-line message and exit code, and :func:`echo`, the one way to print."""

from __future__ import annotations

import sys

import click

from abricot_local import __version__
from abricot_local.errors import AbricotError, fold, render
from abricot_local.report.safe import visible


FOLD: bool | None = None  # fold error messages to 120 columns: None, on a terminal only (a pipe or a log: whole lines)


def echo(text: object = "", *, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` of ``text`` made visible (report/safe.py): a folder, model, task or metric name
    from outside, inside any line, is seen and never acted on; newlines and tabs are kept. The options
    the library names in it (errors.opt) are written as this command's flags (cli/options.flags)."""
    from abricot_local.cli.options import flags

    click.echo(visible(render(text, flags) if isinstance(text, str) else text, newlines=True), err=err, nl=nl)


def say(line: str) -> None:
    """A line on stderr (:func:`echo`): what the library tells as it works (a hook's ``notify``, ``warn``, ``say``),
    folded to 120 columns on a terminal as an error is (:func:`shown_error`)."""
    from abricot_local.cli.options import flags

    echo(shown_error(render(line, flags)), err=True)


def shown_error(text: str) -> str:
    """An error as printed: folded to 120 columns on a terminal (errors.fold), whole elsewhere."""
    wanted = sys.stderr.isatty() if FOLD is None else FOLD
    return fold(text) if wanted else text


class Group(click.Group):
    """Turns every AbricotError, and every OSError naming a path (a name over 255 bytes, a file where
    a folder was wanted...), into its message (folded to 120 columns on a terminal) and a non-zero exit."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except AbricotError as err:  # a name in the message is shown, never acted on (console.safe)
            fail(err)
        except OSError as err:
            from abricot_local.paths import path_error

            known = path_error(err)
            if known is None:  # not a path's problem: a bug to see whole
                raise
            fail(known)


def fail(err: AbricotError) -> None:
    """Print ``err`` as the one error line and exit with its code: its options named as this command's flags,
    or in the words of the door it left through (``err.namer``: `lm-eval`'s model_args and --metadata)."""
    from abricot_local.backends import exit_process
    from abricot_local.cli.options import flags

    echo(shown_error(f"error: {visible(render(err.raw(), err.namer or flags), newlines=True)}"), err=True)
    exit_process(err.exit_code)  # os._exit once a backend left a thread inside a C call


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="abricot-local")
def cli() -> None:
    """Evaluate local GGUF models (llama.cpp) on Italian benchmarks (ABRICOT, DISCOTEX, plugins)."""
