"""`run`: one model, or several one after another (a sweep), with Ctrl-C/SIGTERM saved for --resume."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from abricot_local.cli.app import cli, echo, left_sigterm, say
from abricot_local.cli.options import backend_options, flags, run_options, settle_options, task_options
from abricot_local.cli.progress import progress as make_progress
from abricot_local.errors import UsageError, shell_line
from abricot_local.record.settings import task_keys


@cli.command()
@click.argument("models", nargs=-1, required=True, metavar="MODEL [MODEL ...]")
@task_options
@backend_options
@run_options("limit", "sample", "shard", "out", "resume", "margin", "force")
@click.option("--dry-run", is_flag=True, help="Print the plan (items, tokens, download, memory, predicted time on "
              "this machine) and stop: nothing is scored, written or downloaded.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: the plan as JSON.")
@run_options("quants")
@click.option("--calibrate", is_flag=True, help="With --dry-run: first time each model that is on this machine "
              "(a few seconds after its load), cached for later plans.")
@settle_options
def run(models: tuple[str, ...], dry_run: bool, as_json: bool, calibrate: bool, **kw) -> None:
    """Score MODEL (a registry alias, a .gguf path, ollama:NAME[:TAG], lmstudio:PUBLISHER/REPO[/FILE],
    hf:OWNER/REPO[:QUANT] or a file in --model-dir / llama.cpp's cache) on the tasks; write results to --out.

    Several MODELs run one after another into one sweep folder, then a comparison table;
    a model that fails is reported and the others go on."""
    from abricot_local.cli.plan import Said, show
    from abricot_local.run import session
    from abricot_local.run.request import request_of

    if (as_json or calibrate) and not dry_run:
        raise UsageError("--json and --calibrate go with --dry-run")
    request = request_of(models, kw, tasks=kw["tasks"], backend=kw["backend"])  # every option by field name
    ending = _Ending(len(request.models))
    if dry_run:
        return show(request, as_json=as_json, calibrate=calibrate)
    # the request run (run.session.run: one model, or a sweep), each model's summary and published verdict
    # said as its run ends (_said), a sweep's comparison at its end (said_sweep, the ``ended`` hook). Ctrl-C
    # or SIGTERM at any moment (planning, hashing, loading, scoring, the summaries said) ends it with exit
    # code 130 and what is saved (run.session.after_signal: the runs that finished are complete); a SIGTERM
    # once every model's run is written stops nothing (_Ending): the command ends as it would have.
    said = Said()  # the plan lines of this command: why no time is predicted said once
    hooks = session.Hooks(notify=say, warn=say, progress=make_progress, on_loaded=said.announce,
                          before_download=said.before_download,
                          resume_hint=resume_command, say=say, done=ending.done, ended=said_sweep)
    term = signal.signal(signal.SIGTERM, ending.sigterm)
    try:
        for _ in session.run(request, hooks):
            pass
    except session.Interrupted as err:
        _exit_interrupted(err.message, 0 if err.complete else 130)
    finally:  # the caller's handler back (a CliRunner test's); the console script's process: ignored from now
        signal.signal(signal.SIGTERM, left_sigterm(term, finished=ending.finished))


class _Ending:
    """SIGTERM as `run` takes it: as Ctrl-C (a KeyboardInterrupt: the run left for --resume) while a model's run is
    still to be made; once every model's run has ended (the ``done`` hook: its results.json written, or its
    failure said) nothing is left to stop, and a SIGTERM is let pass: the summaries are said and the command
    ends as it would have (0; a sweep with a failed model 1), never a complete run turned into a failure."""

    def __init__(self, models: int):
        self.left = models

    @property
    def finished(self) -> bool:
        return self.left <= 0

    def sigterm(self, signum, frame) -> None:
        if not self.finished:
            raise KeyboardInterrupt

    def done(self, step) -> None:
        self.left -= 1
        _said(step)


def _said(step) -> None:
    """A model's run as it ends (run.session's ``done`` hook): its summary and verdict on stdout."""
    if step.done is None:
        return
    if step.done.outcome.complete and not step.done.outcome.rejudged:  # (a verdict judged again: said by notify)
        echo(f"{step.done.folder} holds this run, complete: nothing to score, nothing written; its results.json is "
             f"shown as it stands, not checked against its samples (`abricot-local report --verify "
             f"{step.done.folder}` or `abricot-local check {step.done.folder}` does)", err=True)
    echo(_done_text(step.done))


def _done_text(done) -> str:
    """A model's run as it ends: its summary, the published verdict, where it is written (not when a
    --resume found it finished, unless it judged its verdict again at another --margin)."""
    from abricot_local import console  # (scipy: once the model is found)

    outcome = done.outcome
    config = outcome.record.config
    at = done.within or done.folder  # a sweep's advice: the sweep's call (its folder), as its resume's
    sequential = console.settled(outcome.record, lambda m: settle_command(at, m, config))
    lines = [console.summary(outcome.record), "", console.verdict(
        outcome.record.published, done.plan.quant, unheld=done.plan.unheld, backend=done.plan.backend,
        grow=None if sequential else (config, lambda m: grow_command(at, m, config)),
        skipped=outcome.record.skipped)]
    lines += ["", sequential] if sequential else []
    if not outcome.complete or outcome.rejudged:
        lines += ["", f"wrote {outcome.path} ({done.seconds:.1f} s)"]
    return "\n".join(lines)


def _exit_interrupted(message: str, code: int = 130) -> None:
    """The run's interruption said, and the exit: 130, or 0 when the signal came once the request's runs were
    all written (run.session.Interrupted.complete: nothing lost, nothing to resume)."""
    from abricot_local.backends import exit_process

    echo(message, err=True)
    exit_process(code)


def said_sweep(request, steps) -> None:
    """The end of a sweep: the comparison table and the pairwise verdicts of the models it finished
    (report.sweep), then the models that failed (exit code 1)."""
    from abricot_local.report.sweep import compared

    folders = [s.folder for s in steps if not s.failed]
    if folders:
        echo("\n".join([f"\n== comparison of {len(folders)} model(s) in {folders[0].parent}",  # the sweep's
                        compared(folders, request.known_models(), flags)]), rendered=True)  # worded as built
    failed = [s for s in steps if s.failed]
    if failed:
        echo("\n".join([f"\n{len(failed)} model(s) failed:", *(f"  {s.model}: {s.failed}" for s in failed)]), err=True)
        sys.exit(1)


def resume_command(out_dir: Path, tasks: tuple[str, ...] = ()) -> str:
    """The command that continues the run, quoted for bash and zsh (errors.shell_word: a space or `$(...)` stays
    one word, a control or bidirectional character is written as its escape inside $'...'); ``tasks``: the run's
    task keys, pinned (:func:`pinned`)."""
    return shell_line(["abricot-local", *resume_argv(out_dir, tasks=tasks)])


def grow_command(out_dir: Path, sample: int, config) -> str:
    """The command that scores ``sample`` items (the verdict's advice), quoted as resume_command: a --sample
    run (``config``, its RunConfig) grown in its folder, a --limit run's items drawn in a new one."""
    args = _dropped(sys.argv[1:], "--sample", "--limit") + ["--sample", str(sample)]
    if config.sample is None:  # a new run, in a new folder
        new = _dropped([a for a in args if a != "--resume"], "--out")
        return shell_line(["abricot-local", *pinned(new, task_keys(config))])
    return shell_line(["abricot-local", *resume_argv(out_dir, args, task_keys(config))])


def settle_command(out_dir: Path, items: int, config=None) -> str:
    """The command that takes a --until-settled run's next look: its folder resumed with --max-items ``items`` (the
    tasks it ran, ``config``'s, named)."""
    args = _dropped(sys.argv[1:], "--sample", "--max-items") + ["--max-items", str(items)]
    return shell_line(["abricot-local", *resume_argv(out_dir, args, task_keys(config))])


def _dropped(args: list[str], *options: str) -> list[str]:
    """``args`` without each of ``options`` and its value (``--sample 20``, ``--sample=20``)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in options:
            skip = True
        elif not a.startswith(tuple(f"{o}=" for o in options)):
            out.append(a)
    return out


def resume_argv(out_dir: Path, argv: list[str] | None = None, tasks: tuple[str, ...] = ()) -> list[str]:
    """This command line (``argv``: another) with --out (if missing) and --resume, :func:`pinned`: what continues
    the run, wherever and whenever it is pasted."""
    args = pinned([a for a in (sys.argv[1:] if argv is None else argv) if a != "--resume"], tasks)
    if not _given(args, "--out"):
        args += pinned(["--out", str(out_dir)])
    return args + ["--resume"]


def pinned(args: list[str], tasks: tuple[str, ...] = ()) -> list[str]:
    """A command line ``args`` as a printed or stored command gives it, to be pasted from any folder at any time:
    without --tasks, the tasks the run resolved (``tasks``, its task keys: those whose data was here then; data
    that lands later would make another run, which its folder refuses) named; and the value of each path option
    (:func:`_path_flags`) and each MODEL read as a file's path (:func:`_models_pinned`) absolute (a relative one names
    a file or folder from a directory recorded nowhere)."""
    flags, out, value_of = _path_flags(), [], None
    for a in _models_pinned(args):
        flag, eq, value = a.partition("=")
        if value_of is not None:
            out.append(_absolute(value_of, a))
            value_of = None
        elif a in flags:
            out.append(a)
            value_of = flags[a]
        elif eq and flag in flags:
            out.append(f"{flag}={_absolute(flags[flag], value)}")
        else:
            out.append(a)
    if tasks and not _given(out, "--tasks"):
        from abricot_local.tasks import base_names

        out += ["--tasks", ",".join(base_names(tasks))]
    return out


def _models_pinned(args: list[str]) -> list[str]:
    """``args`` (a command line as ``sys.argv[1:]`` holds it) with, when it is `run`'s, each MODEL its parse gives
    that models.locate.read_as_path reads as a file's path from this folder made absolute; a registry alias, a
    store's model, a synthetic backend's label and a bare file name found in llama.cpp's cache or a --model-dir
    (found again from any folder) are left as written. Each word that is no flag is parsed as a mark of its place,
    so the MODELs are the words click takes for them, never an option's value."""
    import os

    from abricot_local.models.locate import read_as_path

    if not args or cli.get_command(click.Context(cli), args[0]) is not run:
        return args
    ctx = click.Context(run, info_name=args[0], resilient_parsing=True)
    words = args[1:]
    marked = [w if w.startswith("-") else f"\0{i}" for i, w in enumerate(words)]  # each word its place's mark
    places = {m: i for i, m in enumerate(marked) if m.startswith("\0")}
    parsed, _, _ = run.make_parser(ctx).parse_args(list(marked))  # (the parser takes the words off its list)
    backend = parsed.get("backend")
    if backend in places:
        backend = words[places[backend]]
    if backend is None:
        backend = next(p for p in run.params if p.name == "backend").get_default(ctx)
    out = list(words)
    for mark in parsed.get("models", ()):
        if mark not in places:  # (a word after `--` that starts with -: left as written)
            continue
        name = words[places[mark]]
        if read_as_path(name, backend) and not os.path.isabs(os.path.expanduser(name)):
            out[places[mark]] = os.path.abspath(name)
    return [args[0], *out]


def _given(args: list[str], flag: str) -> bool:
    return flag in args or any(a.startswith(f"{flag}=") for a in args)


def _path_flags() -> dict[str, object]:
    """`run`'s options that name a path, by flag: each option field declared a path (option_fields.Spec.path), or
    whose value is written with a PATH in it (its metavar: --data's TASK=PATH)."""
    from abricot_local.backends import option_specs
    from abricot_local.option_fields import specs
    from abricot_local.run.request import RunOptions, SettleOptions
    from abricot_local.tasks.base import TaskOptions

    every = [*specs(TaskOptions), *specs(RunOptions), *specs(SettleOptions), *(s for s, _ in option_specs())]
    return {s.flag_name: s for s in every if s.flag and (s.path or "PATH" in s.metavar)}


def _absolute(spec, value: str) -> str:
    """A path option's value made absolute (after the ``=`` of a KEY=PATH one, as its metavar writes it); a path
    that is absolute once its ``~`` is expanded is left as written."""
    import os

    key, eq, path = value.partition("=") if "=" in spec.metavar else ("", "", value)
    if not path or os.path.isabs(os.path.expanduser(path)):
        return value
    return f"{key}{eq}{os.path.abspath(path)}"
