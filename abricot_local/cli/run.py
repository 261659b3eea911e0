"""`run`: one model, or several one after another (a sweep), with Ctrl-C/SIGTERM saved for --resume."""

from __future__ import annotations

import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import click

from abricot_local.cli.app import cli, echo
from abricot_local.cli.options import backend_options, given_opts, task_options, task_opts
from abricot_local.cli.progress import progress as make_progress
from abricot_local.errors import AbricotError, UsageError


@cli.command()
@click.argument("models", nargs=-1, required=True, metavar="MODEL [MODEL ...]")
@task_options
@backend_options
@click.option("--limit", type=int, default=None, help="Score only the first N items of each task (release order).")
@click.option("--sample", type=int, default=None, help="Score N items of each task drawn with --seed (release order kept).")
@click.option("--shard", default=None, metavar="K/N", help="Score only the K-th of N disjoint parts of each task's items "
              "(after --limit/--sample); `merge` joins the parts.")
@click.option("--out", type=click.Path(), default=None,
              help="Output folder (default results/<model>/<time>/; several models: results/<sweep>/<model>/).")
@click.option("--resume", is_flag=True, help="Continue an interrupted run (or sweep) in --out.")
@click.option("--force", is_flag=True, help="Run even if the model seems not to fit in memory or on disk.")
@click.option("--dry-run", is_flag=True, help="Print the plan (items, tokens, download, memory, predicted time on "
              "this machine) and stop: nothing is scored, written or downloaded.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: the plan as JSON.")
@click.option("--calibrate", is_flag=True, help="With --dry-run: first time each model that is on this machine "
              "(a few seconds after its load), cached for later plans.")
def run(models: tuple[str, ...], limit: int | None, sample: int | None, shard: str | None, out: str | None,
        resume: bool, force: bool, dry_run: bool, as_json: bool, calibrate: bool, **kw) -> None:
    """Score MODEL (a registry alias, a .gguf path, ollama:NAME[:TAG], lmstudio:PUBLISHER/REPO[/FILE],
    hf:OWNER/REPO[:QUANT] or a file in --model-dir / llama.cpp's cache) on the tasks; write results to --out.

    Several MODELs run one after another into one sweep folder, then a comparison table;
    a model that fails is reported and the others go on."""
    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    if sample is not None and (sample < 1 or limit is not None):
        raise UsageError("--sample must be at least 1 and cannot be combined with --limit")
    if resume and not out:
        raise UsageError("--resume needs the --out folder of the run to continue")
    if (as_json or calibrate) and not dry_run:
        raise UsageError("--json and --calibrate go with --dry-run")
    if limit is not None:
        echo(f"caution: --limit {limit} scores the first {limit} items of each task in release order, "
                   "which may not represent the task (use --sample N for a seeded draw)", err=True)
    if len(models) == 1:  # a name nothing knows: refused before the plan, the data or llama.cpp load
        from abricot_local.models.ref import require_known

        require_known(models[0], backend=kw["backend"], models_file=kw["models_file"], model_dirs=kw["model_dirs"])
    from abricot_local.evaluation.planning import Shard

    args = dict(limit=limit, sample=sample, shard=Shard.parse(shard), force=force, kw=kw)
    from abricot_local.cli.plan import announce, show

    if dry_run:
        return show(models, as_json=as_json, calibrate=calibrate, limit=limit, sample=sample, shard=args["shard"],
                    kw=kw)
    term = signal.signal(signal.SIGTERM, _sigterm)
    try:
        announce(models, limit=limit, sample=sample, shard=args["shard"], kw=kw)
    except KeyboardInterrupt:
        _interrupted(None, None)
    finally:
        signal.signal(signal.SIGTERM, term)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    if len(models) == 1:
        run_one(models[0], Path(out) if out else None, resume, stamp=stamp, **args)
        return
    sweep(models, Path(out) if out else Path("results") / f"sweep-{stamp}", resume, stamp=stamp, **args)


def run_one(model: str, out_dir: Path | None, resume: bool, *, limit, sample, shard, force, kw, stamp: str):
    """One model: plan, load, score, write; the summary and the published verdict. Ctrl-C or
    SIGTERM at any moment (planning, hashing, loading, scoring) ends it with exit code 130."""
    from abricot_local import console
    from abricot_local.evaluation import planning, runner
    from abricot_local.backends.llama_cpp import interrupts

    progress, close = make_progress()
    term = signal.signal(signal.SIGTERM, _sigterm)
    plan = None
    state = {"out": out_dir}

    def stuck(_signum: int) -> None:  # llama.cpp did not return after a signal: the process ends now
        echo(_save_interrupted(plan, state["out"]), err=True)

    forget = interrupts.on_stuck(stuck)
    try:
        plan = planning.plan_run(
            model=model, given=given_opts(kw), task_spec=kw["tasks"], task_options=task_opts(kw), limit=limit,
            models_file=kw["models_file"], force=force, sample=sample, shard=shard,
            notify=lambda line: echo(line, err=True), fresh=resume, model_dirs=kw["model_dirs"],
        )
        out_dir = state["out"] = out_dir or Path("results") / plan.model_label / stamp
        _watch_remote(plan, out_dir)
        for s in plan.skipped:
            echo(f"skipped {s.task}: no data ({s.how})", err=True)
        for r in plan.runs:
            for note in r.notes:
                echo(f"warning: {r.task.key}: {note}", err=True)

        def loaded(backend) -> None:
            echo(console.start_line(plan, backend.start_facts(), backend.provenance().kernels), err=True)

        started = time.perf_counter()
        outcome = runner.execute(plan, out_dir, resume=resume, progress=progress, on_loaded=loaded)
    except KeyboardInterrupt:
        close()
        _interrupted(plan, out_dir)
    finally:
        close()
        forget()
        signal.signal(signal.SIGTERM, term)
    if outcome.complete:
        echo(f"{out_dir} holds this run, complete: nothing to score, nothing written", err=True)
    echo(console.summary(outcome.record))
    echo("")
    echo(console.verdict(outcome.record.published, plan.quant if plan else ""))
    if not outcome.complete:
        echo(f"\nwrote {outcome.path} ({time.perf_counter() - started:.1f} s)")
    return outcome


def _interrupted(plan, out_dir: Path | None) -> None:
    """Say what is saved and how to go on (the resume command only when there is a run to
    resume), leave the folder INTERRUPTED, and exit 130."""
    from abricot_local.backends.llama_cpp import interrupts

    echo(_save_interrupted(plan, out_dir), err=True)
    interrupts.exit_process(130)


def _save_interrupted(plan, out_dir: Path | None) -> str:
    """Leave the folder INTERRUPTED (through the OutputDir this process holds, when a signal
    ends it from the watchdog thread while llama.cpp does not return), and the text to say."""
    from abricot_local.evaluation.results import INTERRUPTED, OutputDir, held, items_text, saved_counts

    holding = held(out_dir) if out_dir else None
    if out_dir is None or not _resumable(out_dir):
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
            f"resume with: abricot-local {' '.join(resume_argv(out_dir))}")


def _resumable(out_dir: Path) -> bool:
    """Whether ``out_dir`` holds a run that --resume continues (its recorded manifest)."""
    from abricot_local.evaluation.results import CHECKPOINT

    return (out_dir / CHECKPOINT / "run.json").is_file()


def sweep(models, root: Path, resume: bool, *, stamp: str, **args) -> None:
    """Several models one after another, each into root/<model>/; failures reported at the end."""
    from abricot_local.report import tables as rep
    from abricot_local.models.registry import load_registry
    from abricot_local.evaluation.results import RESULTS

    done, failed = [], []
    for model in models:
        folder = root / slug(model)
        echo(f"== {model} -> {folder}", err=True)
        if resume and (folder / RESULTS).exists():
            echo(f"{model}: already complete", err=True)
            done.append(folder)
            continue
        try:
            run_one(model, folder, resume and folder.exists(), stamp=stamp, **args)
            done.append(folder)
        except AbricotError as err:
            echo(f"error: {model}: {err}", err=True)
            failed.append((model, str(err)))
    if done:
        registry = load_registry(args["kw"]["models_file"])
        echo(f"\n== comparison of {len(done)} model(s) in {root}")
        echo(rep.render(rep.build([str(f) for f in done], registry=registry)))
        if len(done) > 1:
            echo("\n" + pairwise_verdicts(done, registry))
    if failed:
        echo(f"\n{len(failed)} model(s) failed:", err=True)
        for model, why in failed:
            echo(f"  {model}: {why}", err=True)
        sys.exit(1)


def pairwise_verdicts(folders, registry) -> str:
    """The end of a sweep: one verdict line per pair of runs (`compare` gives the details)."""
    from abricot_local.analysis import compare as cmp
    from abricot_local.report.comparison import verdict_text
    from abricot_local.errors import ResultsError

    try:
        return verdict_text(cmp.compare([cmp.view_of(f, registry) for f in folders]))
    except ResultsError as err:
        return f"pairwise verdicts: none ({err})"


def slug(model: str) -> str:
    import re

    name = Path(model).name.removesuffix(".gguf") if model.lower().endswith(".gguf") else model
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def resume_argv(out_dir: Path) -> list[str]:
    """This command line with --out (if missing) and --resume: what continues the run."""
    args = [a for a in sys.argv[1:] if a != "--resume"]
    if "--out" not in args and not any(a.startswith("--out=") for a in args):
        args += ["--out", str(out_dir)]
    return args + ["--resume"]


def _watch_remote(plan, out_dir: Path) -> None:
    """A backend whose remote devices end the process when they go away (llama.cpp's RPC servers)
    calls ``lost``: say which one in one line, and how to go on."""
    import os

    from abricot_local.backends import backend_class

    def lost(err: AbricotError) -> None:
        from abricot_local.evaluation.results import RUNNING, held

        holding = held(out_dir)
        if holding is not None:  # no RUNNING marker left: the folder says why it stopped
            if (out_dir / RUNNING).is_file():
                holding.failed(str(err))
            holding.release()
        kept = _resumable(out_dir)
        then = (f"every item scored so far is kept in {out_dir}; once it is back, resume with: "
                f"abricot-local {' '.join(resume_argv(out_dir))}" if kept else "run again once it is back")
        echo(f"\nerror: {err}\n{then}", err=True)
        sys.stderr.flush()
        os._exit(err.exit_code)

    backend_class(plan.backend).watch_remote(plan.backend_options, lost)
