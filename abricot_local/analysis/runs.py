"""A finished run, as every reader takes it: :class:`Run` (the record, the model identity comparisons
use, a label, and the run's task instances, :class:`RunTask`, whose samples are read when first asked).
A run folder and an lm-eval output folder are both one (loading.py reads them; lm_eval_input.py the
latter). `compare`, `report`, `check`, `kld` and the Python API (``abricot_local.Run``) take it; its
tables for a notebook load pandas when called (frames.py). Pure: reads through :mod:`abricot_local.record`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from abricot_local.analysis.labels import RunIdentity, options_over, unique_labels
from abricot_local.errors import ResultsError, TaskError, UsageError
from abricot_local.gguf.file import quant_of, strip_quant
from abricot_local.record import RESULTS, Provenance, Record, Sample, TaskEntry, entry_samples, settings as recorded
from abricot_local.record.schema import TaskPlugin


@dataclass(frozen=True)
class Metric:
    task: str
    name: str
    value: float
    ci: tuple[float, float] | None

    @property
    def key(self) -> str:
        return f"{self.task}.{self.name}"


def task_options(config: Mapping[str, Any], where: str | Path | None = None, task: str | None = None,
                 own: Mapping[str, Any] = MappingProxyType({}), owns=()):
    """The tasks.base.TaskOptions of a recorded task, from its config (record.Record.task_config: the run's with the
    task's own over it; a run's config alone for every task, ``owns`` the tasks' own): the one reading of them. A
    recorded value of the wrong type or range is a ResultsError naming ``where`` (a run's folder or its results.json)
    and the key: ``tasks.TASK.config.KEY`` for one of the task's own config (``own``), else ``config.KEY``."""
    from abricot_local.tasks.base import TaskOptions

    if where is not None and Path(where).name != RESULTS:
        where = Path(where) / RESULTS
    return TaskOptions.from_config(dict(config), where=None if where is None else str(where),
                                   at=lambda key: f"tasks.{task}.config" if task and key in own else "config",
                                   owns=[own] if task else owns)


def options_of(record: Record, task: str | None = None, where: str | Path | None = None):
    """The task options ``record`` ran ``task`` with (None: the run's, before any task's own); ``where``:
    the run's folder, named by an error."""
    if task is None:
        return task_options(record.config_dict(), where, owns=[e.config for e in record.tasks.values()])
    return task_options(record.task_config(task), where, task, record.tasks[task].config)


def task_samples(folder: str | Path, entry: TaskEntry, key: str, *, counted: bool = True) -> list[Sample]:
    """The samples of a finished run's task (its ``key``) from its folder: record.entry_samples, each line
    holding the task's own fields its metrics read, of their types (``Task.sample_fields``): the one reading
    every reader shares (`report`, `compare`, `merge`, `check`). A task not known here declares none (its
    readers name it)."""
    from abricot_local.tasks import task_class

    try:
        fields = task_class(key).sample_fields
    except TaskError:
        fields = {}
    return entry_samples(Path(folder), entry, key, counted=counted, fields=fields)


def plugin_words(plugin: TaskPlugin) -> str:
    """A recorded plugin as a message names it: ``plugin rc-italiano 0.1.0 (rc_italiano:ArticoloTask)``."""
    made = " ".join(x for x in (plugin.package, plugin.version) if x)
    return f"plugin {made} ({plugin.entry_point})" if made else f"plugin {plugin.entry_point}"


def unknown_task(key: str, entry: TaskEntry | None, where: str | Path | None = None,
                 wrote: str | None = None) -> TaskError | None:
    """None when the task of a run's task key ``key`` is registered here; else the error a reader that needs its
    class raises: the plugin the run recorded for it (``entry``, its ``tasks.KEY``: ``plugin``) and how to get it,
    or, where the run records none (a task another abricot-local shipped, or a run written before runs recorded
    their plugins), what wrote the run (``wrote``: its ``provenance.abricot_local``). ``where``: the run, named."""
    from abricot_local.tasks import all_task_names, base_name

    name = base_name(key)
    if name in all_task_names():
        return None
    plugin = entry.plugin if entry is not None else None
    if plugin is not None and plugin.package:
        pin = f"{plugin.package}=={plugin.version}" if plugin.version else plugin.package
        how = f"recorded by {plugin_words(plugin)}: install it to read this run (pip install '{pin}')"
    elif plugin is not None:
        how = (f"recorded by {plugin_words(plugin)}, an entry point of no installed package: register that class "
               "(entry-point group abricot_local.tasks) to read this run")
    else:
        how = ("the run records no plugin for it (a task another abricot-local shipped, or a run written before "
               f"runs recorded their tasks' plugins{f'; written by abricot-local {wrote}' if wrote else ''}): "
               "install the package that provides it to read this run")
    run = f" in {where}" if where is not None else ""
    return TaskError(f"unknown task {name!r}{run}: {how}. Tasks here: {', '.join(sorted(all_task_names()))}")


def require_tasks(record: Record, where: str | Path | None = None) -> None:
    """Every task ``record`` ran registered here (a reader that builds each one: `check`, `kld`, `merge`), else
    :func:`unknown_task`'s error for the first that is not."""
    wrote = record.provenance.abricot_local if record.provenance is not None else None
    for key, entry in record.tasks.items():
        if (err := unknown_task(key, entry, where, wrote)) is not None:
            raise err


def check_recorded_options(record: Record, where: str | Path) -> None:
    """Every option ``record`` holds read by its field, as a re-scoring reads them (`check`, `kld`, `merge`): the
    run's task options, each task's (its config over the run's) and its backend's; a value of the wrong type is
    a ResultsError naming ``where`` (the run's folder) and the key. A task not registered here is a TaskError
    naming the plugin the run recorded for it (:func:`require_tasks`: a re-scoring builds every task); a backend
    not known here is left to the reader that opens it."""
    from abricot_local.backends import BACKENDS, options_class
    from abricot_local.record.codec import Invalid, check_options

    require_tasks(record, where)
    options_of(record, None, where)
    for task in record.tasks:
        options_of(record, task, where)
    if record.backend in BACKENDS:
        try:
            check_options(options_class(record.backend), record.config_dict())
        except Invalid as err:
            raise ResultsError(f"{Path(where) / RESULTS} is malformed: {err.raw()}") from None


@dataclass(frozen=True, eq=False)
class RunTask:
    """One task instance of a finished run: its key (``name``: the key it is compared under; ``key``: its
    own, when alignment.py pairs it under another's), its config (the run's with the task's own over it),
    its record entry, and its samples: held (``given``: an lm-eval output's, a re-scoring's) or read from
    the run's folder when first asked (task_samples: validated, exactly the entry's ``n``)."""

    name: str
    config: Mapping[str, Any] = field(default_factory=dict, repr=False)
    given: tuple[Sample, ...] | None = field(default=None, repr=False)
    key: str = ""
    folder: str | None = field(default=None, repr=False)  # absolute: made so once, a later os.chdir moves nothing
    entry: TaskEntry | None = field(default=None, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "folder", None if self.folder is None else os.path.abspath(self.folder))

    @property
    def own_key(self) -> str:
        return self.key or self.name

    @cached_property
    def samples(self) -> tuple[Sample, ...]:
        if self.given is not None:
            return self.given
        if self.folder is None or self.entry is None:
            return ()
        return tuple(task_samples(self.folder, self.entry, self.own_key))

    @property
    def options(self):
        """The task options it ran with (tasks.base.TaskOptions)."""
        own = self.entry.config if self.entry is not None else {}
        return task_options(self.config, self.folder, self.own_key, own)

    def instance(self):
        """The task instance it ran as (its own key, its options; its data found where `run` finds it); a task not
        registered here names the plugin its entry recorded (:func:`unknown_task`)."""
        from abricot_local.tasks import make_task

        if (err := unknown_task(self.own_key, self.entry, self.folder)) is not None:
            raise err
        return make_task(self.own_key, self.options)

    def renamed(self, name: str) -> RunTask:
        """This instance compared under ``name`` (its own key kept), its samples carried over."""
        return replace(self, name=name, key=self.own_key, given=self.samples)

    def with_samples(self, samples: Sequence[Sample]) -> RunTask:
        return replace(self, given=tuple(samples))


def scored_text(record: Record, tasks: Mapping[str, TaskEntry] | None = None) -> str:
    """What a run scored (of ``tasks``, None: all), as a label says it: ``sample 20``, ``limit 5``, ``all 1600``."""
    c = record.config
    if c is not None and c.sample:
        text = f"sample {c.sample}"
    elif c is not None and c.limit:
        text = f"limit {c.limit}"
    else:
        text = "all " + "/".join(str(n) for n in dict.fromkeys(e.n for e in (tasks or record.tasks).values()))
    return text + (f", shard {c.shard}" if c is not None and c.shard else "")


@dataclass(frozen=True, eq=False)  # __eq__: the same folder, record and tasks
class Run:
    """One finished run: a run folder's record and samples, or an lm-eval output read as a run
    (``lm_eval``); with the model identity the comparisons use (``base``, ``quant``: from the model's
    registry entry, else the base the run recorded, else its name) and a label (unique among the runs shown
    together: :func:`labelled`)."""

    path: str
    record: Record = field(repr=False)
    run_tasks: tuple[RunTask, ...] | None = field(default=None, repr=False)  # None: the record's, read from path
    label: str = ""
    base: str = ""  # the model its quants share: registry ``base``, else the recorded one, else the name unquantized
    quant: str = ""  # registry ``quant``, else parsed from the name or the file
    registry_alias: str | None = None
    reproduces: tuple = ()  # the registry entry's published rows (tasks.base.Reference)
    lm_eval: bool = False  # an lm-eval output read as a run
    folder: str = field(default="", repr=False)  # ``path`` made absolute once: every read goes there, whatever os.chdir

    def __post_init__(self):
        put = object.__setattr__
        put(self, "path", os.fspath(self.path))
        put(self, "folder", os.path.abspath(self.folder or self.path))
        if self.run_tasks is None:
            put(self, "run_tasks", tuple(RunTask(k, self.record.task_config(k), folder=self.folder, entry=e)
                                         for k, e in self.record.tasks.items()))
        put(self, "label", self.label or self.model_label)
        put(self, "quant", self.quant or quant_of(self.model_label) or quant_of(self.record.model.path or ""))
        put(self, "base", self.base or self.record.model.base or strip_quant(self.model_label))

    # -- who ran what -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.record.model.name or Path(self.path).name

    @property
    def alias(self) -> str | None:
        return self.record.model.alias

    @property
    def backend(self) -> str:
        return self.record.backend

    @property
    def model_label(self) -> str:
        return self.record.model.alias or self.record.model.name or Path(self.path).name

    @property
    def synthetic(self) -> bool:
        """Numbers from a synthetic backend (the fake), not from a model."""
        return self.record.synthetic

    @property
    def source(self) -> str:
        kind = "lm-eval output" if self.lm_eval else "run"
        return f"{kind} ({self.backend} backend, not a model)" if self.synthetic else kind

    @property
    def identity(self) -> RunIdentity:
        """What its label may say over its tasks (``run_tasks``: compare's), options as compare's (labels.options_over)."""
        own = {t.own_key for t in self.run_tasks}
        tasks = {k: e for k, e in self.record.tasks.items() if k in own} or self.record.tasks
        options, resolved, mixed = options_over([e.config for e in self.record.tasks.values()],
                                                [e.config for e in tasks.values()], recorded.options(self.record))
        return RunIdentity(self.label, self.quant, self.path, self.record.created or "", options,
                           not self.quant or bool(quant_of(self.label)), scored_text(self.record, tasks), resolved, mixed)

    @cached_property
    def settings(self) -> dict[str, Any]:
        """Every recorded setting, flat (record.settings.settings), with the quant as identified."""
        return recorded.settings(self.record, self.quant)

    @property
    def kernels(self):
        """The kernel path the numbers were computed on (record.Kernels; None: not recorded)."""
        from abricot_local.record.kernel_path import recorded as kernels

        return kernels(self.record.provenance)

    def identified(self, registry: Mapping | None) -> Run:
        """This run with its model's registry entry (by alias, name, SHA-256 or file name) saying its
        ``base``, ``quant`` and published rows; itself when the registry names it nowhere."""
        from abricot_local.analysis import baselines

        spec = _match(self.record.model, registry or {})
        if spec is None:
            return self
        return replace(self, base=spec.base or self.base, quant=spec.quant or self.quant, registry_alias=spec.name,
                       reproduces=baselines.parse_reproduces(spec.reproduces)[0])

    # -- its tasks ----------------------------------------------------------------------------
    @property
    def tasks(self) -> tuple[str, ...]:
        """The task keys, in the order run."""
        return tuple(t.name for t in self.run_tasks)

    def task(self, name: str) -> RunTask | None:
        return next((t for t in self.run_tasks if t.name == name), None)

    def samples_of(self, task: str) -> tuple[Sample, ...]:
        """One task's samples, in item order, each line checked (as many as the record's ``n``)."""
        t = self.task(task)
        if t is None:
            raise ResultsError(f"{self.path} has no task {task!r}; its tasks: {', '.join(self.tasks) or 'none'}")
        return t.samples

    def only(self, *tasks: str) -> Run:
        """This run with only ``tasks`` (a comparison of one task)."""
        return replace(self, run_tasks=tuple(t for t in self.run_tasks if t.name in tasks))

    def rescored(self, provenance: Provenance, samples: Mapping[str, Sequence[Sample]]) -> Run:
        """This run as re-scored here (`check`): what this machine's backend recorded laid over the
        recorded provenance, and the re-scored samples of each task that has any."""
        record = replace(self.record, provenance=recorded.overlay(self.record.provenance, provenance)
                         if self.record.provenance is not None else provenance)
        tasks = tuple(t.with_samples(samples[t.name]) for t in self.run_tasks if samples.get(t.name))
        return replace(self, record=record, run_tasks=tasks, label=f"{self.label} (re-scored here)")

    @property
    def metric_values(self) -> tuple[Metric, ...]:
        """Every recorded metric with its CI, task by task."""
        return tuple(Metric(task, name, value, ci) for task, entry in self.record.tasks.items()
                     for name, value, ci in entry.metric_items())

    @property
    def task_n(self) -> tuple[tuple[str, int], ...]:
        return tuple((task, entry.n) for task, entry in self.record.tasks.items())

    # -- for a notebook (frames.py; pandas loads when called) ----------------------------------
    def metrics(self):
        """One row per task and metric: task, metric, value, ci_low, ci_high, chance, n."""
        from abricot_local.analysis import frames

        return frames.metrics(self)

    def samples(self, task: str | None = None):
        """One row per scored item (every task, or ``task``): task, id, source, gold, pred, their
        labels, correct, ``logprob_0`` .. ``logprob_{K-1}`` (each choice's log-likelihood, in the
        task's choice order), then the task's own fields."""
        from abricot_local.analysis import frames

        return frames.samples(self, task)

    def published(self):
        """The published rows the model's registry entry reproduces, against this run, as the run
        recorded them (the reproduction verdict, its margin, the 90% CI of run - published, the items
        that would settle it, the reasons; no registry is read)."""
        from abricot_local.analysis import frames

        return frames.published(self)

    def to_lm_eval(self, folder: str | os.PathLike) -> Path:
        """lm-eval's results layout in ``folder`` (lm_eval_output.py); the model's subfolder."""
        from abricot_local.analysis import lm_eval_output

        if not isinstance(folder, (str, os.PathLike)):  # a path argument of the API: one line naming the keyword
            raise UsageError(f"to_lm_eval(): folder must be text or a path, got {folder!r} ({type(folder).__name__})")
        return lm_eval_output.export(self, folder)

    def __repr__(self) -> str:
        return f"Run({self.path!r}: {self.model_label}, {', '.join(self.tasks)})"

    def __eq__(self, other: object) -> bool:
        """The same run (folder, record: NaN equal to NaN, tasks), however had (`evaluate`'s, `load_run`'s)."""
        if not isinstance(other, Run):
            return NotImplemented
        return (self.folder, self.lm_eval, self.tasks) == (other.folder, other.lm_eval, other.tasks) and recorded.same_record(
            self.record, other.record)

    def __hash__(self) -> int:  # equal runs share their folder
        return hash((Run, self.folder))

    def _repr_html_(self) -> str:
        """The run in Jupyter (frames.html), then each task's recorded warnings (what makes its numbers
        misleading), as `run` prints them under its summary: in the record's words."""
        import html

        from abricot_local.analysis import frames

        said = [f"<li>{html.escape(f'{task}: {w}')}</li>" for task, e in self.record.tasks.items() for w in e.warnings]
        return frames.html(self) + (f"<p><small>warnings:</small></p><ul>{''.join(said)}</ul>" if said else "")


def _match(model, registry: Mapping) -> object | None:
    """The registry entry of a recorded model: by alias or name, else its file's SHA-256 or name."""
    folded = {k.lower(): v for k, v in registry.items()}
    for key in (model.alias, model.name):
        if key and key.lower() in folded:
            return folded[key.lower()]
    sha, path = (model.sha256 or "").lower(), model.path
    for spec in registry.values():
        if sha and spec.sha256 and spec.sha256[0].lower() == sha:
            return spec
        if path and Path(spec.file).name == Path(path).name:
            return spec
    return None


def labelled(runs: Sequence[Run]) -> list[Run]:
    """The runs, each labelled uniquely among them (labels.unique_labels)."""
    labels = unique_labels([r.identity for r in runs])
    return [replace(r, label=lab) for r, lab in zip(runs, labels)]

