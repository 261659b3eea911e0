"""Options several commands share: the task options and the backend options, and turning
their values into the library's option objects."""

from __future__ import annotations

import click

from abricot_local.core import DEFAULT_SEED


def _apply(f, opts):
    for o in reversed(opts):
        f = o(f)
    return f


def models_file_option(f):
    return click.option("--models", "models_file", type=click.Path(),
                        help="Extra models.toml extending the registry.")(f)


def model_dir_option(f):
    return click.option("--model-dir", "model_dirs", multiple=True, type=click.Path(), metavar="DIR",
                        help="A folder of GGUF files: MODEL may then be a file name found there (repeatable).")(f)


def data_options(f):
    return _apply(f, [
        click.option("--data", "data", multiple=True, metavar="TASK=PATH", help="Data file or folder for one task."),
        click.option("--data-dir", type=click.Path(), help="Folder holding the tasks' data files."),
    ])


def task_options(f):
    return _apply(f, [
        click.option("--tasks", "-t", default=None, help="Comma-separated tasks or groups (default: every task "
                     "whose data is here or can be fetched; `abricot-local tasks` lists them)."),
        data_options,
        click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True,
                     help="Seed for item construction, shots and bootstrap."),
        click.option("--protocol", default=None, metavar="NAME[,NAME...]|all",
                     help="Run each task as a published source ran it, every setting its protocol fixes (ABRICOT: "
                     "paper, calamita; several, or all: each task under each of its protocols named, keyed "
                     "TASK@PROTOCOL but its first). Default: each protocol whose rows the model's registry entry "
                     "reproduces, "
                     "else the task's first (the paper's)."),
        click.option("--shots", type=int, default=None, help="Few-shot examples (default: the protocol's)."),
        click.option("--shot-sampler", type=click.Choice(["lm-eval", "shared"]), default=None,
                     help="lm-eval: each item its own shots, as lm-eval draws them (the published protocols'); "
                     "shared: one draw for every item (a shared prefix: cheaper, no source's). Default: lm-eval."),
        click.option("--prompt-variant", default=None, metavar="NAME[,NAME...]|all",
                     help="A task's prompt wording (`abricot-local tasks` lists each task's; default: the protocol's, "
                          "else each task's first); a task without it is named in the warnings, and a run where no "
                          "task has it is refused. Several (a list, or all): each task scored under each of its "
                          "variants named, keyed TASK~VARIANT (its default keeps TASK): `report` compares them."),
        click.option("--chat-template", is_flag=True, help="Render prompts with the model's chat template."),
    ])


def _click_option(spec, kinds: tuple[str, ...]):
    """A backend option's flag, from its field: not given is None (the backend's default)."""
    from abricot_local.backends import BACKENDS

    only = f"{', '.join(kinds)} only: " if set(kinds) != set(BACKENDS) else ""
    if spec.kind is bool:
        return click.option(spec.flag_name, is_flag=True, default=None, help=only + spec.help)
    help_ = f"{only}{spec.help}  [default: {spec.default_help()}]"
    kind = (click.Choice(spec.choices) if spec.choices else
            {int: click.INT, float: click.FLOAT}.get(spec.kind, click.STRING) if not spec.many else click.STRING)
    return click.option(spec.flag_name, type=kind, default=None, metavar=spec.metavar or None, help=help_)


def backend_options(f):
    """--backend, every registered backend's option flags (generated from their fields), --models."""
    from abricot_local.backends import BACKENDS, DEFAULT_BACKEND, option_specs

    flags = [_click_option(spec, kinds) for spec, kinds in option_specs() if spec.flag]
    return _apply(f, [click.option("--backend", default=DEFAULT_BACKEND, show_default=True,
                                   help=f"Inference backend: {', '.join(BACKENDS)}."),
                      *flags, models_file_option, model_dir_option])


def recheck_options(f):
    """The backend options `check` may set again (they change no number), from their fields."""
    from abricot_local.backends import option_specs

    return _apply(f, [_click_option(spec, kinds) for spec, kinds in option_specs() if spec.flag and spec.recheck])
