"""The sweep's end summary (report/sweep.py, printed by cli/run.py's said_sweep) words the options its texts name as
it is built: each text in the door's words (a namer: the command line's flags) before it is wrapped, so a line wraps
at the width of the words it shows, however long they are; the command line prints it as it is, never rendered
again. Two fake-backend runs of 12 invented DISCOTEX items, in-process."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import planned
from abricot_local.analysis.loading import load_run
from abricot_local.backends.options import ScoringOptions
from abricot_local.errors import NONE, Namer, flag_of, opt, render
from abricot_local.models.given import Given
from abricot_local.report import sweep
from abricot_local.report.texttable import WIDTH, wrap
from abricot_local.run.session import run_plan
from abricot_local.tasks.base import TaskOptions
from invented_data import write_discotex

LONG = Namer(lambda name, value: f"--a-much-longer-option-called-{flag_of(name)[2:]}"
                                 + ("" if value is NONE else f"={value}"))
MARKS = ("\ue000", "\ue001", "\ue002")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """fake-1 and fake-2 (other seeds) on 12 invented items."""
    root = tmp_path_factory.mktemp("sweep-worded")
    data = write_discotex(root / "discotex", per_source=6)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        plan = planned.plan_run(model="fake", given=Given.of(ScoringOptions(n_ctx=4096), backend="fake"),
                                task_spec="discotex", task_options=TaskOptions(data_dir=str(data)), limit=None,
                                sample=12)
        views = []
        for seed in (1, 2):
            p = replace(plan, model=replace(plan.model, label=f"fake-{seed}", as_written=f"fake-{seed}"),
                        backend_options=replace(plan.backend_options, seed=seed))
            views.append(load_run(run_plan(p, root / f"fake-{seed}").path.parent))
    return views


def test_the_margins_note_wraps_at_the_width_of_its_words(runs, monkeypatch):
    monkeypatch.setattr(sweep, "rule_margins", lambda _: [0.2, 0.05])  # two rules at other margins: the note shows
    text = sweep.pairwise_verdicts(runs, LONG)
    assert not any(m in text for m in MARKS)  # worded as built
    note = (f"note: the runs' {opt('until_settled')} rules read other margins (0.2, 0.05); compare judges every pair "
            f"at one: the task's, or {opt('margin', 'M')}")
    assert text.endswith("\n" + wrap(render(note, LONG), indent="  "))  # wrapped as the words it shows
    assert "--a-much-longer-option-called-until-settled" in text
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert wrap(render(note, LONG), indent="  ") != render(wrap(note, indent="  "), LONG)  # (the words are longer)
    # no namer: the texts as they were, their options left for the caller (markers)
    assert render(sweep.pairwise_verdicts(runs), LONG) == render(sweep.pairwise_verdicts(runs, None), LONG)
    assert opt("until_settled") in sweep.pairwise_verdicts(runs)


def test_the_command_line_prints_the_summary_in_its_flags_as_built(runs, monkeypatch, capsys):
    from abricot_local.cli import run as cli_run
    from abricot_local.cli.options import flags
    from abricot_local.run.session import Step

    got = {}

    def compared(folders, registry, namer=None):
        got["namer"] = namer
        return f"built {opt('margin', 'M')} \ue000not-a-marker"  # a marker left would be the builder's own fault

    monkeypatch.setattr(sweep, "compared", compared)
    request = type("Request", (), {"known_models": lambda self: {}})()
    cli_run.said_sweep(request, [Step("a", Path(runs[0].path))])
    assert got["namer"] is flags
    out = capsys.readouterr().out
    assert f"built {opt('margin', 'M')} \ue000not-a-marker" in out  # printed as it is: rendered once, as built
