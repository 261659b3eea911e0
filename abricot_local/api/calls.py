"""The Python API's calls, each the path its command takes: ``evaluate`` is `run` (the same plan,
lock, checkpoint, resume, record and refusals: run/session.py), ``plan`` is `run --dry-run`
(run/dry_run.py); ``compare`` (api/comparison.py) is `compare`, ``load_run``/``load_runs``
(api/run.py) read finished runs. Nothing prints: progress is a tqdm.auto bar (none with progress=False),
what a run says is a Python warning (AbricotWarning), a failure an AbricotError."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, fields
from pathlib import Path

from abricot_local.analysis.runs import Run
from abricot_local.api.arguments import entry
from abricot_local.api.options import progress_bars, refuse_unknown, warn
from abricot_local.api.words import said, words_of
from abricot_local.errors import AbricotError
from abricot_local.record.settings import task_keys
from abricot_local.run.dry_plan import DryRun


PathLike = os.PathLike  # a Path, or any path object
Models = str | PathLike | list[str | PathLike] | tuple[str | PathLike, ...]  # one model, or a sweep's
Tasks = str | list[str] | tuple[str, ...] | None
Quants = str | list[str] | tuple[str, ...] | None


class SweepError(AbricotError):
    """Some models of a sweep failed (each named with its error); ``runs``: those that finished."""

    exit_code = 1

    def __init__(self, failed: list[tuple[str, str]], runs: list[Run]):
        self.failed = [(model, said(why)) for model, why in failed]  # in the API's words (evaluate's)
        self.runs = runs
        lines = [f"{len(failed)} model(s) failed:"] + [f"  {model}: {why}" for model, why in self.failed]
        super().__init__("\n".join(lines))


@dataclass(frozen=True, repr=False)
class Plan(DryRun):
    """``plan``'s answer: `run --dry-run`'s plan (a run.dry_plan.DryRun: ``models``, ``to_json()``), shown as
    the command prints it (``str``; a notebook's cell: the same text), ``repr`` in one line (naming the models and
    tasks that have a problem)."""

    def __repr__(self) -> str:
        from abricot_local.console.plan import _time

        items = sum(t.items for m in self.models for t in m.tasks)
        time = "time unknown" if self.seconds is None else f"about {_time(self.seconds)}"
        return f"Plan({', '.join(m.label for m in self.models)}: {items:,} items, {time}{self._problems()})"

    def _problems(self) -> str:
        """What the repr adds when the run would not go as planned: the models and tasks that have a problem
        (a model that cannot be planned, one the run refuses as planned: its memory, a prompt over n_ctx...), each
        line of which ``print(plan)`` shows."""
        said = [m.label for m in self.models if m.problem or m.refused]  # (refused: the run's memory check)
        said += [f"{m.label} {t.task}" if len(self.models) > 1 else t.task
                 for m in self.models if not m.problem for t in m.tasks if t.problem]
        if not said:
            return ""
        return f"; a problem in {', '.join(said)} (print the plan: its lines say what)"

    def __str__(self) -> str:
        from abricot_local.console.plan import full

        return said(full(self), "plan")  # in the API's words (plan's)

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(str(self))}</pre>"


def _models(model) -> list[str]:
    """One model or a sweep's, each as text (a path object, any os.PathLike, by os.fspath)."""
    return [os.fspath(m) for m in ([model] if isinstance(model, (str, os.PathLike)) else model)]


def _request(call, model, tasks, protocol, options: dict, **selection):
    """The run.request.RunRequest of ``call``'s arguments, typed as given (``quants``: a text or a list of
    the registry's quant names, as `run --quants`), refused as `run` refuses them."""
    from abricot_local.run.request import request_of

    refuse_unknown(options, call, evaluate)
    return request_of(_models(model), {**options, "protocol": protocol},  # the run's options by field name too
                      tasks=",".join(tasks) if isinstance(tasks, (list, tuple)) else tasks,
                      backend=options.get("backend"), listed=not isinstance(model, (str, os.PathLike)),  # a sweep
                      **selection)


def _named(tasks: tuple[str, ...], pin: bool) -> str:
    """The ``tasks=`` argument of a call that goes on from a run (its resume, grow or next look): the tasks it resolved
    (``tasks``, its task keys) named where the call named none (``pin``), as `run`'s printed commands add --tasks (data
    that lands later makes no other run of it); "" otherwise."""
    from abricot_local.tasks import base_names

    named = list(base_names(tasks)) if pin else []
    return f"tasks={named!r}, " if named else ""


def _resume_hint(folder: Path, tasks: tuple[str, ...] = (), *, pin: bool = True) -> str:
    """The call that resumes the run in ``folder`` (absolute: a state file keeps it), naming the tasks it resolved
    (``tasks``, its task keys) where the call named none (``pin``): data that lands later makes no other run of it."""
    return f"abricot_local.evaluate(..., {_named(tasks, pin)}out={os.path.abspath(folder)!r}, resume=True)"


def _grow_hint(folder: Path, sample: int, config, *, pin: bool = True) -> str:
    """The call that scores ``sample`` items (the verdict's advice): a sample run grown, a limit run drawn anew; the
    tasks ``config`` (its record.RunConfig) records named where the call named none (``pin``)."""
    named = _named(task_keys(config), pin)
    if config.sample is None:
        return f"abricot_local.evaluate(..., {named}sample={sample})"
    return f"abricot_local.evaluate(..., {named}out={os.path.abspath(folder)!r}, resume=True, sample={sample})"


def _advise(done, *, pin: bool = True) -> None:
    """The verdict's advice of a finished model's run, as a warning: the call that settles a row that cannot tell yet,
    naming the tasks the run resolved where the call named none (``pin``)."""
    from abricot_local.analysis.reproduction import grow_advice
    from abricot_local.run import settle_record

    record, at = done.outcome.record, done.within or done.folder  # a sweep's: the sweep's folder, as its resume's
    if record.config is not None and record.config.until_settled:  # the rule's next look, not a fixed-n sample
        named = _named(task_keys(record.config), pin)
        advice = settle_record.advice(record, lambda m: f"abricot_local.evaluate(..., {named}out="
                                                 f"{os.path.abspath(at)!r}, resume=True, until_settled=True, "
                                                 f"max_items={m})")
    else:
        advice = grow_advice(record.published, record.config, lambda m: _grow_hint(at, m, record.config, pin=pin))
    if advice:
        warn(advice.replace("\n  ", " "))


def _not_checked(record) -> None:
    """A warning per task the published rows name that the run did not run (`run`'s lines: console.not_run), in
    the API's words: a skipped task's recorded ``how`` is in the command line's, so the options that give data
    are named instead."""
    from dataclasses import replace

    from abricot_local.console import not_run

    if record.published is not None:
        for line in not_run(record.published, tuple(replace(s, how="") for s in record.skipped)):
            warn(line)


@entry
def evaluate(model: Models, tasks: Tasks = None, *, sample: int | None = None, limit: int | None = None,
             shard: str | None = None, protocol: str | None = None, out: str | PathLike | None = None,
             resume: bool = False, progress: bool = True, quants: Quants = None, **options):
    """Score ``model`` (anything `run` takes: an alias, a .gguf path, ollama:NAME...) on ``tasks``
    (a name, "a,b", a list; None: every task whose data is here or can be fetched; "" or [] refused), as
    ``abricot-local run`` does; a list of models runs a sweep into ``out`` (one folder per model).
    ``options``: the tasks' and the backends' option fields by name (``seed``, ``shots``,
    ``data_dir``, ``data``, ``threads``, ``n_ctx``, ``backend``, ``force``, ``prompt_variant="all"``...);
    ``quants`` ("Q4_K_M,Q8_0" or a list, as the registry names them): ``model``'s quants, a sweep
    (`run --quants`). Returns the Run
    (a sweep: a list of Runs). Ctrl-C leaves the run INTERRUPTED: the same call with
    ``resume=True`` (and its ``out``) continues it."""
    from abricot_local.run import session

    request = _request(evaluate, model, tasks, protocol, options, limit=limit, sample=sample, shard=shard, out=out,
                       resume=resume, quants=quants)
    if request.caution:
        warn(request.caution)
    hint = functools.partial(_resume_hint, pin=tasks is None)  # the tasks it resolved named, where none were given
    hooks = session.Hooks(warn=warn, progress=lambda: progress_bars(progress), resume_hint=hint, say=warn)
    steps = list(session.run(request, hooks))
    for step in steps:
        if step.done is not None:
            for task, line in step.done.outcome.warnings:  # what its numbers may mislead by (`run`: under its summary)
                warn(f"{task}: {line}")
            _not_checked(step.done.outcome.record)
            _advise(step.done, pin=tasks is None)
    if not request.sweep:  # (a list of one model is a sweep too: a list back)
        return Run(steps[0].done.outcome.path.parent, steps[0].done.outcome.record)
    from abricot_local.analysis.loading import load_run

    runs = [load_run(s.folder) for s in steps if not s.failed]
    failed = [(s.model, s.failed) for s in steps if s.failed]
    if failed:
        raise SweepError(failed, runs)
    return runs


@entry
def plan(model: Models, tasks: Tasks = None, *, sample: int | None = None, limit: int | None = None,
         shard: str | None = None, protocol: str | None = None, calibrate: bool = False, quants: Quants = None,
         **options):
    """What ``evaluate`` with these arguments would do, before it does it: ``run --dry-run``'s
    plan (a Plan, run.dry_plan.DryRun's: items, tokens, download, memory, predicted time; ``to_json()``;
    ``print`` it for the command's text); nothing scored, written or downloaded, but with ``calibrate``: the model
    timed here, its speed written into the cache (calibrations.json), as `run --dry-run --calibrate`."""
    from abricot_local.run import dry_run

    request = _request(plan, model, tasks, protocol, options, limit=limit, sample=sample, shard=shard, quants=quants)
    made = dry_run.plan_of(request, calibrate=calibrate, with_memory=True).rendered(words_of("plan"))
    return Plan(**{f.name: getattr(made, f.name) for f in fields(made)})
