"""The end of a sweep (`run MODEL MODEL ...`): the runs it finished, each read once, as the runs table
(`report`'s) and one verdict line per pair of runs (`compare` gives the details)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence


def compared(folders: Sequence[Path], registry: dict) -> str:
    """The runs table of the finished runs in ``folders`` (their models identified in ``registry``) and, for
    two or more, the pairwise verdicts."""
    from abricot_local.analysis.loading import load_all
    from abricot_local.analysis.overview import gather
    from abricot_local.report.tables import render

    runs = load_all([str(f) for f in dict.fromkeys(folders)], registry)
    lines = [render(gather(runs))]
    if len(runs) > 1:
        lines += ["", pairwise_verdicts(runs)]
    return "\n".join(lines)


def pairwise_verdicts(runs) -> str:
    """One verdict line per pair of ``runs`` (analysis.runs.Run), or why there is none; where the runs of a task
    scored different items (an --until-settled sweep's rungs stopped at different looks), compare's note on the
    items each pair was compared over."""
    from abricot_local.analysis.compare import compare
    from abricot_local.analysis.matching import OWN_ITEMS
    from abricot_local.errors import ResultsError
    from abricot_local.report.comparison import verdict_text
    from abricot_local.report.texttable import wrap

    try:
        c = compare(runs)
    except ResultsError as err:
        return f"pairwise verdicts: none ({err.raw()})"
    return "\n".join([verdict_text(c), *(wrap(f"note: {n}", indent="  ") for n in c.notes if OWN_ITEMS in n)])
