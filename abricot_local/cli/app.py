"""The click group every command registers on, the one place an AbricotError (or an OSError on a path:
paths.path_error) becomes its one-line message and exit code, and :func:`echo`, the one way to print; the
console script's own process (:meth:`Group.__call__`), whose exit a late SIGTERM does not make a failure."""

from __future__ import annotations

import signal
import sys
import threading

import click

from abricot_local import __version__
from abricot_local.errors import AbricotError, fold, render
from abricot_local.report.safe import visible


FOLD: bool | None = None  # fold error messages to 120 columns: None, on a terminal only (a pipe or a log: whole lines)
_PROCESS = False  # this process is the console script's (Group.__call__): it ends as its command returns


def echo(text: object = "", *, err: bool = False, nl: bool = True, rendered: bool = False) -> None:
    """``click.echo`` of ``text`` made visible (report/safe.py): a folder, model, task or metric name
    from outside, inside any line, is seen and never acted on; newlines and tabs are kept. The options
    the library names in it (errors.opt) are written as this command's flags (cli/options.flags), unless it is
    ``rendered`` already (a document of report's or compare's, its texts in these words as it was built)."""
    from abricot_local.cli.options import flags

    said = render(text, flags) if isinstance(text, str) and not rendered else text
    click.echo(visible(said, newlines=True), err=err, nl=nl)


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

    def __call__(self, *args, **kwargs):
        """The console script's entry (cli.main, ``python -m abricot_local``; a CliRunner calls ``main``, in its
        caller's process): the process ends as the command returns. Its exit status is decided then, and a
        SIGTERM during the interpreter's exit must not turn it into 143 (a finished run recorded by a scheduler as
        a failed job): SIGTERM is ignored from then on (:func:`left_sigterm`: from the moment a command's work is
        finished)."""
        global _PROCESS
        _PROCESS = True
        try:
            return super().__call__(*args, **kwargs)
        finally:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def make_context(self, info_name, args, parent=None, **extra):
        """The group's own options read (``abricot-local --bogus``): a usage error in one line too."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as err:
            usage_error(err)

    def invoke(self, ctx: click.Context):
        """The command run: an AbricotError (an OSError on a path) said in one line; in the console script's
        process (:meth:`__call__`), the entry's early handlers given back (cli.begun: SIGTERM taken as Ctrl-C) and a
        Ctrl-C the command did not take itself (before a run began, a report) one line too, exit code 130."""
        if _PROCESS:
            from abricot_local.cli import begun

            begun()
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as err:
            err.possibilities = choice_flags(err) or err.possibilities  # `report --html`: --format html
            usage_error(err)
        except click.UsageError as err:
            usage_error(err)
        except KeyboardInterrupt:
            if not _PROCESS:
                raise  # (a caller's: a CliRunner test's, a script calling ``main``)
            from abricot_local.backends import exit_process

            command = " ".join(filter(None, (ctx.command_path, ctx.invoked_subcommand)))
            echo(f"\ninterrupted: {command} stopped before it finished; run the same command again", err=True)
            exit_process(130)
        except AbricotError as err:  # a name in the message is shown, never acted on (console.safe)
            fail(err)
        except OSError as err:
            from abricot_local.paths import path_error

            known = path_error(err)
            if known is None:  # not a path's problem: a bug to see whole
                raise
            fail(known)


_TYPES = {"integer": "an integer", "float": "a number", "boolean": "true or false"}  # click's words: the options'


def usage_error(err: click.UsageError) -> None:
    """A usage error of click's said as every other error is, in one line (:func:`fail`, exit status 2): a value
    click could not read in the words of the other doors (``--shots: expected an integer, got 'two'``), another bad
    value after its flag (``--atol: -1.0 is not in the range x>=0``); a missing argument or option, or one that is
    not known, with the command's usage unless click suggests one (``Did you mean --force?``). No arguments where
    the command wants some: its help, as click shows it."""
    import re

    from abricot_local.errors import UsageError

    if isinstance(err, click.exceptions.NoArgsIsHelpError):
        raise err
    if isinstance(err, click.BadParameter) and not isinstance(err, click.MissingParameter):
        param = err.param
        hint = (max(param.opts, key=len) if isinstance(param, click.Option) else param.human_readable_name
                if param is not None else str(err.param_hint or "").strip("'"))
        bad = re.fullmatch(r"(.+) is not a valid (integer|float|boolean)\b.*", err.message, re.S)
        said = f"expected {_TYPES[bad[2]]}, got {bad[1]}" if bad else err.message.rstrip(".")
        message = f"{hint}: {said}" if hint else said
    else:
        message = err.format_message().rstrip(".")
        if err.ctx is not None and not message.endswith("?"):
            message += f"; usage: {err.ctx.get_usage().removeprefix('Usage: ')}"
    fail(UsageError(message))


def choice_flags(err: click.NoSuchOption) -> list[str]:
    """An unknown ``--X`` where X is a value an option of the command takes (``report --html``): that option given
    it (``--format html``), what click's suggestion (an option spelled alike: ``--help``) should be; [] for none."""
    word = err.option_name.lstrip("-").lower()
    params = err.ctx.command.params if err.ctx is not None else ()
    return [f"{max(p.opts, key=len)} {choice}" for p in params
            if isinstance(p, click.Option) and isinstance(p.type, click.Choice)
            for choice in map(str, p.type.choices) if choice.lower() == word]


def left_sigterm(previous, finished: bool):
    """The SIGTERM handler a command leaves as it returns, ``previous`` the one it replaced: ``previous`` for a
    caller in this process (a CliRunner test, a script calling ``main``); in the console script's own process
    (:meth:`Group.__call__`) once the command's work is ``finished`` (a run's results written), SIG_IGN: only
    the process's exit is left, which a SIGTERM must not make a failure."""
    return signal.SIG_IGN if finished and _PROCESS else previous


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
