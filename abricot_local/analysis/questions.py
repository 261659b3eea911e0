"""The verdicts a ``run --until-settled`` rule waits for (run/settle.py: the rule wired into the run), one
``sequential.Question`` each: per task instance, each published row the model's registry entry reproduces that the
run checks against that instance (baselines.entry_for) and that was made as the run makes it (no protocol difference,
its data the release: baselines.made_otherwise), or a rung's against its ladder's reference on the task's primary
metric; its statistic the task's ``metric_inputs``', its margin ``--margin`` or the task's. ``plan``: a
run.plan.Plan (its runs, their data, registry entry's ``reproduces``, margin, model label). Names no task."""

from __future__ import annotations

from abricot_local import metrics as metric_stats
from abricot_local.analysis import baselines
from abricot_local.analysis import sequential as sq
from abricot_local.errors import UsageError, opt
from abricot_local.record import TaskEntry


def statistics(task) -> dict[str, str]:
    """Each metric input of ``task`` by name: its statistic (`accuracy`, `pearson`, ...)."""
    return {inp.name: inp.stat for inp in task.metric_inputs([])}


def questions(plan) -> dict[str, list[tuple[sq.Question, str]]]:
    """Per task instance, (question, metric) for each published row the registry entry reproduces that the run
    checks against that instance and that was made as the run makes it."""
    out: dict[str, list[tuple[sq.Question, str]]] = {r.task.key: [] for r in plan.runs}
    if not plan.reproduces:
        return out
    runs = {r.task.key: r for r in plan.runs}
    entries = {key: TaskEntry(metrics={}, n=0, config=r.task.config(), data=plan.data.get(key, ()))
               for key, r in runs.items()}
    for ref in baselines.parse_reproduces(plan.reproduces)[0]:
        found = baselines.entry_for(ref, entries)
        if found is None or baselines.made_otherwise(ref, found[1]):
            continue  # not run here, or not comparable: no verdict to wait for
        task = runs[found[0]].task
        stats = statistics(task)
        if stats.get(ref.metric) not in metric_stats.ROW_STATS:
            continue
        margin = plan.margin if plan.margin is not None else task.margin(ref.metric)
        name = sq.question_name(ref.source, ref.model, found[0], ref.metric)
        vacuous = metric_stats.covered(ref.value, margin, metric_stats.BOUNDS.get(stats[ref.metric]))
        if vacuous:  # its first look would say reproduced: a verdict that cannot fail is not waited for
            raise UsageError(f"{opt('until_settled', True)} waits for no verdict that cannot fail: {name}: {vacuous}")
        out[found[0]].append((sq.Question(name, stats[ref.metric], margin, ref.value,
                                          baselines.rounding(ref.value)), ref.metric))
    return out


def pair_questions(plan, reference: str, model: str = "") -> dict[str, list[tuple[sq.Question, str]]]:
    """Per task instance, the rung's question against ``reference`` on the task's primary metric, at ``--margin``
    or the task's margin for it; a margin no difference of the metric can exceed (metrics.covered_difference) is
    refused, as :func:`questions` refuses a published row's. ``model``: the rung's label (default: the plan's model;
    a ladder's check before any item reads the reference's dry plan: the margins are the same for every rung)."""
    out: dict[str, list[tuple[sq.Question, str]]] = {}
    for r in plan.runs:
        task = r.task
        metric = task.primary_metric or "accuracy"
        stats = statistics(task)
        margin = plan.margin if plan.margin is not None else task.margin(metric)
        name = sq.pair_question_name(model or plan.model_label, reference, task.key, metric)
        vacuous = metric_stats.covered_difference(margin, metric_stats.BOUNDS.get(stats.get(metric)))
        if vacuous:  # its first look would say equivalent: a verdict that cannot fail is not waited for
            raise UsageError(f"{opt('until_settled', True)} waits for no verdict that cannot fail: {name}: {vacuous}")
        out[task.key] = [(sq.Question(name, stats[metric], margin),
                          metric)] if stats.get(metric) in metric_stats.ROW_STATS else []
    return out
