"""The end of a sweep (`run MODEL MODEL ...`): the runs it finished, each read once, as the runs table
(`report`'s) and one verdict line per pair of runs (`compare` gives the details, at the margin the sweep's
--until-settled rules read: the quant ladder's). Its texts name options in the door's words (a namer: the command
line's flags), written in as each text is built, before it is wrapped: never rendered again once laid out."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from abricot_local.errors import Namer


def compared(folders: Sequence[Path], registry: dict, namer: Namer | None = None) -> str:
    """The runs table of the finished runs in ``folders`` (their models identified in ``registry``) and, for
    two or more, the pairwise verdicts; the options they name in ``namer``'s words (None: left unrendered)."""
    from abricot_local.analysis.loading import load_all
    from abricot_local.analysis.overview import gather
    from abricot_local.report.tables import render

    runs = load_all([str(f) for f in dict.fromkeys(folders)], registry)
    lines = [render(gather(runs), namer=namer)]
    if len(runs) > 1:
        lines += ["", pairwise_verdicts(runs, namer)]
    return "\n".join(lines)


def pairwise_verdicts(runs, namer: Namer | None = None) -> str:
    """One verdict line per pair of ``runs`` (analysis.runs.Run), or why there is none; where the runs of a task
    scored different items (an --until-settled sweep's rungs stopped at different looks), compare's note on the
    items each pair was compared over. Each text in ``namer``'s words before it is wrapped (None: left unrendered)."""
    from abricot_local.analysis.compare import compare
    from abricot_local.analysis.matching import OWN_ITEMS
    from abricot_local.errors import ResultsError, opt
    from abricot_local.report.comparison import verdict_text, worded
    from abricot_local.report.texttable import wrap

    margins = rule_margins(runs)
    try:
        c = compare(runs, margin=margins[0] if len(margins) == 1 else None)
    except ResultsError as err:
        return worded(f"pairwise verdicts: none ({err.raw()})", namer)
    read = ", ".join("each task's" if m is None else f"{m:g}" for m in margins)
    mixed = [f"the runs' {opt('until_settled')} rules read other margins ({read}); compare judges every pair at one: "
             f"the task's, or {opt('margin', 'M')}"] if len(margins) > 1 else []
    notes = [wrap(f"note: {n}", indent="  ") for n in worded([n for n in c.notes if OWN_ITEMS in n] + mixed, namer)]
    return "\n".join([verdict_text(c, namer), *notes])


def rule_margins(runs) -> list[float | None]:
    """The margins the --until-settled rules of ``runs`` read, in order: their run's --margin, None for each task's
    (the one the quant ladder judges a rule's rung at, analysis/ladder.py). One, and compare (the sweep's verdicts
    and the details command under them) judges at it; none (no rule), at each task's."""
    ruled = [r for r in runs if any(t.sequential is not None for t in r.record.tasks.values())]
    return list(dict.fromkeys(r.record.published.margin if r.record.published is not None else None for r in ruled))
