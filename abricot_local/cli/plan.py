"""`run --dry-run` (the plan on stdout, as text or JSON) and the plan lines every real run
prints on stderr before it starts (dry_run.py makes the plan, console/plan.py the text)."""

from __future__ import annotations

import json
import shlex
import sys

from abricot_local.cli.app import echo, say


def show(request, *, as_json: bool, calibrate: bool) -> None:
    """The whole plan of ``request`` (an run.request.RunRequest) on stdout; nothing run,
    written (but a calibration's cache entry) or downloaded. A model that cannot be planned is an
    error for one model, a row in a sweep."""
    from abricot_local.cli.options import flags
    from abricot_local.console.plan import full
    from abricot_local.run import dry_run

    plan = dry_run.plan_of(request, calibrate=calibrate, with_memory=True,
                           notify=say)
    command = shlex.join(["abricot-local", *sys.argv[1:]]) if sys.argv[1:] else ""
    text = json.dumps(plan.rendered(flags).to_json(), indent=1) if as_json else full(plan, command)
    echo(text)


class Said:
    """The plan lines of one `run` command on stderr (run.session's ``before_download`` and ``on_loaded`` hooks,
    :meth:`before_download` and :meth:`announce`): why no time is predicted, and how to get a prediction, said
    once in the command; a later plan line with the same reason says only that there is still no time
    (console.plan.brief's ``said``)."""

    def __init__(self) -> None:
        self.untimed = ""  # why no time was predicted, as said last ("": not said)

    def _brief(self, cost) -> list[str]:
        from abricot_local.console.plan import brief, untimed

        lines = brief(cost, self.untimed)
        self.untimed = untimed(cost) or self.untimed
        return lines

    def before_download(self, cost) -> None:
        """The plan on stderr before a real run downloads its model: the download, then each task's items and
        work as estimated from the registry entry (the loaded model's own count follows, :meth:`announce`)."""
        from abricot_local.console.plan import download_line

        if cost is None:  # the run said why
            return
        lines = [download_line(m) for m in cost.models if m.download is not None]
        echo("\n".join([*lines, *(ln.replace("plan: ", "plan (estimated): ", 1) for ln in self._brief(cost))]),
             err=True)

    def announce(self, plan, backend, cost) -> None:
        """The plan on stderr once a real run's model is loaded: its items and work (``cost``, run.session's:
        counted with the loaded model, what is left of a --resume; None when it could not be made: the run
        said why), then what is about to run, the backend's facts and the kernel path."""
        from abricot_local import console

        lines = self._brief(cost) if cost is not None else []
        echo("\n".join([*lines, console.start_line(plan, backend.start_facts(), backend.provenance().kernels)]),
             err=True)
