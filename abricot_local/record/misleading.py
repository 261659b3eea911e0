"""What makes a task's numbers misleading, as a run's record keeps it (``TaskEntry.warnings``): the one rule
every reader and writer of a task's scored items records by (`run`, `--resume`, `merge`: run/record.py; `check`
holds a record to it; an lm-eval output read as a run: analysis/lm_eval_input.py). A function of the task (its
``sources``, ``metric_inputs``), its scored samples and their metrics; names no task."""

from __future__ import annotations

from typing import Sequence

from abricot_local.errors import opt, recorded_words, render
from abricot_local.metrics import constant_words, few_words
from abricot_local.record.samples import Sample
from abricot_local.record.schema import TaskEntry, metric_items

__all__ = ["data_warnings", "entry_warnings", "metric_warnings", "recorded", "recorded_split", "run_warnings",
           "scored_warnings"]


def recorded(text: str) -> str:
    """A text a run records (a task's warning, a skipped task's reason), the options it names in the record's
    words (errors.recorded_words: the flag made from the field, as records always have)."""
    return render(text, recorded_words)


def data_warnings(task, samples: Sequence[Sample], *, limit: int | None = None, sample: int | None = None) -> list[str]:
    """What makes a task's numbers misleading: one gold class only (with the advice that fits how
    the items were chosen: ``limit``, ``sample``), a source not scored."""
    out = []
    golds = {s.gold for s in samples}
    if len(samples) > 1 and len(golds) == 1:
        only = samples[0].gold if samples[0].gold_label is None else samples[0].gold_label
        advice = (f"; use {opt('sample', 'N')} (a seeded draw over the whole release) instead of {opt('limit')}"
                  if limit is not None else f"; a larger {opt('sample', 'N')} draws more of the release"
                  if sample is not None else "")
        out.append(f"every scored item has the same gold answer ({only!r}): the metrics describe one class "
                   f"only{advice}")
    missing = [src for src in task.sources if src not in {s.source for s in samples}]
    if missing:
        out.append(f"no item from source(s) {', '.join(missing)} was scored")
    return out

def metric_warnings(metrics: dict, task=None, samples: Sequence[Sample] = ()) -> list[str]:
    """Each metric undefined (NaN), with the side that is constant (metrics.constant_words over ``task``'s metric
    inputs of ``samples``; without them, either); each correlation recorded without its interval, too few items off
    a side's most common value (metrics.few_words: what its value rests on; only with ``task`` and ``samples``)."""
    inputs = {inp.name: inp for inp in task.metric_inputs(list(samples))} if task is not None and samples else {}
    out = []
    for name, value, _ in metric_items(metrics):
        if isinstance(value, float) and value != value:
            why = constant_words(inputs[name], samples) if name in inputs else ""
            out.append(f"{name} is undefined (NaN): {why or 'a constant prediction or gold vector'}")
        elif name in inputs and (few := few_words(inputs[name], samples)):
            out.append(few)
    return out

def scored_warnings(task, samples: Sequence[Sample], metrics: dict, *, limit: int | None = None,
                    sample: int | None = None) -> tuple[str, ...]:
    """The warnings a task's scored ``samples`` and their ``metrics`` (as results.json holds them) give: its data's
    (one gold class, a source not scored: :func:`data_warnings`), its metrics' (:func:`metric_warnings`); the
    options they name as opt()'s. A function of the samples: a shard's are not its merged run's (run/merge.py)."""
    return (*data_warnings(task, samples, limit=limit, sample=sample), *metric_warnings(metrics, task, samples))

def entry_warnings(fixed: Sequence[str], task, samples: Sequence[Sample], metrics: dict, *,
                   limit: int | None = None, sample: int | None = None) -> tuple[str, ...]:
    """A task entry's ``warnings`` as results.json records them, in its words (:func:`recorded`): ``fixed``, what
    does not depend on the items scored (the run's notes, the task's own warnings: the same in every shard of a
    run), then :func:`scored_warnings` of ``samples``. The one rule `run`, `--resume` and `merge` record by;
    `check` holds a record to it (:func:`recorded_split`)."""
    return tuple(recorded(w) for w in (*fixed, *scored_warnings(task, samples, metrics, limit=limit, sample=sample)))


def run_warnings(notes: Sequence[str], task, samples: Sequence[Sample], metrics: dict, *, limit: int | None = None,
                 sample: int | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A task's warnings as its run ends, made once: as made (the task's own, then :func:`scored_warnings`: opt()'s,
    a door renders them) and as its entry records them (:func:`entry_warnings`: the run's ``notes``, which it said as
    it began, first; in the record's words)."""
    made = (*task.warnings(), *scored_warnings(task, samples, metrics, limit=limit, sample=sample))
    return made, tuple(recorded(w) for w in (*notes, *made))

def recorded_split(entry: TaskEntry, task, samples: Sequence[Sample], *, limit: int | None = None,
                   sample: int | None = None) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(fixed, scored) of a recorded task ``entry``'s warnings (:func:`entry_warnings`): ``scored``, those its
    ``samples`` and recorded metrics give, remade, ending them; ``fixed`` the rest. None when the record's do not
    end with them (the record or its samples were changed after it was written, or an earlier version wrote it)."""
    made = entry_warnings((), task, samples, entry.metrics, limit=limit, sample=sample)
    have = tuple(entry.warnings)
    if len(made) > len(have) or have[len(have) - len(made):] != made:
        return None
    return have[:len(have) - len(made)], made
