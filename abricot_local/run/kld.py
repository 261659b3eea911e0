"""``abricot-local kld REF RUN...``: the full-vocabulary KL divergence of each RUN's model against
REF's, on the tasks' own text, streamed; the reference decoded once for every rung that fits beside it.

REF and each RUN are finished runs (analysis.runs.Run, or their folders: a `run --quants` sweep's). REF's
items are rebuilt as `check` rebuilds them (its recorded tasks, options and data); REF's model and each RUN's
model are found again by their recorded SHA-256 and opened with REF's recorded options; a RUN whose record says
its model is another than REF's (models.quants.mixed) is refused before any is looked for. :func:`ladder_of`
plans it (the `kld --dry-run` of kld_cost.py costs the same plan): each rung's items (those both runs
scored, ``--limit``: the first N of each task), and the rungs in groups that fit in memory beside the
reference (weights, KV caches and each model's output rows: backends.kld.ladder_groups; rungs that
scored other items apart), one reference pass a group. In a pass, the reference and the group's rungs
are loaded together and one engine runs the canonical schedule over them through the run's loop
(execute.score_items) by a :class:`~abricot_local.backends.kld.LadderBackend`: the reference decodes
each call once, every rung the same call, each model asked for a row at every token it decodes
(prompt and continuations, each item counted whole, its cached prefix's rows in each: at most n_batch rows a
call); each
call's rows are compared over the whole vocabulary on the run's threads and dropped. A rung's
statistics are the same bits alone or in any pass (backends/kld.py). Each item's rows are marked as it
is done (KlRows.mark): the statistics (analysis/kld.py) give the mean's CI over the items, its sampling
units, and the per-token standard error beside it. They go into each RUN's folder, ``kld.json``, under REF's model SHA-256 (merged under the file's lock: two
`kld` at once keep both entries), where `report`, `compare` and the API read them; a pass's seconds
and decode calls are its rungs' alike. Each pass's tasks get progress lines of their own, from 0.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from abricot_local.analysis import kld as stats
from abricot_local.analysis.runs import Run
from abricot_local.backends import backend_class
from abricot_local.backends.engines import once
from abricot_local.backends.kld import Footprint, KlRows, LadderBackend, TokenizedUnlike, ladder_groups
from abricot_local.errors import ResultsError, UsageError
from abricot_local.gguf.file import model_bytes
from abricot_local.memory import Fit
from abricot_local.models.given import load
from abricot_local.models.ref import ModelRef
from abricot_local.run.check import recorded_model, recorded_plan, recorded_run
from abricot_local.run.check_data import recorded_task_options
from abricot_local.run.execute import open_backend, prepared, score_items
from abricot_local.run.plan import Plan

Progress = Callable[[str, int, int], None]
ROW_BYTES = 4  # an output row's entry: a float32 logit (llama.cpp's)
MEASURES = "kld measures"  # what kld does to runs, as a refused one is told


@dataclass(frozen=True)
class KldResult:
    reference: Path
    run: Path
    quant: str
    tasks: dict  # task -> analysis.kld.KldStats
    seconds: float  # its pass's, shared by the pass's rungs
    decode_calls: int  # per model, its pass's
    pass_rungs: tuple[Path, ...] = ()  # the runs measured in the same reference pass (itself included)

    def entry(self, reference, model, options) -> stats.KldEntry:
        """What kld.json keeps of it: ``reference`` and ``model`` REF's and its run's record.Model, ``options`` the
        pass's (engine, n_batch); folders absolute, seconds to the ms."""
        return stats.KldEntry(dict(self.tasks), model.sha256, str(Path(self.reference).absolute()), reference.name,
                              reference.sha256, self.quant, round(self.seconds, 3), self.decode_calls,
                              tuple(str(Path(p).absolute()) for p in self.pass_rungs), options.engine, options.n_batch)

    def to_json(self) -> dict:
        """As ``kld --json`` prints it: each task's statistics with what they cover (KldStats.record)."""
        return {"reference": str(self.reference), "run": str(self.run), "quant": self.quant, "seconds": self.seconds,
                "decode_calls": self.decode_calls, "pass_runs": [str(p) for p in self.pass_rungs],
                "tasks": {t: s.record() for t, s in self.tasks.items()}}


@dataclass(frozen=True)
class Rung:
    """A RUN to measure: its finished run, its model found again, its quant, and per task the ids of
    the items it shares with REF (after --limit, in REF's order)."""

    run: Run
    model: ModelRef
    quant: str
    items: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def name(self) -> str:
        return self.quant or Path(self.run.path).name


@dataclass(frozen=True)
class Memory:
    """What the models of a ladder hold (backends.kld.Footprint: weights, KV cache, output rows) and the
    memory they may use (``available``: RAM, None when unknown; free VRAM; the RPC servers')."""

    reference: Footprint
    rungs: tuple[Footprint, ...]
    available: int | None
    vram: int = 0
    remote: int = 0

    def fit(self, group: Sequence[int]) -> Fit | None:
        """A pass's models against the memory (None: RAM unknown); its weights hold the output rows."""
        models = [self.reference, *(self.rungs[k] for k in group)]
        if self.available is None:
            return None
        return Fit(sum(m.weights + m.rows for m in models), sum(m.kv for m in models), self.available, self.vram,
                   self.remote)

    def rows(self, group: Sequence[int]) -> int:
        return self.reference.rows + sum(self.rungs[k].rows for k in group)


@dataclass(frozen=True)
class Ladder:
    """kld's plan: REF (its run, its model, the plan of its recorded run), the rungs, the reference
    passes (``groups``: the rungs' indices, each group one pass) and the memory they were fitted in
    (None: the backend gives no memory facts, or --force)."""

    ref: Run
    model: ModelRef
    plan: Plan
    rungs: tuple[Rung, ...]
    groups: tuple[tuple[int, ...], ...]
    memory: Memory | None
    threads: int  # the threads comparing each call's rows (the run's own)

    def passes(self) -> list[list[Rung]]:
        return [[self.rungs[k] for k in g] for g in self.groups]


def _model(run: Run, dry: bool = False) -> ModelRef:
    """The run's model found again where the run recorded it, checked by its SHA-256 (run.check);
    ``dry`` (--dry-run): not hashed, the recorded SHA-256 taken as its (the real run checks it)."""
    give = f"kld opens the model of {run.path} where that run recorded it, and checks its SHA-256: put the file back there"
    rec = run.record.model
    if not dry or not rec.path or not Path(rec.path).is_file():
        _not_searched(run, give)
        return recorded_model(run.record, give=give)
    from dataclasses import replace

    from abricot_local.models.locate import resolve_model_ref

    ref = resolve_model_ref(rec.path, backend=run.record.config.backend, offline=True, progress=False, digest=False)
    return replace(ref, sha256=rec.sha256)


def _not_searched(run: Run, give: str) -> None:
    """A recorded file that is gone whose run was given a bare file name (found in a --model-dir or llama.cpp's
    cache): kld takes no --model-dir, so its name is searched for in llama.cpp's cache only (run.check's
    recorded_model); where that finds nothing it is refused with kld's advice (``give``), not the search's (which
    names --model-dir)."""
    rec = run.record.model
    name = rec.as_written
    if not rec.path or Path(rec.path).is_file() or rec.source in (None, "path", "registry") or not name:
        return  # (recorded_model's own rule: the file as recorded, else the name as it was written)
    from abricot_local.models import stores

    if Path(name).name != name or stores.prefix_of(name) or stores.find_by_file_name(name) is not None:
        return
    raise ResultsError(f"the recorded model file {rec.path} is missing, and {name} (the file name the run was given) "
                       f"is not in llama.cpp's cache; {give}")


def _ids(run: Run) -> dict[str, set[str]]:
    return {t.name: {s.id for s in t.samples} for t in run.run_tasks}


def threads_of(kind: str, options) -> int:
    """The rows' comparing threads: the run's, as backend ``kind`` resolves them (its class's ``kernel_threads``,
    where it has a ``threads`` option: resume.takes_threads); else (none, or not known) every core."""
    from abricot_local.run.resume import takes_threads

    given = backend_class(kind).kernel_threads(options) if takes_threads(kind) else None
    return max(1, given or os.cpu_count() or 1)


def ladder_of(reference, runs: Sequence, *, data_dir: str | None = None, backend_values: dict | None = None,
              limit: int | None = None, force: bool = False, dry: bool = False, data=()) -> Ladder:
    """kld's plan (see the module's text); nothing loaded but headers. ``dry``: the models' files not
    hashed (``kld --dry-run``). ``data_dir``, ``data``: where REF's data is, if it moved (as `check` finds it:
    run/check_data.py)."""
    if not runs:
        raise UsageError("kld needs a reference run and at least one run to measure against it")
    ref = recorded_run(reference, by=MEASURES)
    record = ref.record
    kind = record.config.backend
    measured = [recorded_run(r, by=MEASURES) for r in runs]
    for run in measured:  # what the records refuse, refused before any model file is opened or hashed
        _measurable(ref, run)
    found = _model(ref, dry)
    options = recorded_task_options(record, data_dir, data)
    # each token decoded once (engines.once): a token decoded again would be a row counted again
    p = recorded_plan(record, found, options, backend_values, engine=once, dry=dry)
    ref_ids = _ids(ref)
    rungs = []
    for run in measured:
        model = _model(run, dry)
        items = _common(p, ref_ids, _ids(run), limit)
        if not items:
            raise ResultsError(f"{run.path} and {ref.path} have no item in common")
        rungs.append(Rung(run, model, run.quant or model.quant, items))
    groups, mem = _passes(kind, (ref, found), rungs, p.backend_options, force)
    return Ladder(ref, found, p, tuple(rungs), groups, mem, threads_of(kind, p.backend_options))


def _measurable(ref: Run, run: Run) -> None:
    """Refuse a RUN kld cannot measure against REF, from the two records alone: REF itself, another backend's, or
    the run of another model (models.quants.mixed: an architecture or a vocabulary size of its own; quants of one
    model share both, whatever their names or registry ``base``)."""
    if Path(run.path).resolve() == Path(ref.path).resolve():
        raise UsageError(f"{run.path} is the reference itself")
    if run.backend != ref.record.config.backend:
        raise UsageError(f"{run.path} was run with another backend than {ref.path}; kld compares one backend's "
                         "models")
    from abricot_local.models.quants import mixed

    def named(r: Run) -> str:
        base = r.base or r.record.model.base
        return f"{r.record.model.name}" + (f" (base {base})" if base and base != r.record.model.name else "")

    what = mixed([(named(ref), ref.record), (named(run), run.record)])
    if what:
        raise UsageError(f"{run.path} and {ref.path} are not quants of one model: their models differ in {what}. "
                         "kld measures quants of one model against each other, on the same tokens: give a reference "
                         "and runs of quants of its model (the folders of one sweep of its quants)")


def _common(p: Plan, ref_ids: dict, theirs: dict, limit: int | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Per task of REF's plan, the ids of the items both runs scored, in REF's order (the first
    ``limit``); the tasks with none left out."""
    out = []
    for t in p.runs:
        name = t.task.key
        ids = [it.id for it in t.items if it.id in ref_ids.get(name, ()) and it.id in theirs.get(name, ())]
        if ids:
            out.append((name, tuple(ids[:limit] if limit else ids)))
    return tuple(out)


def _passes(kind: str, ref: tuple[Run, ModelRef], rungs: Sequence[Rung], options, force: bool
            ) -> tuple[tuple[tuple[int, ...], ...], Memory | None]:
    """The rungs in reference passes (backends.kld.ladder_groups; each rung's key: its items) and the
    memory they were fitted in. The backend's memory facts (preflight) asked once a model: the
    reference's VRAM and RPC servers' memory are the budget's. ``force``, or no memory facts: memory
    not counted."""
    from abricot_local import memory

    keys = [r.items for r in rungs]
    cls = backend_class(kind)
    facts = cls.preflight(ref[1].path, options)
    if facts is None or force:
        return tuple(ladder_groups(Footprint(0, 0), [Footprint(0, 0)] * len(rungs), available=None, keys=keys)), None

    def footprint(run: Run, model: ModelRef, kv: int) -> Footprint:
        n_vocab = (run.record.provenance.n_vocab or 0) if run.record.provenance else 0
        return Footprint(model_bytes(model.path) if model.path else 0, kv,
                         rows=options.n_batch * n_vocab * ROW_BYTES, label=model.label)

    mem = Memory(footprint(*ref, facts.kv_bytes),
                 tuple(footprint(r.run, r.model, (cls.preflight(r.model.path, options) or facts).kv_bytes)
                       for r in rungs), memory.available_memory(), facts.vram, facts.remote)
    return tuple(ladder_groups(mem.reference, mem.rungs, available=mem.available, vram=mem.vram, remote=mem.remote,
                               keys=keys)), mem


def kld_runs(reference, runs: Sequence, *, data_dir: str | None = None, backend_values: dict | None = None,
             limit: int | None = None, force: bool = False, progress: Progress | None = None,
             notify: Callable[[str], None] | None = None, data=()) -> list[KldResult]:
    """The KLD of each run in ``runs`` against ``reference`` (finished runs: analysis.runs.Run or their
    folders; see the module's text), written into each run's folder as its pass ends; ``limit``: the
    first N common items of each task (in the reference's order). REF's items are the plan of its
    recorded run (run.request.of_record), as `check` rebuilds them."""
    say = notify or (lambda _t: None)
    lad = ladder_of(reference, runs, data_dir=data_dir, backend_values=backend_values, limit=limit, force=force,
                    data=data)
    for r in lad.rungs:  # what write() refuses, refused before any model loads
        _writable(Path(r.run.path) / stats.FILE)
        stats.entries(r.run.path)  # a kld.json of a version not read here
    n, g = len(lad.rungs), len(lad.groups)
    say(f"kld: {n} run{'s' * (n != 1)} against {lad.ref.path}: {g} reference pass{'es' * (g != 1)}"
        + (" (the models that fit in memory together, and runs that scored the same items, share one)" if g > 1
           else ""))
    backend = open_backend(lad.plan)
    out = []
    try:
        task_runs = prepared(lad.plan, backend)
        for k, rungs in enumerate(lad.passes(), 1):
            say(f"kld: pass {k} of {g}: {', '.join(str(r.run.path) for r in rungs)} against {lad.ref.path}")
            out += _pass(backend, lad, rungs, task_runs, progress)
    finally:
        backend.close()
    return out


def _pass(backend, lad: Ladder, rungs: Sequence[Rung], task_runs, progress) -> list[KldResult]:
    """One reference pass: the group's rungs loaded beside the reference, each task's items scored once
    in lockstep (one progress line a task, from 0), each rung's statistics written into its folder."""
    bopts = lad.plan.backend_options
    loaded = []
    results: list[dict] = [{} for _ in rungs]
    try:
        for r in rungs:
            loaded.append(load(r.model, bopts, force=True))  # the pass's memory was checked (ladder_of)
        rows = [KlRows() for _ in rungs]
        ladder = LadderBackend(backend, loaded, bopts, rows, threads=lad.threads)
        start = time.perf_counter()
        try:
            items_of = dict(rungs[0].items)  # a pass's rungs share their items
            for task_run in task_runs:
                name = task_run.task.key
                ids = set(items_of.get(name, ()))
                items = [it for it in task_run.items if it.id in ids]
                if not items:
                    continue
                for r in rows:
                    r.clear()
                line = f"{name} ({', '.join(r.name for r in rungs)})"
                if progress:
                    progress(line, 0, len(items))
                try:
                    for n, _ in enumerate(score_items(items, ladder), 1):  # the run's loop: the same decode calls
                        for r in rows:
                            r.mark()  # the item's rows: a unit of the CI over the items
                        if progress:
                            progress(line, n, len(items))
                except TokenizedUnlike as err:
                    raise ResultsError(f"{rungs[err.rung].model.label} tokenizes {name}'s text unlike "
                                       f"{lad.ref.record.model.name}: not quants of one model") from None
                for k, r in enumerate(rows):
                    results[k][name] = stats.summarise(r.kl, r.same_top, len(items), r.ends)
            calls = ladder.counters.decode_calls
        finally:
            ladder.close()  # the comparing threads stopped before the models close
        seconds = time.perf_counter() - start
    finally:
        for b in loaded:
            b.close()
    together = tuple(Path(r.run.path) for r in rungs)
    out = [KldResult(Path(lad.ref.path), Path(r.run.path), r.quant, res, seconds, calls, together)
           for r, res in zip(rungs, results)]
    for res, r in zip(out, rungs):
        write(res, lad.ref.record, r.run.record, bopts)
    return out


def _writable(path: Path) -> Path:
    if path.is_symlink():
        raise ResultsError(f"{path} is a symbolic link: kld writes only files of its own")
    return path


def write(res: KldResult, ref_record, rec, options) -> None:
    """Into the run's folder, beside what an earlier `kld` kept against other references: read, merged
    and written under the file's lock (jsonfiles.locked), so a `kld` into the same run at the same time
    keeps its entry too."""
    import json

    from abricot_local.jsonfiles import atomic_write, locked

    path = _writable(res.run / stats.FILE)
    entry = res.entry(ref_record.model, rec.model, options).to_dict()
    with locked(path, "`kld`"):  # the other references' entries kept as they are
        kept = {**stats.entries(res.run), stats.model_key(ref_record.model): entry}
        atomic_write(path, json.dumps({"kind": stats.KIND, "version": stats.VERSION, "references": kept},
                                      indent=1) + "\n")
