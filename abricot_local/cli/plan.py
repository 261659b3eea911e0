"""`run --dry-run` (the plan on stdout, as text or JSON) and the plan lines every real run
prints on stderr before it starts (dry_run.py makes the plan, console/plan.py the text)."""

from __future__ import annotations

import json
import shlex
import sys

from abricot_local.cli.app import echo


def show(request, *, as_json: bool, calibrate: bool) -> None:
    """The whole plan of ``request`` (an run.request.RunRequest) on stdout; nothing run,
    written (but a calibration's cache entry) or downloaded. A model that cannot be planned is an
    error for one model, a row in a sweep."""
    from abricot_local.cli.options import flags
    from abricot_local.console.plan import full
    from abricot_local.run import dry_run

    plan = dry_run.plan_of(request, calibrate=calibrate, with_memory=True,
                           notify=lambda line: echo(line, err=True))
    if as_json:
        echo(json.dumps(plan.rendered(flags).to_json(), indent=1))
    else:
        echo(full(plan, shlex.join(["abricot-local", *sys.argv[1:]]) if sys.argv[1:] else ""))


def announce(run_plan, backend, folder=None) -> None:
    """The short plan on stderr once a real run's model is loaded: the run's own plan and items,
    counted with the loaded model (no other load; what it tokenizes the run does not tokenize
    again). ``folder`` (a --resume: its run folder): what is left, not the whole run. A task that
    cannot be counted gets no line: the run says what is wrong with it. The plan only informs:
    whatever goes wrong making it is one line, and the run goes on."""
    from abricot_local.console.plan import brief
    from abricot_local.run import dry_run

    try:
        plan = dry_run.of_run(run_plan, backend, folder)
    except Exception as err:  # noqa: BLE001 - a fault in the plan must not stop the run it describes
        echo(f"plan: not made ({type(err).__name__}: {err})", err=True)
        return
    for line in brief(plan):
        echo(line, err=True)
