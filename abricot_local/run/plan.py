"""The plan of a run: a request's model located once (models.locate.locate), its tasks, their data and
items, checked before anything heavy loads. ``run --dry-run`` costs this plan (dry_run.py, nothing
fetched: a task without its data is kept with its problem), and ``run`` executes the same plan, the
model fetched (execute.py).

No task or backend is named here: tasks come from the registry (entry points)
and declare their data; a backend class declares whether it reads a model
file, its options and what its config records, and gives its memory facts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from abricot_local import hashing
from abricot_local.backends import backend_class
from abricot_local.backends.options import ScoringOptions
from abricot_local.errors import AbricotError, IntegrityError
from abricot_local.models.ref import Located, ModelRef
from abricot_local.models.locate import locate
from abricot_local.models.sources import held_to_pins
from abricot_local.record import DataFile, Manifest, Record, RunConfig
from abricot_local.run.request import SettleOptions, Shard
from abricot_local.run.resume import finished_in, remargined

if TYPE_CHECKING:  # loaded once the name is located (make_plan): an unknown one is refused before the tasks load
    from abricot_local.tasks.base import TaskOptions
    from abricot_local.tasks.selection import Skipped, TaskRun


TAKEN = "its model file is not here: the finished run is taken as recorded"  # said once (make_plan), a dry run's too


class PinsRefused(IntegrityError):
    """A sweep's model files here that differ from their models.toml pins, refused by its first plan before any item
    is scored: the sweep's refusal (run.session's sweep and a ladder end on it), not one model's failure."""


@dataclass(frozen=True)
class Plan:
    """A request's run of one model: the model located (``located``) and, unless ``dry``, fetched and
    verified (``model``; a dry plan's is the model as far as it is here, else None), the options it
    opens with, the task runs and their data, the item selection."""

    located: Located
    model: ModelRef | None
    backend: str
    backend_options: ScoringOptions
    task_options: TaskOptions
    runs: tuple[TaskRun, ...]
    data: dict[str, tuple[DataFile, ...]]  # task -> the data files it reads, with their SHA-256
    limit: int | None
    force: bool
    sample: int | None = None
    shard: Shard | None = None
    skipped: tuple[Skipped, ...] = ()
    margin: float | None = None  # run --margin: the published verdict's margin (None: each task's)
    dry: bool = False  # run --dry-run's: nothing fetched
    problem: str = ""  # a dry sweep's model that cannot be located: why (no tasks planned; its row says so)
    settle: SettleOptions = SettleOptions()  # --until-settled: the items scored in the nested order, looks taken
    taken: str = ""  # its model's file not here, taken as a finished run recorded it (_located): TAKEN, said once

    @property
    def model_label(self) -> str:
        return self.located.label

    @property
    def model_path(self) -> str | None:  # None for a backend that reads no model file
        return str(self.model.path) if self.model.path else None

    @property
    def model_sha256(self) -> str | None:
        return self.model.sha256

    @property
    def reproduces(self) -> str:  # the registry entry's ``reproduces`` field
        return self.model.reproduces if self.model else self.located.reproduces

    @property
    def unheld(self) -> str:
        """The published rows the registry entry names that this run is not held to, "" when none: its numbers
        are no model file's (a synthetic model: a backend that reads no model file scored a label), so they are
        not the model's. Either that backend stood in for the entry's model file (the run makes no comparison:
        ``reproduces`` is ""), or the entry is that backend's own, a synthetic entry (the comparison is made, and
        shown as made on synthetic numbers, never as a model's verdict: console.verdict)."""
        if not self.reproduces:
            return self.located.reproduces
        model = self.model if self.model is not None else self.located.ref
        return self.reproduces if model is not None and model.synthetic else ""

    @property
    def quant(self) -> str:  # the registry entry's quant, else the file's
        return self.model.quant

    def model_config(self) -> RunConfig:
        """The model and the options it scores with (lm-eval's provenance records these)."""
        return RunConfig.joined(backend_class(self.backend).config(self.backend_options), at="config",
                                model=self.model.config_name, backend=self.backend)

    def config(self) -> RunConfig:
        """Every option that can change a number (recorded), then --until-settled's (recorded, not compared on
        --resume: the items a stopped run holds are its ``sample``, and those are compared)."""
        return self._config(settle=True)

    def compared(self) -> RunConfig:
        """The options a --resume compares (the manifest's config)."""
        return self._config()

    def _config(self, *, settle: bool = False) -> RunConfig:
        """The run's own settings, then the options' recorded forms: the tasks', the backend's (and ``settle``:
        --until-settled's)."""
        shard = {"shard": str(self.shard)} if self.shard else {}
        return RunConfig.joined(self.task_options.config(), backend_class(self.backend).config(self.backend_options),
                                self.settle.config() if settle else {}, at="config", model=self.model.config_name,
                                backend=self.backend, tasks=tuple(r.task.key for r in self.runs), limit=self.limit,
                                sample=self.sample, **shard)

    def manifest(self) -> Manifest:
        """What a resume of this plan must match (the record's manifest)."""
        return Manifest(config=self.compared(), model_sha256=self.model_sha256,
                        data_sha256={k: tuple(f.sha256 for f in files) for k, files in self.data.items()},
                        task_versions={r.task.key: r.task.version for r in self.runs})


def make_plan(request, model: str | None = None, *, located: Located | None = None, dry: bool = False,
              tasks: bool = True, fresh: bool | None = None, notify=None, keep_going: bool = False,
              before_download=None) -> Plan:
    """The plan of ``model`` (default: the request's first) in ``request`` (a run.request.RunRequest),
    validated before anything heavy is loaded or downloaded: the name located once (an unknown one
    fails first; ``located``: found already, by a recorded run's SHA-256; a sweep's, with every model file of the
    sweep here held to its models.toml pins: :func:`_located`) and the options it opens with made
    (once), a registry model's memory and disk checked before its download (unless --force), the tasks and
    their data, the items after
    --limit/--sample/--shard; then (a run, not ``dry``) the model fetched and verified and the data
    hashed (``fresh``, default --resume: every file hashed from its bytes); a --resume of a folder holding a
    finished run (resume.finished_in) fetches no data, and a task of it whose data is not here takes its files'
    SHA-256 and its items' count from the record (run_plan finds the run finished, needing none, or refuses to
    score that task); nor its model, whose file not here is taken as recorded, said once (:func:`_located`).
    ``dry`` (``run --dry-run``): nothing fetched or hashed, a task whose data is not here kept with its problem, a
    finished run's model whose file is not here taken as recorded (said) as the run takes it.
    ``tasks`` False: the model only (lm-eval's). ``keep_going`` (a dry sweep's): a model that cannot be
    located is a plan with its ``problem`` and no task, not an error (a task's error is the command's).
    ``before_download`` (a run's): told the dry plan (nothing fetched) once the tasks are chosen, when the model
    is to be downloaded: what the run costs, before a download that may take long."""
    r = request
    fresh = (r.resume if fresh is None else fresh) and not dry
    try:
        located, held = _located(r, model or r.models[0], dry=dry, notify=notify, fresh=fresh, tasks=tasks,
                                 found=located)
    except AbricotError as err:
        if not (dry and keep_going) or isinstance(err, PinsRefused):  # a wrong pin: the sweep's refusal, dry or not
            raise
        name, kind = model or r.models[0], r.given.backend
        return Plan(Located(name, kind), None, kind, r.given.checked(), r.task_options, (), {}, r.limit, r.force,
                    r.sample, r.shard, dry=True, problem=err.raw().splitlines()[0])
    options = located.options(r.given)  # the options it opens with, made once: the dry plan's and the run's
    taken = TAKEN if located.ref is not None and located.ref.sha256_origin == hashing.RECORDED else ""
    if notify is not None and taken:  # a dry plan's too: its dry run says what the run does (run.dry_run)
        notify(f"resume: {located.name}: {taken}")
    from abricot_local.analysis.baselines import reproduced_protocols
    from abricot_local.tasks.selection import Count, select

    named = reproduced_protocols(located.reproduces, located.entry) if tasks and not r.task_keys else {}
    runs, skipped = select(r.task_options, spec=r.task_spec, keys=r.task_keys, named=named, limit=r.limit,
                           sample=r.sample, shard=r.shard, dry=dry,  # --until-settled: its sample is its bound
                           count=Count.BOUND if r.settle.on else Count.SAMPLE, held=held) if tasks else ((), ())
    if before_download is not None and not dry and located.pending is not None and located.pending.fetches:
        before_download(Plan(located, None, located.backend, options, r.task_options, tuple(runs),
                             {}, r.limit, r.force, r.sample, r.shard, skipped, r.margin, True, settle=r.settle))
    ref = located.ready(options, fetch=not dry, force=r.force, notify=notify, fresh=fresh)
    with hashing.afresh(fresh):  # the data's SHA-256, from the bytes on a --resume (its model's: located.ready)
        data = {} if dry else {t.task.key: (held.tasks[t.task.key].data if t.task.key in held.tasks else ())
                               if t.problem else  # held: its record's (a task it lacks: none; its options refused)
                               tuple(DataFile(path=os.path.abspath(f.path), sha256=f.sha256)
                                     for f in t.task.data_files()) for t in runs}  # absolute: `check`
        # finds them from any folder (made absolute without following a symlink: the path as the run named it)
    return Plan(located, ref, located.backend, options, r.task_options, tuple(runs), data, r.limit, r.force, r.sample,
                r.shard, skipped, r.margin, dry, settle=r.settle, taken=taken)


def _located(r, model: str, *, dry: bool, notify, fresh: bool, tasks: bool = True,
             found: Located | None = None) -> tuple[Located, Record | None]:
    """``model`` of request ``r`` located (``found``: located already), and the finished run a --resume's folder
    holds that it does not grow (resume.finished_in, read first: None unless a --resume of a run, ``tasks``, not
    dry). That run's model whose file is not here is taken as recorded (locate's ``recorded``: a finished run's
    --resume needs no model file, as it needs no data; one whose verdict is judged again at another --margin needs
    it: run.found.rejudged), by a ``dry`` plan too (its dry run says what the run does: run.dry_run). Located by
    models.locate.locate, nothing fetched; in a sweep's plan every model of the sweep too, each file here held to
    its models.toml pins (sources.held_to_pins: the check its fetch makes; the hash remembered, so a later plan and the fetch's own check read nothing): the sweep's first plan refuses a wrong pin,
    naming its entry, before the sweep scores its first item, not after the models before it ran. A dry plan holds a
    file to its pin only where its hash is remembered (nothing read to hash it), a dry sweep's every model's too: it
    refuses the sweep as its run will. A model of the sweep that cannot be located is left to its own
    plan, one to download to its download; every wrong pin is named, one line each (a sweep's: :class:`PinsRefused`)."""
    finished = finished_in(r.out_folder(model), r.sample) if r.resume and tasks else None
    held = None if dry else finished  # (a dry plan keeps a task whose data is not here as any dry plan does)
    if found is not None:
        return found, held
    recorded = finished.model if finished is not None and not remargined(finished, r.margin) else None
    wrong: list[IntegrityError] = []
    for name in dict.fromkeys((model, *(r.models if r.sweep else ()))):  # its own first: its errors
        own = name == model
        try:
            here = locate(name, backend=r.given.backend, models_file=r.models_file, registry=r.registry,
                          model_dirs=r.model_dirs, notify=notify if own and not dry else None, fresh=fresh and own,
                          digest=own and not dry, recorded=recorded if own else None)
            if here.path is not None and (dry or r.sweep):  # a registry entry's file
                held_to_pins(here.spec, fresh=fresh and own, remembered=dry)
        except IntegrityError as err:
            wrong.append(err)
            continue
        except AbricotError:
            if own:
                raise
            continue
        found = here if own else found
    if wrong and r.sweep:
        raise PinsRefused("\n".join(err.raw() for err in wrong))
    if wrong:
        raise wrong[0]
    return found, held
