"""``abricot-local kld REF RUN...``: the full-vocabulary KL divergence of each RUN's model against
REF's, on the tasks' own text, streamed.

REF and each RUN are finished runs (analysis.runs.Run, or their folders: a `run --quants` sweep's). REF's
items are rebuilt as `check` rebuilds them (its recorded tasks, options and data); REF's model and each RUN's
model are found again by their recorded SHA-256 and opened with REF's recorded options, both loaded at once
(the memory check counts both). An engine runs the canonical schedule over a
:class:`~abricot_local.backends.kld.PairedSession`, so the two models evaluate the same decode
calls, each asked for a row at every token it decodes (context and continuations, as llama-perplexity
over its text: at most n_batch rows a call); each pair of rows is compared over the whole vocabulary and
dropped. The items are those both runs scored. The statistics (analysis/kld.py) go into RUN's folder, ``kld.json``,
under REF's model SHA-256 (merged under the file's lock: two `kld` at once keep both entries), where
`report`, `compare` and the API read them. Each rung's tasks get progress lines of their own, from 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from abricot_local.analysis import kld as stats
from abricot_local.analysis.runs import Run
from abricot_local.backends import backend_class
from abricot_local.backends.kld import KlRows, PairedBackend, TokenizedUnlike
from abricot_local.errors import ResultsError, UsageError
from abricot_local.gguf.file import model_bytes
from abricot_local.models.given import load
from abricot_local.models.ref import Located
from abricot_local.record import read_run
from abricot_local.run.check import _task_options, recorded_model
from abricot_local.run.execute import open_backend, prepared, score_items
from abricot_local.run.plan import make_plan
from abricot_local.run.request import of_record
from abricot_local.run.states import unfinished

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class KldResult:
    reference: Path
    run: Path
    quant: str
    tasks: dict  # task -> analysis.kld.KldStats
    seconds: float
    decode_calls: int


def _finished(run) -> Run:
    """``run`` (a finished analysis.runs.Run, or its folder) as the one finished-run type."""
    if isinstance(run, Run):
        return run
    why = unfinished(run)
    if why:
        raise ResultsError(why)
    return Run(str(run), read_run(run))


def _model(run: Run):
    """The run's model found again where the run recorded it, checked by its SHA-256 (run.check)."""
    return recorded_model(run.record, give=f"kld opens the model of {run.path} where that run recorded it, and "
                                           "checks its SHA-256: put the file back there")


def check_memory(kind: str, paths: Sequence[Path], options) -> None:
    """Both models and both KV caches against this machine's memory (they are loaded together)."""
    from abricot_local import memory

    facts = backend_class(kind).preflight(paths[0], options) if paths else None
    if facts is None:
        return
    memory.check_memory(sum(model_bytes(p) for p in paths), facts.kv_bytes * len(paths), vram=facts.vram,
                        remote=facts.remote)


def _ids(run: Run) -> dict[str, set[str]]:
    return {t.name: {s.id for s in t.samples} for t in run.run_tasks}


def kld_runs(reference, runs: Sequence, *, data_dir: str | None = None, backend_values: dict | None = None,
             limit: int | None = None, force: bool = False, progress: Progress | None = None,
             notify: Callable[[str], None] | None = None) -> list[KldResult]:
    """The KLD of each run in ``runs`` against ``reference`` (finished runs: analysis.runs.Run or their
    folders; see the module's text), written into each run's folder; ``limit``: the first N common items
    of each task (in the reference's order). REF's items are the plan of its recorded run
    (run.request.of_record), as `check` rebuilds them."""
    if not runs:
        raise UsageError("kld needs a reference run and at least one run to measure against it")
    say = notify or (lambda _t: None)
    ref = _finished(reference)
    record = ref.record
    kind = record.config.backend if record.config else ""
    if not kind:
        raise ResultsError(f"{Path(ref.path) / 'results.json'} records no config.backend: its items cannot be rebuilt")
    found = _model(ref)
    request = of_record(record, found.as_written, _task_options(record, data_dir), backend_values)
    p = make_plan(request, located=Located(found.as_written, found.backend, found), fresh=False)
    others = []
    for r in runs:
        run = _finished(r)
        if Path(run.path).resolve() == Path(ref.path).resolve():
            raise UsageError(f"{run.path} is the reference itself")
        if run.backend != kind:
            raise UsageError(f"{run.path} was run with another backend than {ref.path}; kld compares one backend's "
                             "models")
        others.append((run, _model(run)))
    if not force:
        for _, m in others:
            check_memory(kind, [p for p in (found.path, m.path) if p], p.backend_options)
    ref_ids = _ids(ref)
    backend = open_backend(p)
    out = []
    try:
        task_runs = prepared(p, backend)
        for run, model in others:
            say(f"kld: {run.path} against {ref.path}")
            out.append(_one(backend, ref, run, model, p.backend_options, task_runs, ref_ids, limit, progress))
    finally:
        backend.close()
    return out


def _one(backend, ref: Run, run: Run, model, bopts, task_runs, ref_ids, limit, progress) -> KldResult:
    """One rung against the reference: each task's common items scored in lockstep, its own progress
    line per task (from 0: a rung's rate is its own), the statistics written into its folder."""
    other_ids = _ids(run)
    quant = run.quant or model.quant
    rung = load(model, bopts, force=True)
    start = time.perf_counter()
    results = {}
    try:
        rows = KlRows()
        paired = PairedBackend(backend, rung, bopts, rows)
        for task_run in task_runs:
            name = task_run.task.key
            items = [it for it in task_run.items if it.id in ref_ids.get(name, ()) and it.id in other_ids.get(name, ())]
            items = items[:limit] if limit else items
            if not items:
                continue
            rows.kl.clear()
            rows.same_top.clear()
            line = f"{name} ({quant or Path(run.path).name})"
            if progress:
                progress(line, 0, len(items))
            try:
                for n, _ in enumerate(score_items(items, paired), 1):  # the run's loop: the same decode calls
                    if progress:
                        progress(line, n, len(items))
            except TokenizedUnlike:
                raise ResultsError(f"{model.label} tokenizes {name}'s text unlike {ref.record.model.name}: "
                                   "not quants of one model") from None
            results[name] = stats.summarise(rows.kl, rows.same_top, len(items))
        calls = paired.counters.decode_calls
    finally:
        rung.close()
    if not results:
        raise ResultsError(f"{run.path} and {ref.path} have no item in common")
    res = KldResult(Path(ref.path), Path(run.path), quant, results, time.perf_counter() - start, calls)
    write(res, ref.record, run.record, bopts)
    return res


def write(res: KldResult, ref_record, rec, options) -> None:
    """Into the run's folder, beside what an earlier `kld` kept against other references: read, merged
    and written under the file's lock (jsonfiles.locked), so a `kld` into the same run at the same time
    keeps its entry too."""
    import json

    from abricot_local.jsonfiles import atomic_write, locked

    path = res.run / stats.FILE
    if path.is_symlink():
        raise ResultsError(f"{path} is a symbolic link: kld writes only files of its own")
    entry = {
        "reference": {"folder": str(res.reference), "model": ref_record.model.name,
                      "model_sha256": ref_record.model.sha256},
        "model_sha256": rec.model.sha256, "quant": res.quant, "seconds": round(res.seconds, 3),
        "decode_calls": res.decode_calls, "engine": options.engine, "n_batch": options.n_batch,
        "tasks": {t: s.to_dict() for t, s in res.tasks.items()}}
    with locked(path, "`kld`"):
        kept = {**stats.entries(res.run), stats.model_key(ref_record.model): entry}
        atomic_write(path, json.dumps({"kind": stats.KIND, "version": stats.VERSION, "references": kept},
                                      indent=1) + "\n")
