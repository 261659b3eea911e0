"""The options several commands share, each flag made from its field (option_fields: the tasks'
TaskOptions and every backend's Options), and the command line's words for an option a message
names (:data:`flags`, the CLI's errors.Namer)."""

from __future__ import annotations

import math

import click

from abricot_local.errors import NONE, Namer, flag_of


def _apply(f, opts):
    for o in reversed(opts):
        f = o(f)
    return f


def run_option(name: str, help: str = ""):
    """The flag of the run's option ``name`` (run.request.RunOptions' field: its flag, type, parser and range,
    checked as the value is read, so every command taking it refuses a value in the same words); ``help``: the
    command's own words for it, where they are not `run`'s."""
    from dataclasses import replace

    from abricot_local.option_fields import specs
    from abricot_local.run.request import RunOptions

    spec = next(s for s in specs(RunOptions) if s.name == name)
    return _click_option(replace(spec, help=help) if help else spec, checked=True)


def run_options(*names: str):
    """The flags of these run options (:func:`run_option`), in the order named."""
    return lambda f: _apply(f, [run_option(n) for n in names])


def models_file_option(f):
    """--models FILE (RunOptions.models_file)."""
    return run_option("models_file")(f)


def model_dir_option(f):
    """--model-dir DIR, repeatable (RunOptions.model_dirs)."""
    return run_option("model_dirs")(f)


class _Declared(click.Choice):
    """The choices the tasks declare for an option (tasks.declared_choices), read when first needed
    (a value given, the help shown): the tasks' modules do not load for any other command."""

    def __init__(self, option: str):
        self.option, self.case_sensitive, self._choices = option, True, None

    @property
    def choices(self):
        if self._choices is None:
            from abricot_local.tasks import declared_choices

            self._choices = declared_choices(self.option)
        return self._choices

    @choices.setter
    def choices(self, value) -> None:
        self._choices = tuple(value)


class OutputPath(click.Path):
    """A path a command writes (a folder, a file): an empty one is refused, naming the option (errors.opt), not
    read as the current folder (``Path("")`` is ``.``) nor as the option left out."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value:
            from abricot_local.errors import UsageError, opt

            raise UsageError(f"{opt(param.name)} is empty: give the folder or file to write")
        return super().convert(value, param, ctx)


class FiniteRange(click.FloatRange):
    """A float option's range, with NaN and infinities refused as click refuses a value out of range
    (a NaN is in no range: every comparison with it is false)."""

    def convert(self, value, param, ctx):
        x = super().convert(value, param, ctx)
        if not math.isfinite(x):
            self.fail(f"{x} is not a finite number.", param, ctx)
        return x


class FieldPath(click.Path):
    """A path option's value checked by its field's own parser (``TaskOptions.data_dir``: a file where a folder is
    wanted refused), as given on the command line: every command taking the flag refuses it alike."""

    def __init__(self, spec):
        super().__init__()
        self.spec = spec

    def convert(self, value, param, ctx):
        from abricot_local.option_fields import parse

        return parse(self.spec, super().convert(value, param, ctx))


class Checked(click.ParamType):
    """A value read by ``base`` (click's), then checked by its field's range (option_fields.check): refused in the
    field's words (``--limit must be at least 1, got 0``), the same in every command taking the flag."""

    def __init__(self, base, spec):
        self.base, self.spec, self.name = base, spec, base.name

    def get_metavar(self, *args, **kwargs):
        return self.base.get_metavar(*args, **kwargs)

    def convert(self, value, param, ctx):
        from abricot_local.option_fields import check

        x = self.base.convert(value, param, ctx)
        check(self.spec, x)
        return x


def _click_option(spec, only: str = "", checked: bool = False):
    """An option's flag, from its field (named by it; its flag ``spec.flag_name``): not given is None (the
    field's default, or the backend's); a path field with its own parser parses the value given
    (:class:`FieldPath`); ``checked``: its range checked as it is read (:class:`Checked`)."""
    if spec.kind is bool:
        return click.option(spec.flag_name, spec.name, is_flag=True, default=None, help=only + spec.help)
    shown = spec.default_text or (spec.default_help() if spec.default not in (None, (), "") else "")
    help_ = f"{only}{spec.help}" + (f"  [default: {shown}]" if shown else "")
    if spec.repeat:
        return click.option(spec.flag_name, spec.name, multiple=True, type=click.Path() if spec.path else None,
                            metavar=spec.metavar or None, help=help_)
    kind = (click.Choice(spec.choices) if spec.choices else _Declared(spec.name) if spec.declared_choices else
            (FieldPath(spec) if spec.parse else click.Path()) if spec.path else
            {int: click.INT, float: click.FLOAT}.get(spec.kind, click.STRING) if not spec.many else click.STRING)
    if checked and (spec.min is not None or spec.max is not None):
        kind = Checked(kind, spec)
    return click.option(spec.flag_name, spec.name, type=kind, default=None, metavar=spec.metavar or None,
                        help=help_)


def _task_flags(*names: str) -> list:
    """The flags of these TaskOptions fields, in declaration order."""
    from abricot_local.option_fields import specs
    from abricot_local.tasks.base import TaskOptions

    return [_click_option(s) for s in specs(TaskOptions) if s.name in names]


def data_options(f):
    """--data and --data-dir (TaskOptions' fields)."""
    return _apply(f, _task_flags("data", "data_dir"))


def task_options(f, tasks: bool = True):
    """--tasks, and every task option's flag (TaskOptions' fields); ``tasks`` False: without --tasks
    (:func:`task_settings`)."""
    from abricot_local.option_fields import specs
    from abricot_local.tasks.base import TaskOptions

    return _apply(f, [
        *([click.option("--tasks", "-t", default=None, help="Comma-separated tasks or groups (default: every task "
                        "whose data is here or can be fetched; `abricot-local tasks` lists them).")] if tasks else []),
        *(_click_option(s) for s in specs(TaskOptions) if not s.internal),
    ])


def task_settings(f):
    """Every task option's flag (TaskOptions' fields) without --tasks: a command that takes one task its own way."""
    return task_options(f, tasks=False)


def settle_options(f):
    """--until-settled, --looks, --max-items (run.request.SettleOptions' fields)."""
    from abricot_local.option_fields import specs
    from abricot_local.run.request import SettleOptions

    return _apply(f, [_click_option(s) for s in specs(SettleOptions)])


def backend_options(f, names: tuple[str, ...] | None = None):
    """--backend, every registered backend's option flags (generated from their fields), --models;
    ``names``: only these backend options' flags (a command that uses only some, :func:`backend_subset`)."""
    from abricot_local.backends import BACKENDS, DEFAULT_BACKEND, option_specs

    def only(kinds):
        return f"{', '.join(kinds)} only: " if set(kinds) != set(BACKENDS) else ""

    flags_ = [_click_option(spec, only(kinds)) for spec, kinds in option_specs()
              if spec.flag and (names is None or spec.name in names)]
    return _apply(f, [click.option("--backend", default=DEFAULT_BACKEND, show_default=True,
                                   help=f"Inference backend: {', '.join(BACKENDS)}."),
                      *flags_, models_file_option, model_dir_option])


def backend_subset(*names: str):
    """--backend, --models, --model-dir and only these backend options' flags (by field name): a command that
    uses no other (`labels`, a vocabulary-only load) does not accept a flag that would change nothing."""
    return lambda f: backend_options(f, names)


def recheck_options(f):
    """The backend options `check` may set again (they change no number), from their fields."""
    from abricot_local.backends import option_specs

    return _apply(f, [_click_option(spec) for spec, kinds in option_specs() if spec.flag and spec.recheck])


def backend_values(kw: dict) -> dict:
    """The backend options given on this command line (None: not given), by field name."""
    from abricot_local.backends import option_specs

    return {spec.name: kw[spec.name] for spec, _ in option_specs() if kw.get(spec.name) is not None}


# -- an option as the command line names it ---------------------------------------------------
def _flag(name: str) -> str:
    """The flag of ``name`` (an option's field, a command's parameter) in the command running now, else in
    any command (``models_file`` -> ``--models``), else made from the name (``n_batch`` -> ``--n-batch``)."""
    ctx = click.get_current_context(silent=True)
    commands = []
    while ctx is not None:
        commands.append(ctx.command)
        ctx = ctx.parent
    if commands and isinstance(commands[-1], click.Group):  # the program's group: every command of it
        commands += list(commands[-1].commands.values())
    for command in commands:
        for p in command.params:
            if p.name == name and isinstance(p, click.Option) and p.opts[0].startswith("--"):
                return max(p.opts, key=len)
    return flag_of(name)


def _flags(name: str, value=NONE) -> str:
    """The command line's words for an option a message names (:data:`flags`): ``--shots 3``, ``--force``,
    ``--data abricot=FILE``."""
    flag = _flag(name)
    if value is NONE or value is True:
        return flag
    if isinstance(value, tuple) and len(value) == 2:
        return f"{flag} {value[0]}={value[1]}"
    return f"{flag} {value}"


flags = Namer(_flags, ",".join)  # the command line's errors.Namer: --shots 3, a list with commas (--rpc A:1,B:2)
