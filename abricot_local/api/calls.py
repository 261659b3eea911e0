"""The Python API's calls, each the path its command takes: ``evaluate`` is `run` (the same plan,
lock, checkpoint, resume, record and refusals: evaluation/session.py), ``plan`` is `run --dry-run`
(planner/dry_run.py), ``compare`` is `compare` (analysis/compare.py), ``load_run``/``load_runs`` read
finished runs (record/). Nothing prints: progress is a tqdm.auto bar (none with progress=False),
what a run says is a Python warning (AbricotWarning), a failure an AbricotError."""

from __future__ import annotations

import os
import warnings
from datetime import datetime, timezone
from pathlib import Path

from abricot_local.api.comparison import Comparison, check_alpha, compare_folders, folders_of
from abricot_local.api.arguments import check_call
from abricot_local.api.options import AbricotWarning, keyword_hints, progress_bars, run_kw, warn
from abricot_local.api.run import Run, load_runs  # noqa: F401  (the API's)
from abricot_local.core import DEFAULT_SEED
from abricot_local.errors import AbricotError


PathLike = os.PathLike  # a Path, or any path object
Models = str | PathLike | list[str | PathLike] | tuple[str | PathLike, ...]  # one model, or a sweep's
Tasks = str | list[str] | tuple[str, ...] | None
Quants = str | list[str] | tuple[str, ...] | None


class SweepError(AbricotError):
    """Some models of a sweep failed (each named with its error); ``runs``: those that finished."""

    exit_code = 1

    def __init__(self, failed: list[tuple[str, str]], runs: list[Run]):
        self.failed, self.runs = failed, runs
        lines = [f"{len(failed)} model(s) failed:"] + [f"  {model}: {why}" for model, why in failed]
        super().__init__("\n".join(lines))


def _models(model) -> list[str]:
    return [str(model)] if isinstance(model, (str, Path)) else [str(m) for m in model]


def _quants(models: list[str], quants, kw: dict) -> list[str]:
    """``quants`` given: the one model's quants as the registry's aliases (models/quants.py, as `run --quants`)."""
    if quants is None:
        return models
    from abricot_local.models.quants import expand

    return list(expand(models, quants if isinstance(quants, str) else ",".join(quants), kw["models_file"]))


def _resume_hint(folder: Path) -> str:
    return f"abricot_local.evaluate(..., out={str(folder)!r}, resume=True)"


@keyword_hints
def evaluate(model: Models, tasks: Tasks = None, *, sample: int | None = None, limit: int | None = None,
             shard: str | None = None, protocol: str | None = None, out: str | PathLike | None = None,
             resume: bool = False, progress: bool = True, quants: Quants = None, **options):
    """Score ``model`` (anything `run` takes: an alias, a .gguf path, ollama:NAME...) on ``tasks``
    (a name, "a,b", a list; None: every task whose data is here or can be fetched), as
    ``abricot-local run`` does; a list of models runs a sweep into ``out`` (one folder per model).
    ``options``: the tasks' and the backends' option fields by name (``seed``, ``shots``,
    ``data_dir``, ``data``, ``threads``, ``n_ctx``, ``backend``, ``force``, ``prompt_variant="all"``...);
    ``quants`` ("Q4_K_M,Q8_0" or a list, as the registry names them): ``model``'s quants, a sweep
    (`run --quants`). Returns the Run
    (a sweep: a list of Runs). Ctrl-C leaves the run INTERRUPTED: the same call with
    ``resume=True`` (and its ``out``) continues it."""
    from abricot_local.evaluation import session
    from abricot_local.evaluation.arguments import check_counts, limit_caution
    from abricot_local.evaluation.planning import Shard

    check_call(evaluate, locals())
    kw = run_kw(tasks, protocol, options)
    force = bool(options.get("force", False))
    check_counts(limit, sample, resume, out)
    if limit is not None:
        warnings.warn(limit_caution(limit), AbricotWarning, stacklevel=2)
    models = _quants(_models(model), quants, kw)
    if not models:
        raise AbricotError("evaluate needs a model")
    if len(models) == 1:  # a name nothing knows: refused before the plan, the data or llama.cpp load
        from abricot_local.models.ref import require_known

        require_known(models[0], backend=kw["backend"], models_file=kw["models_file"], model_dirs=kw["model_dirs"])
    args = dict(limit=limit, sample=sample, shard=Shard.parse(shard), force=force, kw=kw)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")

    def one(name: str, folder: Path | None, again: bool) -> Run:
        bar, close = progress_bars(progress)
        hooks = session.Hooks(warn=warn, progress=bar, resume_hint=_resume_hint,
                              say=lambda line: warnings.warn(line.strip(), AbricotWarning, stacklevel=2))
        try:
            done = session.run_model(name, folder, again, stamp=stamp, hooks=hooks, **args)
        finally:
            close()
        return Run(done.outcome.path.parent, done.outcome.record)

    if len(models) == 1:
        return one(models[0], Path(out) if out else None, resume)
    root = Path(out) if out else Path("results") / f"sweep-{stamp}"
    done, failed = session.sweep(models, root, resume, one, say=lambda line: None)
    runs = [Run.load(f) for f in done]
    if failed:
        raise SweepError(failed, runs)
    return runs


@keyword_hints
def plan(model: Models, tasks: Tasks = None, *, sample: int | None = None, limit: int | None = None,
         shard: str | None = None, protocol: str | None = None, calibrate: bool = False, quants: Quants = None,
         **options):
    """What ``evaluate`` with these arguments would do, before it does it: ``run --dry-run``'s
    plan (planner.dry_run.DryRun: items, tokens, download, memory, predicted time; ``to_json()``);
    nothing scored, written or downloaded."""
    from abricot_local.evaluation.arguments import check_counts
    from abricot_local.evaluation.planning import Shard
    from abricot_local.planner import dry_run

    check_call(plan, locals())
    kw = run_kw(tasks, protocol, options)
    check_counts(limit, sample, False, None)
    models = _quants(_models(model), quants, kw)
    if len(models) == 1:
        from abricot_local.models.ref import require_known

        require_known(models[0], backend=kw["backend"], models_file=kw["models_file"], model_dirs=kw["model_dirs"])
    return dry_run.plan_of(models, limit=limit, sample=sample, shard=Shard.parse(shard), kw=kw, calibrate=calibrate,
                           with_memory=True, keep_going=len(models) > 1)


@keyword_hints
def load_run(path: str | PathLike, *, data: dict | None = None) -> Run:
    """A finished run folder (its results.json and samples files, validated), or an lm-eval output
    folder or results file (docs/compare.md): its items matched to the tasks' own, whose data is
    found where `run` finds it, or in ``data`` ({"discotex": PATH}, as `run --data`)."""
    if data is not None and not (isinstance(data, dict) and all(isinstance(k, str) for k in data)):
        raise AbricotError(f"data must be a dict of data key -> path ({{'discotex': 'DIR'}}), got "
                           f"{type(data).__name__}")
    check_call(load_run, locals())
    return Run.load(path, tuple((k, str(v)) for k, v in (data or {}).items()))


@keyword_hints
def compare(*runs: Run | str | PathLike | list | tuple, tolerance: float | None = None, alpha: float = 0.05,
            seed: int = DEFAULT_SEED, margin: float | None = None, reference: str | None = None,
            near_tie: float | None = None, models_file: str | PathLike | None = None) -> Comparison:
    """`compare` of finished runs (Run objects, run folders, or folders holding runs): the items
    they share, paired differences with their CI and test, one verdict per pair."""
    from abricot_local.analysis.compare import TOLERANCE
    from abricot_local.errors import UsageError
    from abricot_local.models.registry import load_registry

    check_call(compare, locals())
    check_alpha(alpha)
    if not runs:
        raise UsageError("compare needs at least two runs: give two run folders, or a folder holding them")
    folders = folders_of(runs)
    result = compare_folders([str(f) for f in folders], registry=load_registry(models_file),
                             tolerance=TOLERANCE if tolerance is None else tolerance, alpha=alpha, seed=seed,
                             margin=margin, reference=reference, **({} if near_tie is None else {"near_tie": near_tie}))
    return Comparison(result)
