"""One `run` of one model or of several (a sweep), as the command line and the Python API both
make it: the plan, the output folder (lock, checkpoint, resume, refusals), the remote devices
watched, Ctrl-C saved for a resume. No printing: what a run says goes through :class:`Hooks`."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from abricot_local.errors import AbricotError
from abricot_local.names import path_part


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, as the CLI turns it) ended a run: its folder is left INTERRUPTED, and
    ``message`` says what is saved and how to go on."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Hooks:
    """What a run tells its caller: ``notify`` (the plan's lines: downloads), ``warn`` (a task
    skipped, a task's note: one line each, as the CLI prints them), ``progress`` (task, done,
    total), ``on_loaded`` (plan, backend: the model is open), ``resume_hint`` (folder -> the call
    that continues a run in it), ``say`` (the lines that leave the process: a lost RPC server)."""

    notify: Callable[[str], None] = lambda line: None
    warn: Callable[[str], None] = lambda line: None
    progress: Callable[[str, int, int], None] | None = None
    on_loaded: Callable[[object, object], None] | None = None
    resume_hint: Callable[[Path], str] = lambda folder: shlex.join(["--out", str(folder), "--resume"])
    say: Callable[[str], None] = lambda line: None


@dataclass(frozen=True)
class Done:
    plan: object  # run.planning.RunPlan
    outcome: object  # run.runner.Outcome
    folder: Path
    seconds: float  # from the output folder taken to the record written


def run_model(request, model: str, out_dir: Path | None, resume: bool, *, hooks: Hooks) -> Done:
    """One model of ``request`` (an run.request.RunRequest): plan, load, score, write into
    ``out_dir`` (None: results/<model>/<stamp>). Ctrl-C (KeyboardInterrupt) at any moment
    (planning, hashing, loading, scoring) leaves the folder INTERRUPTED and raises :class:`Interrupted`."""
    from abricot_local import backends
    from abricot_local.run import planning, runner

    plan = None
    state = {"out": out_dir}

    def stuck(_signum: int) -> None:  # the backend did not return after a signal: the process ends now
        hooks.say(save_interrupted(plan, state["out"], hooks.resume_hint))

    forget = backends.on_stuck(stuck)
    try:
        r = request
        plan = planning.plan_run(
            model=model, given=r.given, task_spec=r.task_spec, task_options=r.task_options, limit=r.limit,
            models_file=r.models_file, force=r.force, sample=r.sample, shard=r.shard,
            notify=hooks.notify, fresh=resume, model_dirs=r.model_dirs, margin=r.margin,
        )
        out_dir = state["out"] = out_dir or Path("results") / path_part(plan.model_label, "model") / r.stamp
        watch_remote(plan, out_dir, hooks)
        for s in plan.skipped:
            hooks.warn(f"skipped {s.task}: no data ({s.how})")
        for r in plan.runs:
            for note in r.notes:
                hooks.warn(f"warning: {r.task.key}: {note}")

        def loaded(backend) -> None:
            if hooks.on_loaded:
                hooks.on_loaded(plan, backend)

        started = time.perf_counter()
        outcome = runner.execute(plan, out_dir, resume=resume, progress=hooks.progress, on_loaded=loaded)
    except KeyboardInterrupt as err:
        raise Interrupted(save_interrupted(plan, out_dir, hooks.resume_hint)) from err
    finally:
        forget()
    return Done(plan, outcome, out_dir, time.perf_counter() - started)


def save_interrupted(plan, out_dir: Path | None, resume_hint: Callable[[Path], str]) -> str:
    """Leave the folder INTERRUPTED (through the OutputDir this process holds, when a signal
    ends it from the watchdog thread while llama.cpp does not return), and the text to say."""
    from abricot_local.run.results import INTERRUPTED, RESULTS, OutputDir, held, items_text, saved_counts

    holding = held(out_dir) if out_dir else None
    if out_dir is not None and (out_dir / RESULTS).is_file():  # the signal came once the run was written
        if holding is not None:
            holding.release()
        return f"\ninterrupted: the run in {out_dir} is complete (results.json is written)"
    if out_dir is None or not resumable(out_dir):
        if holding is not None:
            holding.release()  # no lock file, and no folder this run left empty
        where = f" (no run folder at {out_dir})" if out_dir and not out_dir.exists() else ""
        return f"\ninterrupted: nothing scored yet, nothing to resume{where}; run the same command again to start"
    totals = {r.task.key: len(r.items) for r in plan.runs} if plan else {}
    if holding is not None:
        try:
            if not getattr(holding, "totals", None):
                holding.running(totals)
            holding.interrupted()
        except AbricotError:
            pass  # the state file is a courtesy; the checkpoint is what counts
        holding.release()
    elif not (out_dir / INTERRUPTED).exists():  # stopped before scoring began (a resume, loading)
        try:
            with OutputDir(out_dir) as folder:
                folder.running(totals)
                folder.interrupted()
        except AbricotError:
            pass  # another run holds the folder: its state is its own
    saved = saved_counts(out_dir)  # what is on disk (a resume's earlier items too)
    what = items_text(saved, totals) if any(saved.values()) else "nothing scored yet"
    return (f"\ninterrupted: {what} saved in {out_dir}.\n"
            f"resume with: {resume_hint(out_dir)}")


def resumable(out_dir: Path) -> bool:
    """Whether ``out_dir`` holds a run that --resume continues (its recorded manifest)."""
    from abricot_local.run.results import CHECKPOINT

    return (out_dir / CHECKPOINT / "run.json").is_file()


def sweep(models, root: Path, resume: bool, run_one: Callable[[str, Path, bool], object],
          say: Callable[[str], None]) -> tuple[list[Path], list[tuple[str, str]]]:
    """Several models one after another, each into root/<model>/ (``run_one(model, folder,
    resume)``); a model that fails is said and the others go on: (folders done, (model, why) failed)."""
    from abricot_local.run.results import RESULTS

    done, failed = [], []
    for model in models:
        folder = root / slug(model)
        say(f"== {model} -> {folder}")
        if resume and (folder / RESULTS).exists():
            _tidy(folder)
            say(f"{model}: already complete")
            done.append(folder)
            continue
        try:
            run_one(model, folder, resume and folder.exists())
            done.append(folder)
        except AbricotError as err:
            say(f"error: {model}: {err}")
            failed.append((model, str(err)))
    return done, failed


def _tidy(folder: Path) -> None:
    """What a signal or a kill left beside a finished run's results.json, removed (results.tidy_finished)."""
    from abricot_local.run.results import tidy_finished
    from abricot_local.record import read_run

    try:
        tidy_finished(folder, read_run(folder))
    except AbricotError:
        pass  # a damaged record: `runs` and `check` say what is wrong with it


def slug(model: str) -> str:
    import re

    name = Path(model).name.removesuffix(".gguf") if model.lower().endswith(".gguf") else model
    return path_part(re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._"), "model")


def watch_remote(plan, out_dir: Path, hooks: Hooks) -> None:
    """A backend whose remote devices end the process when they go away (llama.cpp's RPC servers)
    calls ``lost``: say which one in one line, and how to go on."""
    import os
    import sys

    from abricot_local.backends import backend_class

    def lost(err: AbricotError) -> None:
        from abricot_local.run.results import RUNNING, held

        holding = held(out_dir)
        if holding is not None:  # no RUNNING marker left: the folder says why it stopped
            if (out_dir / RUNNING).is_file():
                holding.failed(str(err))
            holding.release()
        kept = resumable(out_dir)
        then = (f"every item scored so far is kept in {out_dir}; once it is back, resume with: "
                f"{hooks.resume_hint(out_dir)}" if kept else "run again once it is back")
        hooks.say(f"\nerror: {err}\n{then}")
        sys.stderr.flush()
        os._exit(err.exit_code)

    backend_class(plan.backend).watch_remote(plan.backend_options, lost)
