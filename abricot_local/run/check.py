"""Re-score a recorded run with its recorded model, data and options; report agreement.

First the record itself: every metric and ``n`` of results.json is recomputed from the
samples files (each line validated by record.samples) and compared with the recorded
value; then the run is held to its data (held.py: each item rebuilt from the recorded data file, the task's
config, the published block made again); a difference fails the check whatever the re-scoring gives. Then the
re-scoring. On the recorded kernel path (record/kernel_path.py: build, CPU features, extra buffer types,
devices) the numbers must come back: every prediction the same and every log-prob within
``atol``: by default (:func:`tolerance`) exactly where the recomputation is bit-identical (an exact
engine, and the thread count as recorded or no thread-dependent decode call), 1e-3 where the numbers may
move (threads that mattered, the batched engine's groups), the batched engine's drift where a ``sample``
regroups its items. On another kernel path they cannot be expected to: the check says so, re-scores,
and gives analysis/compare.py's verdict on the recorded run against the re-scored one; it fails then
only when that verdict is ``different`` (or when ``exact`` demands the recorded numbers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from abricot_local import hashing
from abricot_local.record import kernel_path
from abricot_local.backends import reads_model_file
from abricot_local.errors import ModelError, Namer, ResultsError, UsageError, opt
from abricot_local.models.ref import Located, ModelRef, require_same
from abricot_local.models.locate import resolve_model_ref
from abricot_local.metrics import require_finite
from abricot_local.run.execute import execute, open_backend, prepared
from abricot_local.run.plan import Plan, make_plan
from abricot_local.run.request import of_record
from abricot_local.analysis.changes import NEAR_TIE, AnswerChanges, top_two_margin
from abricot_local.run.check_data import recorded_task_options
from abricot_local.run.check_tolerance import Tolerance, tolerance
from abricot_local.run.check_settled import settled_differences
from abricot_local.analysis.compare import DIFFERENT, Verdict, compare
from abricot_local.analysis.loading import load_run
from abricot_local.analysis.runs import Run, check_recorded_options, task_samples
from abricot_local.record import RESULTS, Provenance, Record, Sample
from abricot_local.record.schema import Kernels
from abricot_local.analysis.overview import recompute_entry
from abricot_local.run import held
from abricot_local.run.states import unfinished

Progress = Callable[[str, int, int], None]
Notice = Callable[[str], None]


@dataclass(frozen=True)
class Difference:
    task: str
    id: str
    recorded_pred: int
    new_pred: int
    max_abs_diff: float


@dataclass(frozen=True)
class CheckReport:
    checked: int
    identical_predictions: int
    max_abs_diff: float
    atol: float
    differences: tuple[Difference, ...]
    missing: tuple[tuple[str, str], ...] = ()  # (task, id) the run scored but its samples file lacks
    record_differs: tuple[str, ...] = ()  # "task metric: recorded X, recomputed Y": results.json vs its samples
    kernels_recorded: str = ""  # kernel_path.describe() of the run's, and of this machine's
    kernels_here: str = ""
    kernel_differences: tuple[str, ...] = ()  # what differs in the arithmetic (empty: the same kernel path)
    notes: tuple[str, ...] = ()  # facts that move no number (threads that did not matter)
    verdict: Verdict | None = None  # compare's, recorded vs re-scored, when the kernel path differs
    exact: bool = False  # the recorded numbers demanded whatever the kernel path
    changes: tuple[AnswerChanges, ...] = ()  # with the verdict: per task, the answers that changed (near ties?)
    data_differs: tuple[str, ...] = ()  # the run against its data (held.py): "task item ID field: recorded X, ..."
    rule: str = ""  # why ``atol`` (Tolerance.why)
    near_ties: tuple[Difference, ...] = ()  # changed predictions accepted as near ties (the batched engine regrouped)

    @property
    def only_near_ties(self) -> bool:
        """Every answer that changed on the other kernel path was a near tie of the recorded run."""
        return all(not c.decisive for c in self.changes)

    @property
    def reproduced(self) -> bool:
        return (self.sound and self.checked > 0 and not self.differences
                and self.identical_predictions + len(self.near_ties) == self.checked and self.max_abs_diff <= self.atol)

    @property
    def sound(self) -> bool:
        """The record agrees with its samples files and both with the data: no item missing, every metric
        and n recomputed alike, every item, setting and published check rebuilt alike."""
        return not self.missing and not self.record_differs and not self.data_differs

    @property
    def same_kernels(self) -> bool:
        return not self.kernel_differences

    @property
    def passed(self) -> bool:
        """The check's outcome (its exit status): reproduced on the same kernel path (or with
        ``exact``); on another, any verdict but ``different``."""
        if self.exact or self.same_kernels or self.verdict is None:
            return self.reproduced
        return self.sound and self.checked > 0 and self.verdict.kind != DIFFERENT


def recorded_model(record: Record, given: str | None = None, *, give: str = "",
                   model_dirs: tuple[str, ...] = ()) -> ModelRef:
    """The recorded run's model, found again and hashed from its bytes: ``given`` (any name
    `run` takes, a file name looked for in ``model_dirs`` too), else the recorded file, else (moved or replaced)
    the name as it was written (an Ollama tag, an hf: repository...); refused unless its SHA-256 is the recorded
    one. ``give``: what the caller's user can do when the file is missing (default: give it with --model)."""
    rec, kind = record.model, record.config.backend
    if not reads_model_file(kind):
        return resolve_model_ref(rec.name, backend=kind)
    name = given or rec.path
    if not name:
        raise ResultsError(f"the run records no model path; give the model with {opt('model')}")
    if not given and not Path(name).is_file():
        if rec.source not in (None, "path", "registry") and rec.as_written:
            name = rec.as_written
        else:
            advice = give or f"give it with {opt('model')}"
            rel = "" if Path(name).is_absolute() else \
                " (a relative path: relative to the folder the run was started from, which is not recorded)"
            raise ResultsError(f"the recorded model file {name} is missing{rel}; {advice}")
    with hashing.afresh():
        try:
            ref = resolve_model_ref(str(name), backend=kind, offline=True, progress=False, model_dirs=model_dirs)
        except ModelError as err:  # the model given named as given, not as the run's
            what = opt("model", given) if given else "the recorded model"
            raise ResultsError(f"{what} cannot be opened: {err.raw()}") from None
    require_same(ref, rec.sha256)
    return ref


def recorded_plan(record: Record, found: ModelRef, task_options, backend_values: dict | None = None, *,
                  engine: Callable[[str], str] | None = None, dry: bool = False) -> Plan:
    """The plan of a recorded run (`check` re-scores it, `kld` measures against it): its request
    (run.request.of_record: its backend options as recorded, ``backend_values`` on top, its tasks with
    ``task_options``) for its model ``found`` again (:func:`recorded_model`), planned with that model as
    located (nothing hashed afresh). ``engine``: the engine run for the recorded one (`kld`'s: each token
    decoded once), None: the recorded one; ``dry`` (`kld --dry-run`): nothing fetched or hashed."""
    request = of_record(record, found.as_written, task_options, backend_values)
    recorded = request.given.values.get("engine")
    if engine is not None and recorded is not None and engine(recorded) != recorded:
        over = {**(backend_values or {}), "engine": engine(recorded)}
        request = of_record(record, found.as_written, task_options, over)
    return make_plan(request, located=Located(found.as_written, found.backend, found), fresh=False, dry=dry)


def _shown(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return repr(value) if value is None or isinstance(value, str) else str(value)


def _record_differences(record: Record, samples: dict, out: Path) -> list[str]:
    """Every metric and n of results.json recomputed from the samples files (report --verify's
    recomputation), each that differs as "task metric: recorded X, recomputed Y"."""
    lines = []
    for name in record.tasks:
        tc = recompute_entry(record, name, samples[name], out)
        lines += [f"{name} {k}: recorded {_shown(tc.recorded.get(k))}, recomputed from the samples "
                  f"{_shown(tc.recomputed.get(k))}" for k in tc.mismatches]
    return lines


def _warning_differences(record: Record, plan: Plan, samples: dict) -> tuple[str, ...]:
    """Each task whose recorded warnings do not end with those its samples give, made again by the rule the run
    recorded them by (run.record.recorded_split), naming the warnings that differ. The warnings that do not depend
    on the items scored (notes, the task's own; held.py holds the run to its data) are not remade here."""
    from abricot_local.run.record import entry_warnings, recorded_split

    lines = []
    config = record.config
    for task_run in plan.runs:
        name = task_run.task.key
        entry, rows = record.tasks[name], samples[name]
        if recorded_split(entry, task_run.task, rows, limit=config.limit, sample=config.sample) is not None:
            continue
        made = entry_warnings((), task_run.task, rows, entry.metrics, limit=config.limit, sample=config.sample)
        tail = tuple(entry.warnings)[-len(made):] if made else ()
        lacks = [w for w in made if w not in entry.warnings]
        more = [w for w in tail if w not in made]
        said = "; ".join([*(f"the samples give {w!r}, not recorded" for w in lacks),
                          *(f"recorded {w!r}, which the samples do not give" for w in more)])
        lines.append(f"{name} warnings: {said or 'recorded in another order than the samples give them'}")
    return tuple(lines)


def _kernels(backend) -> Kernels | None:
    return backend.provenance().kernels


def _verdict(recorded: Run, provenance: Provenance, new: dict[str, list[Sample]],
             seed: int) -> tuple[Verdict, tuple[AnswerChanges, ...]]:
    """compare's verdict on the recorded run against its re-scored items (the same ids), and the
    answers that changed, classified by the recorded run's margins (near ties or decisive)."""
    c = compare([recorded, recorded.rescored(provenance, new)], seed=seed, reference=recorded.path)
    return c.verdicts[0], c.changes


class _Against:
    """check's sink (execute.Sink): each re-scored sample held against the recorded one."""

    def __init__(self, recorded: dict[str, dict[str, Sample]]):
        self.recorded = recorded
        self.every: list[tuple[Difference, float]] = []  # each item, with the recorded top-two margin
        self.new: dict[str, list[Sample]] = {}
        self.checked = self.same = 0
        self.worst = 0.0

    def done(self, task: str) -> dict[str, Sample]:
        return {}

    def append(self, task: str, line: Sample) -> None:
        old = self.recorded[task][line.id]
        if line.context != old.context:
            raise ResultsError(f"item {line.id}: the rebuilt prompt differs from the recorded one")
        d = float(np.max(np.abs(np.subtract(line.logprobs, old.logprobs))))
        self.new.setdefault(task, []).append(line)
        self.checked += 1
        self.same += line.pred == old.pred
        self.worst = max(self.worst, d)
        self.every.append((Difference(task, line.id, old.pred, line.pred, d), top_two_margin(old.logprobs)))

    def held(self, tol: Tolerance) -> tuple[tuple[Difference, ...], tuple[Difference, ...]]:
        """(the items that differ under ``tol``, the changed predictions it accepts as near ties)."""
        flips = tuple(d for d, m in self.every if tol.near_ties and d.recorded_pred != d.new_pred and m < NEAR_TIE
                      and d.max_abs_diff <= tol.atol)
        return tuple(d for d, _ in self.every if d not in flips and (d.recorded_pred != d.new_pred
                                                                     or d.max_abs_diff > tol.atol)), flips


def recorded_run(run: Run | str | Path, *, by: str = "check re-scores") -> Run:
    """The finished run `check` re-scores (and `kld` measures: ``by``, what the command does to runs):
    ``run`` (analysis.runs.Run), or the folder of one, read; an unfinished folder, an lm-eval output, a run that
    records no backend refused."""
    if not isinstance(run, Run):
        out = Path(run)
        why = unfinished(out)
        if why:
            raise ResultsError(why)
        from abricot_local.analysis.lm_eval_input import is_lm_eval_output

        if is_lm_eval_output(out):  # refused before its tasks' items are looked for
            raise _not_ours(out, by)
        inner = [] if (out / RESULTS).is_file() or not out.is_dir() else \
            [c for c in sorted(out.iterdir()) if c.is_dir() and is_lm_eval_output(c)]
        if inner:  # lm-eval's --output_path folder: its results below it, in a folder per model
            raise _not_ours(out, by, inner)
        run = load_run(out)
    if run.lm_eval:
        raise _not_ours(run.path, by)
    if run.record.config is None or not run.record.config.backend:
        raise ResultsError(f"{Path(run.path) / 'results.json'} records no config.backend: its items cannot be "
                           "rebuilt and scored again")
    check_recorded_options(run.record, run.path)  # a value of the wrong type: one line naming its key
    return run


def _not_ours(path, by: str, inner=()) -> ResultsError:
    """An lm-eval output (``inner``: the lm-eval outputs in the folder ``path``) refused in every door's words:
    what it does to runs, and that `compare` takes it beside a run (no door's spelling of a command)."""
    holds = f" (lm-eval's results in {', '.join(map(str, inner))})" if inner else ""
    return ResultsError(f"{path} is an lm-eval output{holds}: {by} runs of abricot-local, whose record says how "
                        "to score their items again; it holds nothing to re-score. `compare` takes it beside a run of "
                        "the same model and tasks")


def check_run(run: Run | str | Path, *, sample: int | None = None, atol: float | None = None, model: str | None = None,
              data_dir: str | None = None, backend_values: dict | None = None, progress: Progress | None = None,
              exact: bool = False, notice: Notice | None = None, data=(),
              model_dirs: tuple[str, ...] = ()) -> CheckReport:
    """Re-score all items of ``run`` (analysis.runs.Run, or its folder: :func:`recorded_run`) (or ``sample``
    drawn with the run's seed) and compare with the samples files.
    Items the run scored but its samples files lack are reported as missing (not reproduced);
    ``backend_values``: backend options that change no number (threads), over the recorded ones.
    ``data_dir``, ``data``: where the run's data is, if it moved (as `run`'s; check_data.py); ``model``,
    ``model_dirs``: the model, if it moved (as `run` finds it).
    ``atol``: the largest log-prob difference accepted; None: :func:`tolerance`'s rule (0 where bit-identical).
    When this machine's kernel path differs from the recorded one, ``notice`` hears it before the
    re-scoring, and the report holds compare's verdict. The re-scoring is the plan of the recorded run
    (run.request.of_record) executed into a sink that holds each sample against the record."""
    if sample is not None and sample < 1:
        raise UsageError(f"{opt('sample')} must be at least 1 (a check that re-scores nothing proves nothing)")
    run = recorded_run(run)
    record, out = run.record, Path(run.path)
    options = recorded_task_options(record, data_dir, data)
    found = recorded_model(record, model, model_dirs=model_dirs)
    p = recorded_plan(record, found, options, backend_values)
    rng = np.random.default_rng(options.seed)
    read = {name: task_samples(out, t, name, counted=False) for name, t in record.tasks.items()}
    record_differs = tuple(_record_differences(record, read, out))
    recorded_runs = {name: {s.id: s for s in samples} for name, samples in read.items()}
    backend = open_backend(p)  # the recorded options: no registry default applies
    missing, runs, regrouped = [], [], False
    try:
        rec_kernels, here = kernel_path.recorded(record.provenance), _kernels(backend)
        kdiff = kernel_path.differences(rec_kernels, here)
        if kdiff and notice:
            notice("the kernel path differs from the recorded run's (" + "; ".join(kdiff) + "): re-scoring, "
                   "then comparing" + (f" ({opt('exact', True)}: the recorded numbers are demanded)" if exact else ""))
        data_differs = held.differences(run, prepared(p, backend), read)
        settled, settled_notes = settled_differences(record, p.runs, read, out)
        record_differs += tuple(settled) + _warning_differences(record, p, read)
        for task_run in p.runs:
            recorded = recorded_runs[task_run.task.key]
            require_finite(list(recorded.values()), task_run.task.key)
            missing += [(task_run.task.key, it.id) for it in task_run.items if it.id not in recorded]
            items = [it for it in task_run.items if it.id in recorded]
            if sample is not None and sample < len(items):
                keep, regrouped = set(rng.choice(len(items), size=sample, replace=False).tolist()), True
                items = [it for k, it in enumerate(items) if k in keep]
            runs.append(replace(task_run, items=tuple(items)))
        against = _Against(recorded_runs)
        execute(replace(p, runs=tuple(runs)), backend, against, progress=progress, measure=False)
        note, moved = kernel_path.thread_note(rec_kernels, here, backend.counters.thread_dependent)
        kdiff += (note,) if moved else ()
        tol = tolerance(atol, kernels=kdiff, known=None not in (rec_kernels, here), threads=note,
                        options=p.backend_options, regrouped=regrouped)
        verdict, changes = (_verdict(run, backend.provenance(), against.new, options.seed)
                            if kdiff and against.checked else (None, ()))
    finally:
        backend.close()
    diffs, flips = against.held(tol)
    accepted = (f"{len(flips)} changed prediction(s) at near ties: " + ", ".join(f"{d.task} {d.id}" for d in flips),)
    return CheckReport(against.checked, against.same, against.worst, tol.atol, diffs, tuple(missing),
                       record_differs, kernel_path.describe(rec_kernels), kernel_path.describe(here), kdiff,
                       (f"tolerance {tol.why}",) + ((note,) if note and not moved else ()) + tuple(settled_notes)
                       + (accepted if flips else ()), verdict, exact, changes, data_differs, tol.why, flips)


def report_json(rep: CheckReport, namer: Namer | None = None) -> str:
    """The report as `check --json` prints it, the options its texts name (errors.opt) written by ``namer`` (the
    door's) into each text before the whole is serialised (report.comparison.worded; None: left as markers)."""
    from abricot_local.report.comparison import worded

    v = rep.verdict
    return json.dumps(worded(
        {"checked": rep.checked, "identical_predictions": rep.identical_predictions,
         "max_abs_diff": rep.max_abs_diff, "atol": rep.atol, "tolerance": rep.rule, "reproduced": rep.reproduced,
         "passed": rep.passed, "exact": rep.exact,
         "kernels": {"recorded": rep.kernels_recorded, "here": rep.kernels_here,
                     "same": rep.same_kernels, "differences": list(rep.kernel_differences)},
         "notes": list(rep.notes),
         "verdict": {"kind": v.kind, "reason": v.reason, "line": v.line} if v else None,
         "answers_changed": [{"task": c.task, "changed": len(c.changed), "near_ties": len(c.near_ties),
                              "decisive": [d.id for d in c.decisive], "threshold_nats": c.threshold, "line": c.summary}
                             for c in rep.changes],
         "only_near_ties": rep.only_near_ties if rep.changes else None,
         "differences": [d.__dict__ for d in rep.differences],
         "near_ties_accepted": [d.__dict__ for d in rep.near_ties],
         "missing": [{"task": t, "id": i} for t, i in rep.missing],
         "record_differs": list(rep.record_differs), "data_differs": list(rep.data_differs)}, namer),
        indent=2, ensure_ascii=False,
    )
