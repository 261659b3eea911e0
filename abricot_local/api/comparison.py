"""``compare``: finished runs paired item by item (analysis/compare.py), with the verdicts the
command prints, as a notebook reads them: ``to_frame()`` one row per pair, task and metric. The runs
given as ``Run`` objects are compared as they are (nothing read again); folders are read as `compare`
reads them (api/run.py), lm-eval outputs among them with their tasks' data from ``data``/``data_dir``
and from what the other runs recorded."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Sequence

from abricot_local.analysis.runs import Run
from abricot_local.api.arguments import entry
from abricot_local.api.run import Data, data_folder, data_pairs, finished, loaded
from abricot_local.core import DEFAULT_SEED
from abricot_local.errors import UsageError, opt
from abricot_local.paths import once_each

FRAME_COLUMNS = ("a", "b", "task", "metric", "n", "value_a", "value_b", "diff", "ci_low", "ci_high", "test", "p",
                 "p_holm", "detectable", "verdict", "reason")


def check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise UsageError(f"{opt('alpha')} must be between 0 and 1, got {alpha}")


def compare_runs(runs: Sequence[Run], *, tolerance: float, alpha: float, seed: int, **verdicts):
    """The analysis.compare.Comparison of finished runs (`compare`'s refusals), for the command and the
    API. ``verdicts``: analysis.compare.compare's margin, reference, near_tie, given (population.GivenData: the
    data where a task's N is counted when the runs' recorded files are not here) and by_id, by name."""
    from abricot_local.analysis import compare as cmp

    if len(runs) < 2:
        raise UsageError(f"compare needs at least two finished runs; found {len(runs)} "
                         f"({', '.join(r.path for r in runs) or 'none'})")
    return cmp.compare(runs, tolerance=tolerance, alpha=alpha, seed=seed, **verdicts)


@entry
def compare(*runs: Run | str | os.PathLike | list | tuple, tolerance: float | None = None, alpha: float = 0.05,
            seed: int = DEFAULT_SEED, margin: float | None = None, reference: str | None = None,
            near_tie: float | None = None, by_id: bool = False, models_file: str | os.PathLike | None = None,
            data: Data = None, data_dir: str | os.PathLike | None = None) -> Comparison:
    """`compare` of finished runs (Run objects, compared as they are; run folders, lm-eval outputs, or
    folders holding runs, read together as the command reads them, ``data``/``data_dir`` giving an
    lm-eval output's tasks' data): the items they share, paired differences with their CI and test, one
    verdict per pair. ``by_id`` (`compare --by-id`): items paired on their id alone, each pair one item
    under two scored contexts (runs of two seeds, prompt variants, shot counts: is the result sensitive to
    them?), said in every verdict and in ``paired_on``."""
    from abricot_local.analysis.compare import TOLERANCE
    from abricot_local.analysis.population import given_data
    from abricot_local.models.registry import load_registry

    check_alpha(alpha)
    if not runs:
        raise UsageError("compare needs at least two runs: give two run folders, or a folder holding them")
    registry = load_registry(models_file)
    pairs, folder = data_pairs(data), data_folder(data_dir)
    counted_in = given_data(pairs, folder)  # where a task's N is counted when the runs' data is elsewhere
    listed = _flat(runs)
    objects = [r for r in listed if isinstance(r, Run)]
    folders = {k: finished([r], what=str(r)) for k, r in enumerate(listed) if not isinstance(r, Run)}
    read = {r.path: r for r in loaded([f for fs in folders.values() for f in fs], registry, data=pairs,
                                       data_dir=folder, beside=objects)}
    chosen = []
    for k, r in enumerate(listed):
        chosen += [r.identified(registry)] if isinstance(r, Run) else [read[f] for f in folders[k] if f in read]
    result = compare_runs(once_each(chosen, lambda r: r.folder), tolerance=TOLERANCE if tolerance is None else tolerance, alpha=alpha,
                          seed=seed, margin=margin, reference=reference, given=counted_in, by_id=by_id,
                          **({} if near_tie is None else {"near_tie": near_tie}))
    return Comparison(result)


def _flat(runs) -> list:
    out: list = []
    for r in runs:
        out += _flat(r) if isinstance(r, (list, tuple)) else [r]
    return out


@dataclass(frozen=True, repr=False)
class Comparison:
    """analysis.compare.Comparison (``.result``: matches, metrics, agreements, settings that differ,
    best groups, power, one verdict per pair) with the tables a notebook wants."""

    result: object = field(repr=False)

    @property
    def verdicts(self):
        return self.result.verdicts

    @property
    def paired_on(self) -> str:
        """What made two runs' samples one item: "id+context" (the same id and scored context), or "id"
        (``by_id``: the id alone, each pair one item under two contexts)."""
        return self.result.paired_on

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(r.label for r in self.result.runs)

    def to_frame(self):
        """One row per pair, task and metric: the paired difference, its CI and test, the pair's verdict."""
        import pandas as pd

        verdicts = {(v.a, v.b): v for v in self.result.verdicts}
        rows = []
        for m in self.result.metrics:
            v = verdicts.get((m.a, m.b))
            rows.append((m.a, m.b, m.task, m.metric, m.n, m.value_a, m.value_b, m.diff, m.ci[0], m.ci[1], m.test,
                         m.p, m.p_holm, m.mdd, v.kind if v else None, v.reason if v else None))
        return pd.DataFrame(rows, columns=list(FRAME_COLUMNS))

    def equivalence(self):
        """One row per run judged against its reference, task and metric: the margin verdict
        (`compare --margin`), its 90% CI and, when it cannot tell yet, about how many items would settle it:
        for the task's own value when its items are counted (``total``: the finite-population correction),
        then (``like_*``) for items like these, without it (NaN, "": not judged)."""
        import pandas as pd

        return pd.DataFrame([(e.other, e.reference, e.task, e.metric, e.margin, e.n, e.total, e.diff, e.ci90[0],
                              e.ci90[1], e.kind, e.items, e.like_ci90[0], e.like_ci90[1], e.like_kind, e.like_items,
                              e.line) for e in self.result.equivalence],
                            columns=["run", "reference", "task", "metric", "margin", "n", "total", "diff", "ci90_low",
                                     "ci90_high", "verdict", "items_to_settle", "like_ci90_low", "like_ci90_high",
                                     "like_verdict", "like_items_to_settle", "line"])

    def changes(self):
        """One row per answer that changed between a pair: what the pair compares (one model, quants,
        two models), the gold answer and both answers (choice indices), the outcome (fixed: wrong ->
        right, broken: right -> wrong, still_wrong: -> another wrong answer), the reference's margin
        between its top two choices (nats) and whether that is a near tie or a decisive change."""
        import pandas as pd

        rows = [(c.reference, c.other, c.compared, c.task, a.id, a.gold, a.pred_ref, a.pred_other, a.outcome,
                 a.margin, a.margin < c.threshold) for c in self.result.changes for a in c.changed]
        return pd.DataFrame(rows, columns=["reference", "run", "compared", "task", "id", "gold", "pred_reference",
                                           "pred_run", "outcome", "margin", "near_tie"])

    def agreements(self):
        """One row per pair and task: same predictions, |delta log-prob| (max, mean), mean KL."""
        import pandas as pd

        return pd.DataFrame([a.__dict__ for a in self.result.agreements])

    def kld(self):
        """One row per run that is a quant of another compared run's model and task: the full-vocabulary
        KL(reference || run) at every token of the items `abricot-local kld` measured, as it kept it (the items and
        tokens it covers, the mean, its 95% CI over those items, llama-perplexity's per-token standard error, median,
        p99, p99.9, max, same-top share); empty when none was measured."""
        import pandas as pd

        from abricot_local.analysis.kld import of_views

        return pd.DataFrame([(k.reference, k.run, k.task, k.stats.n_items, k.stats.n_tokens, k.stats.mean,
                              k.stats.ci95[0], k.stats.ci95[1], k.stats.se_token, k.stats.median, k.stats.p99,
                              k.stats.p99_9, k.stats.max, k.stats.same_top) for k in of_views(self.result.runs)],
                            columns=["reference", "run", "task", "n_items", "n_tokens", "mean", "ci95_low",
                                     "ci95_high", "se_token", "median", "p99", "p99_9", "max", "same_top"])

    def render(self, fmt: str = "table") -> str:
        """As `compare --format FMT` prints it (table, markdown, csv, json), the options it names as keywords, written
        into each text as the document is built (report.comparison.worded: its serialised text never rendered)."""
        from abricot_local.errors import keywords
        from abricot_local.report.comparison import render

        return render(self.result, fmt, keywords)

    def __str__(self) -> str:
        return self.render("table")

    def __repr__(self) -> str:
        """One line, as Run's and Plan's: the runs compared (their labels), how many verdicts, paired on what."""
        n = len(self.result.verdicts)
        return (f"Comparison({' vs '.join(self.labels)}: {n} verdict{'s' * (n != 1)}, paired on "
                f"{self.paired_on})")

    def _repr_html_(self) -> str:
        import html

        lines = "".join(f"<li>{html.escape(v.line)}</li>" for v in self.result.verdicts)
        return f"<ul>{lines}</ul>" + self.to_frame().to_html(index=False, float_format=lambda x: f"{x:.4g}")
