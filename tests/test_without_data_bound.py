"""The refusal of a --resume that would score items into a finished run whose data is not here names the run's
bound: --max-items for a run made --until-settled, --sample else (run.resume.without_data; run_plan says which)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from abricot_local.cli.options import flags
from abricot_local.errors import DataError, render
from abricot_local.run.resume import without_data

RUN = SimpleNamespace(task=SimpleNamespace(key="discotex"), problem="its data is not here")


def test_the_refusal_names_the_runs_own_bound():
    settled = render(DataError(without_data(Path("x"), (40, 80), RUN, "max_items")).raw(), flags)
    assert "from the 40 items it holds to --max-items 80" in settled and "--sample" not in settled, settled
    fixed = render(DataError(without_data(Path("x"), (20, None), RUN)).raw(), flags)
    assert "from --sample 20 to every item (no --sample)" in fixed, fixed
