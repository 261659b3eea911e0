"""`run --dry-run` (the plan on stdout, as text or JSON) and the plan lines every real run
prints on stderr before it starts (dry_run.py makes the plan, console/plan.py the text)."""

from __future__ import annotations

import json
import shlex
import sys

from abricot_local.cli.app import echo


def _plan(models, *, limit, sample, shard, kw, calibrate: bool, with_memory: bool, keep_going: bool):
    from abricot_local.planner import dry_run

    return dry_run.plan_of(models, limit=limit, sample=sample, shard=shard, kw=kw, calibrate=calibrate,
                           with_memory=with_memory, keep_going=keep_going,
                           notify=lambda line: echo(line, err=True))


def show(models, *, as_json: bool, calibrate: bool, **args) -> None:
    """The whole plan on stdout; nothing run, written (but a calibration's cache entry) or
    downloaded. A model that cannot be planned is an error for one model, a row in a sweep."""
    from abricot_local.console.plan import full

    plan = _plan(models, calibrate=calibrate, with_memory=True, keep_going=len(models) > 1, **args)
    if as_json:
        echo(json.dumps(plan.to_json(), indent=1))
    else:
        echo(full(plan, shlex.join(["abricot-local", *sys.argv[1:]]) if sys.argv[1:] else ""))


def announce(models, folders=None, **args) -> None:
    """The short plan on stderr before a real run (memory is checked by the run itself). A
    model that cannot be planned gets no line: the run says what is wrong with it. The plan
    only informs: whatever goes wrong making it is one line, and the run goes on. ``folders``
    (a --resume: model -> its run folder): what is left of each, not the whole run."""
    from abricot_local.console.plan import brief
    from abricot_local.errors import AbricotError
    from abricot_local.planner.dry_run import resumed

    try:
        plan = _plan(models, calibrate=False, with_memory=False, keep_going=True, **args)
        if folders:
            plan = resumed(plan, folders)
    except AbricotError:
        return  # the run stops on the same error and says it
    except Exception as err:  # noqa: BLE001 - a fault in the plan must not stop the run it describes
        echo(f"plan: not made ({type(err).__name__}: {err})", err=True)
        return
    for line in brief(plan):
        echo(line, err=True)
