"""A run as asked for, typed: built once from the command line's or the API's values (``kw``: the
option values by name, run.arguments) with `run`'s first refusals, and what every door then
passes on (session.run_model, run.dry_run.plan_of). No printing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from abricot_local.run.arguments import check_counts, given_opts, limit_caution, margin_of, task_opts
from abricot_local.errors import UsageError

if TYPE_CHECKING:  # loaded once the request holds together: an unknown name is refused before them
    from abricot_local.run.planning import Shard
    from abricot_local.models.given import Given
    from abricot_local.tasks.base import TaskOptions


@dataclass(frozen=True)
class RunRequest:
    """The models (several: a sweep), the tasks (``task_spec``: --tasks as given, None: every task
    whose data is here) and their options, the backend options given, the item selection, the
    folder, and the time that names default folders."""

    models: tuple[str, ...]
    given: Given
    task_spec: str | None
    task_options: TaskOptions
    limit: int | None = None
    sample: int | None = None
    shard: Shard | None = None
    out: Path | None = None
    resume: bool = False
    force: bool = False
    models_file: str | None = None
    model_dirs: tuple[str, ...] = ()
    stamp: str = ""  # UTC, %Y%m%d-%H%M%S: results/<model>/<stamp>, results/sweep-<stamp>
    margin: float | None = None  # --margin: the published verdict's (None: each task's)

    @property
    def caution(self) -> str | None:
        """What --limit's items may not represent (said once, before anything runs)."""
        return None if self.limit is None else limit_caution(self.limit)

    @property
    def sweep_root(self) -> Path:
        """The folder of a sweep: --out, else results/sweep-<stamp>."""
        return self.out or Path("results") / f"sweep-{self.stamp}"


def request_of(models, kw: dict, *, limit: int | None = None, sample: int | None = None, shard: str | None = None,
               out=None, resume: bool = False, force: bool = False, quants: str | None = None) -> RunRequest:
    """The request of `run`'s (or ``evaluate``'s) arguments, refused now where it cannot run: the
    counts, --quants of one model (its aliases in the registry), one model's name that nothing
    resolves (read from the registry and the stores' listings only), the backend's options."""
    from abricot_local.models.ref import require_known

    check_counts(limit, sample, resume, out)
    margin = margin_of(kw)
    models = tuple(str(m) for m in models)
    if quants is not None:  # the registry's aliases of MODEL's quants: a sweep
        from abricot_local.models.quants import expand

        models = tuple(expand(models, quants, kw["models_file"]))
    if not models:
        raise UsageError("no model given")
    if len(models) == 1:  # a name nothing knows: refused before the plan, the data or the model loads
        require_known(models[0], backend=kw["backend"], models_file=kw["models_file"], model_dirs=kw["model_dirs"])
    from abricot_local.run.planning import Shard

    return RunRequest(models, given_opts(kw), kw["tasks"], task_opts(kw), limit, sample, Shard.parse(shard),
                      Path(out) if out else None, resume, force, kw["models_file"], tuple(kw["model_dirs"]),
                      datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S"), margin)
