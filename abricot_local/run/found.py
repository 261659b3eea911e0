"""What a run finds in its output folder before it takes it, decided once (:func:`find`, a frozen :class:`Found`):
the plan it runs there (a --resume's as the run recorded there takes it: saved.whole_tasks; ``--until-settled``: its
bound as its sample), the stages it is scored in (settle.stages_of: the rule, or the whole run), the manifest it
takes the folder with, and what a --resume does there: nothing, the finished run there being this one (its
leftovers tidied, its verdict judged again at another ``--margin``: :func:`kept`), grow it (``--sample n`` -> m:
resume.grows; refused when a task's data is not here), or continue it (the checkpoint: run/folder.py, which
writes the folder while the run holds it)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from abricot_local.errors import DataError, ResultsError, UsageError, opt
from abricot_local.jsonfiles import temp_files
from abricot_local.record import CHECKPOINT, RESULTS, Manifest, Record, write_record
from abricot_local.record.outputs import LOCK, MARKERS, samples_name
from abricot_local.run.folder import OutputDir
from abricot_local.run.owned import guard
from abricot_local.run.resume import asked_growth, grown_words, grows, recorded_manifest, remargined, without_data
from abricot_local.run.saved import whole_tasks


@dataclass(frozen=True)
class Found:
    """What a run does in its folder (:func:`find`): ``plan`` and ``stages`` as it is scored, ``manifest`` (what the
    folder's checkpoint records, what it is taken with), ``finished``: a --resume's finished run that is this one
    (nothing to score; ``again``: its verdict judged again at the plan's --margin), ``grown``: a --resume that grows
    the finished run there (--sample n -> m), ``line``: what the resume says as it begins (the grow)."""

    plan: object  # run.plan.Plan
    stages: object  # execute.Stages: settle.Rule or settle.Grown (what they find of an earlier rule, kept in them)
    manifest: Manifest
    finished: Record | None = None
    again: bool = False
    grown: tuple[int, int] | None = None
    line: str = ""

    @property
    def bound(self) -> str:
        """The option that bounds the run's items: --until-settled's --max-items is its sample."""
        return bound_of(self.plan)


def bound_of(plan) -> str:
    """The option that bounds the items of ``plan`` (or of a request): --until-settled's --max-items, else --sample."""
    return "max_items" if plan.settle.on else "sample"


def before_plan(folder: Path | None, request) -> tuple[tuple[int, int] | None, str]:
    """What a --resume of ``request`` (run.request.RunRequest) in ``folder`` grows before its plan is made: the
    finished run there below the items it asks for (resume.asked_growth: its --sample; --until-settled, its
    --max-items), and the option that bounds them (:func:`bound_of`); what a signal before the plan says
    (run_folder.RunFolder.interrupted). Once the plan is made, :func:`find` decides it."""
    return asked_growth(folder, request.settle.max_items if request.settle.on else request.sample), bound_of(request)


def find(plan, folder: Path, *, resume: bool, pairs=None) -> Found:
    """What ``plan`` (run.plan.Plan) does in ``folder``: with ``resume``, the plan as the run recorded there takes it
    (:func:`resumed_plan`), the finished run there that is this one, or the one it grows (a task whose data is not
    here refused: the new items need it); ``pairs``, a ladder's rung's (settle.Pairs). A --until-settled plan with
    nothing to settle is refused here, before any load."""
    if resume:  # a --sample taking every item of every task, as the recorded one does: the same run
        plan = resumed_plan(plan, folder)
    from abricot_local.run.settle import stages_of  # (the rule's statistics: loaded once a plan is here)

    stages = stages_of(plan, pairs)  # --until-settled: its rule (nothing to settle: refused before any load)
    plan = stages.plan  # --until-settled: its bound the manifest's sample
    manifest = plan.manifest()
    done = stages.finished(folder, manifest) if resume else None
    if done is not None:  # nothing to score: the finished run stays as it is (:func:`kept`)
        return Found(plan, stages, manifest, finished=done, again=remargined(done, plan.margin))
    grown = grows(folder, manifest) if resume else None
    bound = bound_of(plan)
    if lacking := [r for r in plan.runs if r.problem]:  # planned from the finished run's record (run.plan)
        raise DataError(without_data(folder, grown, lacking[0], bound))
    line = ""
    if grown:
        inside = (f"shard {plan.shard} of a sample lies inside shard {plan.shard} of every larger one" if plan.shard
                  else "a sample lies inside every larger one")
        line = (f"resume: the run in {folder} grows {grown_words(grown, bound)}: the items it holds are kept "
                f"({inside}), the new ones scored{stages.until}")
    return Found(plan, stages, manifest, grown=grown, line=line)


def resumed_plan(plan, folder: Path):
    """``plan`` as a --resume in ``folder`` runs it: saved.whole_tasks against the run recorded there (none, or a
    record that cannot be read: ``plan`` as it is, the folder's check says what is wrong). A folder the run does not
    take (owned.guard: a link, inside another run, not a run and not empty) is refused first, in the run's words (its
    dry run's, saved.held_items), before the resume reads anything there or finds it finished."""
    guard(folder)
    try:
        return whole_tasks(plan, recorded_manifest(folder))
    except (ResultsError, OSError):
        return plan


def kept(found: Found, folder: Path, notify: Callable[[str], None] | None = None) -> Record:
    """The finished run ``found`` in ``folder``, which a --resume leaves as it is: the leftovers of its tidy-up (a
    signal cut it) removed, and its verdict judged again where ``found.again`` (:func:`rejudged`); its record."""
    _tidy(folder, found.finished)
    return rejudged(found.plan, folder, found.finished, notify) if found.again else found.finished


def _tidy(folder: Path, record: Record) -> None:
    """A finished run's leftovers (a signal cut its tidy-up) removed, under the folder's lock; nothing done when
    there are none, or another process holds the folder."""
    folder = Path(folder)
    names = [samples_name(t) for t in record.tasks]
    left = [*(folder / m for m in MARKERS), folder / CHECKPOINT, folder / LOCK]  # a .lock a kill left too
    if not any(os.path.lexists(p) for p in left) and not any(temp_files(folder, n) for n in (*names, RESULTS)):
        return
    try:
        with OutputDir(folder) as out:
            out.tidy_finished(record.tasks)
    except ResultsError:
        pass  # another run holds it, or it is no longer the run's own: left as it is


def rejudged(plan, path: Path, record: Record, notify: Callable[[str], None] | None = None) -> Record:
    """The finished run ``record`` in ``path`` with its published verdict judged again at ``plan.margin`` (the
    --margin of a --resume: run.resume.remargined) from its recorded samples, by the code that judges it as a run
    ends (run.record.judged_again); results.json rewritten atomically under the folder's lock, said through
    ``notify``. Nothing is scored and nothing else changes. Refused: a run --until-settled (its rule's looks were
    read at the margin it ran with: judged again, the record would hold two margins) and samples that no longer give
    the recorded metrics (changed by hand: `check` says how)."""
    from abricot_local.analysis.overview import recompute_entry
    from abricot_local.record import entry_samples
    from abricot_local.run.record import judged_again

    old = record.published.margin if record.published is not None else None
    if record.config is not None and record.config.until_settled:
        raise UsageError(f"{path} holds a run {opt('until_settled', True)}: its looks were read at the margin it ran "
                         f"with, so its verdict is not judged again at {opt('margin', plan.margin)}; run it anew with "
                         f"{opt('margin', plan.margin)} in another {opt('out')}")
    with OutputDir(path):  # a second run on this folder is refused meanwhile
        samples = {k: entry_samples(path, e, k) for k, e in record.tasks.items()}
        for task, rows in samples.items():
            if (bad := recompute_entry(record, task, rows, path).mismatches):
                raise ResultsError(f"{path}: the samples of {task} no longer give its recorded {', '.join(bad)}: they "
                                   f"were changed, and {RESULTS} is not judged again from them (`check` says more)")
        again = judged_again(plan, record, samples)
        write_record(path / RESULTS, again)
    if notify:
        was = opt("margin", old) if old is not None else "each task's declared margin"
        notify(f"resume: the run in {path} is complete; nothing was scored: its published verdict is judged again "
               f"at {opt('margin', plan.margin)} (it was judged at {was}) from its recorded samples, {RESULTS} "
               "rewritten")
    return again
