"""``run MODEL --quants Q,Q --until-settled`` (issue 50): a ladder's rungs against its reference, look by look.

The reference is the ladder's highest-precision quant (models.quants.reference, gguf.file.by_precision), as compare's
equivalence verdict takes it. The ladder goes look by look over the looks its tasks plan (--looks, else 20, 40,
80, ..., up to --max-items or each task's last): the reference's run grows to the look's items (an ordinary
``--sample n`` run, its items the first n of the nested order), then each rung still open runs ``--until-settled``
to that look (run/settle.py's ``Pairs``: its rule reads its own samples and the reference's, item by item) and
stops there, or where its verdict settles. A rung's folder holds its rule and looks (``tasks.<key>.sequential``);
the reference's, the items the rungs needed. Each model is loaded once a look. A model whose folder holds a look
already (a ladder resumed) is not scored for it; where the ladder first meets it, its run is asked for at the items it
holds, so the rule a model's run holds its folder to holds it too (a rung's: settle.Rule.finished): with --resume, the
same run stays as it is and a run of other options is refused; without, the folder is refused as a run refuses one
holding a finished run; a model with no folder yet (a ladder stopped before it) starts there, --resume or not, as a
sweep's does (:func:`resumes`). No printing: what it says goes through the session's Hooks; each model's run is
session.run_model's (given: this module is below it)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Iterator

from abricot_local.errors import AbricotError, ResultsError, UsageError, opt
from abricot_local.record import RESULTS, read_run
from abricot_local.run.request import SettleOptions


def held(folder: Path) -> int:
    """The items each task of the finished run in ``folder`` holds (its ``--sample``); 0 when there is none."""
    if not (folder / RESULTS).is_file():
        return 0
    try:
        return read_run(folder).config.sample or 0
    except (ResultsError, AttributeError):
        return 0


def resumes(request, folder: Path) -> bool:
    """Whether a model's first run in a run of several (a sweep's, a ladder's: session.sweep, :func:`ladder`) goes on
    from its folder: with --resume, where the folder is there; one not made yet (the run stopped before it) starts
    there, as without --resume. The one rule of both."""
    return request.resume and folder.exists()


def schedule(request, reference: str, p=None) -> list[int]:
    """Every look the ladder's tasks plan: the reference's plan (``p``, else made: dry, nothing fetched; its items
    every one its looks may reach, as each rung's plan holds them), its tasks' looks; a rung's question at a margin no
    difference of its metric can exceed is refused here, before any item is scored (the margin is --margin's, else the
    task's: the same for every rung)."""
    from abricot_local.analysis.questions import pair_questions
    from abricot_local.analysis.sequential import planned_looks
    from abricot_local.run.plan import make_plan

    p = p or make_plan(request, reference, dry=True)
    rungs = [m for m in request.models if m != reference]
    if rungs:  # a verdict that cannot fail, refused before any item (questions.pair_questions), named by the first
        pair_questions(p, reference, rungs[0])
    return sorted({n for r in p.runs if not r.problem
                   for n in planned_looks(r.available or len(r.items), request.settle.looks, len(r.items))})


def finished(record) -> bool:
    """Whether a rung's run (its record) is done with this ladder: every rule stopped where it settled (or with every
    item scored). A rule that stopped only at its bound, a verdict open (settle_record.next_bound), goes on to the
    looks a larger --max-items plans; at the same bound the ladder has no look past it, so it stays as it is."""
    from abricot_local.run.settle_record import next_bound, stopped

    return stopped(record) and next_bound(record) is None


def margined(request, rung: str, reference: str, folder: Path, plan) -> None:
    """A rung's run that a resumed ladder keeps as it is (it holds the look: nothing scored) refused where the
    ladder's --margin is not the one its verdict against ``reference`` was judged at: its rule's (the looks were read
    at it, as a single run --until-settled is not judged again at another: run.found.rejudged), or, a fixed-n run
    (``--sample n``: no rule), each task's declared one for its primary metric (``plan``'s tasks: the ladder's).
    No --margin, or the same: kept."""
    m = request.margin
    if m is None or not (folder / RESULTS).is_file():
        return
    record = read_run(folder)
    rules = [e.sequential for e in record.tasks.values() if e.sequential is not None]
    was = sorted({q.margin for s in rules for q in s.questions})
    if rules and was == [m]:
        return
    if not rules and {r.task.margin(r.task.primary_metric or "accuracy") for r in plan.runs} == {m}:
        return
    anew = f"run the ladder anew with {opt('until_settled', True)} {opt('margin', m)} in another {opt('out')}"
    if rules:
        raise UsageError(f"{folder} holds {rung}'s run {opt('until_settled', True)} at "
                         f"{', '.join(opt('margin', x) for x in was)}: its looks against {reference} were read at it, "
                         f"so its verdict is not judged again at {opt('margin', m)}; {anew}")
    raise UsageError(f"{folder} holds {rung}'s fixed-n run ({opt('sample', held(folder))}: no rule of "
                     f"{opt('until_settled', True)}): its verdict against {reference} is judged at each task's "
                     f"declared margin, not again at {opt('margin', m)}; {anew}")


def ladder(request, hooks, run_model, folders) -> Iterator[tuple[str, object, str]]:
    """The request's quants (each into its folder: ``folders``, run.session.Folders; ``run_model``: session.run_model), each rung
    against the reference look by look until its verdict settles; at the end, each model's (model, its last run's
    session.Done or None, why it failed or ""): a rung that fails is said and the others go on; the reference's
    failure ends it, and so does a models.toml pin a plan refuses (run.plan.PinsRefused: the ladder's first plan holds
    every rung's, before any item). A model whose folder holds a look already, met first, is held to the rule its
    run is (nothing scored): the reference refused ends it, a rung refused is that rung's error. Every item the looks
    may reach is checked at each load, before any is scored (a prompt over n_ctx refused up front, as a plain
    --until-settled run refuses it): a rung's plan holds them, and the reference's run, which scores a look's
    items, checks them too (``fits``: its dry plan over them, the schedule's)."""
    from abricot_local.run.plan import PinsRefused, make_plan
    from abricot_local.run.settle import Pairs

    ref = request.reference  # chosen once, with the request (request._reference)
    folders = {m: folders.of(m) for m in request.models}
    plain = replace(request, settle=SettleOptions(), sample=None)  # the reference: an ordinary --sample n run
    left = [m for m in request.models if m != ref]
    done: dict[str, object] = {}
    failed: dict[str, str] = {}
    begun: set[str] = set()

    def resume(model: str) -> bool:  # the first run of a model in this ladder: the sweep's rule (resumes)
        first = model not in begun
        begun.add(model)
        return resumes(request, folders[model]) if first else True

    bound = make_plan(request, ref, dry=True)  # every item the looks may reach: the reference's at each load too
    for n in schedule(request, ref, bound):
        if not left:
            break
        if held(folders[ref]) < n:
            hooks.notify(f"== look at {n} items: the reference {ref} -> {folders[ref]}")
            done[ref] = run_model(replace(plain, sample=n), ref, resume(ref), hooks=hooks, fits=bound)
        elif ref not in begun:  # it holds this look already, met first: its run asked for at the items it holds
            run_model(replace(plain, sample=held(folders[ref])), ref, resume(ref), hooks=hooks, fits=bound)
            hooks.notify(f"{ref}: the run in {folders[ref]} holds {held(folders[ref])} items already, the reference's: "
                         "kept as it is, nothing scored")
        for rung in list(left):
            there = held(folders[rung]) >= n  # it holds this look already (a ladder resumed): never shrunk
            if there and rung in begun:
                if finished(read_run(folders[rung])):
                    left.remove(rung)
                continue
            if not there:
                hooks.notify(f"== look at {n} items: {rung} against {ref} -> {folders[rung]}")
            try:  # (a look it holds, met first: its run held to the rule, nothing scored: settle.Rule.finished)
                if there:  # its verdict kept as it is: refused at a --margin it was not judged at (:func:`margined`)
                    margined(request, rung, ref, folders[rung], bound)
                d = run_model(request, rung, resume(rung), hooks=hooks, pairs=Pairs(ref, folders[ref], n))
            except PinsRefused:  # a models.toml pin of the ladder's models: the ladder's error, not this rung's
                raise
            except AbricotError as err:
                hooks.notify(f"error: {rung}: {err.raw()}")
                failed[rung] = err.raw()
                left.remove(rung)
                continue
            if not there:
                done[rung] = d
            else:  # said, never silent: a ladder resumed where it holds this look already
                hooks.notify(f"{rung}: the run in {folders[rung]} holds {held(folders[rung])} items already, its "
                             f"verdict against {ref} with them: kept as it is, nothing scored")
            if finished(d.outcome.record):
                left.remove(rung)
    for model in request.models:
        yield model, done.get(model), failed.get(model, "")
