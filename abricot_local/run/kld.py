"""``abricot-local kld REF RUN...``: the full-vocabulary KL divergence of each RUN's model against
REF's, on the tasks' own text, streamed.

REF and each RUN are finished run folders (a `run --quants` sweep's). REF's items are rebuilt as
`check` rebuilds them (its recorded tasks, options and data); REF's model and each RUN's model are
found again by their recorded SHA-256 and opened with REF's recorded options, both loaded at once
(the memory check counts both). An engine runs the canonical schedule over a
:class:`~abricot_local.backends.kld.PairedSession`, so the two models evaluate the same decode
calls, each asked for a row at every token it decodes (context and continuations, as llama-perplexity
over its text: at most n_batch rows a call); each pair of rows is compared over the whole vocabulary and
dropped. The items are those both runs scored. The statistics (analysis/kld.py) go into RUN's folder, ``kld.json``,
under REF's model SHA-256, where `report`, `compare` and the API read them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from abricot_local.analysis import kld as stats
from abricot_local.backends import backend_class
from abricot_local.backends.kld import KlRows, PairedBackend, TokenizedUnlike
from abricot_local.errors import ResultsError, UsageError
from abricot_local.gguf.file import model_bytes
from abricot_local.models.given import load
from abricot_local.models.ref import Located
from abricot_local.record import entry_samples, read_run
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


def _finished(folder) -> tuple[Path, object]:
    folder = Path(folder)
    why = unfinished(folder)
    if why:
        raise ResultsError(why)
    return folder, read_run(folder)


def check_memory(kind: str, paths: Sequence[Path], options) -> None:
    """Both models and both KV caches against this machine's memory (they are loaded together)."""
    from abricot_local import memory

    facts = backend_class(kind).preflight(paths[0], options) if paths else None
    if facts is None:
        return
    memory.check_memory(sum(model_bytes(p) for p in paths), facts.kv_bytes * len(paths), vram=facts.vram,
                        remote=facts.remote)


def _ids(folder: Path, record) -> dict[str, set[str]]:
    return {name: {s.id for s in entry_samples(folder, t, name, counted=False)} for name, t in record.tasks.items()}


def kld_runs(reference, runs: Sequence, *, data_dir: str | None = None, backend_values: dict | None = None,
             limit: int | None = None, force: bool = False, progress: Progress | None = None,
             notify: Callable[[str], None] | None = None) -> list[KldResult]:
    """The KLD of each run in ``runs`` against ``reference`` (see the module's text), written into each
    run's folder; ``limit``: the first N common items of each task (in the reference's order). REF's
    items are the plan of its recorded run (run.request.of_record), as `check` rebuilds them."""
    if not runs:
        raise UsageError("kld needs a reference run and at least one run to measure against it")
    say = notify or (lambda _t: None)
    ref_dir, record = _finished(reference)
    kind = record.config.backend if record.config else ""
    if not kind:
        raise ResultsError(f"{ref_dir / 'results.json'} records no config.backend: its items cannot be rebuilt")
    found = recorded_model(record)
    request = of_record(record, found.as_written, _task_options(record, data_dir), backend_values)
    p = make_plan(request, located=Located(found.as_written, found.backend, found), fresh=False)
    ref_ids = _ids(ref_dir, record)
    others = []
    for r in runs:
        folder, rec = _finished(r)
        if folder.resolve() == ref_dir.resolve():
            raise UsageError(f"{folder} is the reference itself")
        if (rec.config.backend if rec.config else "") != kind:
            raise UsageError(f"{folder} was run with another backend than {ref_dir}; kld compares one backend's models")
        others.append((folder, rec, recorded_model(rec)))
    if not force:
        for _, _, m in others:
            check_memory(kind, [p for p in (found.path, m.path) if p], p.backend_options)
    backend = open_backend(p)
    out = []
    try:
        task_runs = prepared(p, backend)
        for folder, rec, model in others:
            say(f"kld: {folder} against {ref_dir}")
            out.append(_one(backend, ref_dir, record, folder, rec, model, p.backend_options, task_runs, ref_ids,
                            limit, progress))
    finally:
        backend.close()
    return out


def _one(backend, ref_dir, ref_record, folder, rec, model, bopts, task_runs, ref_ids, limit, progress) -> KldResult:
    other_ids = _ids(folder, rec)
    rung = load(model, bopts, force=True)
    start = time.perf_counter()
    results = {}
    try:
        rows = KlRows()
        paired = PairedBackend(backend, rung, bopts, rows)
        for run in task_runs:
            name = run.task.key
            items = [it for it in run.items if it.id in ref_ids.get(name, ()) and it.id in other_ids.get(name, ())]
            items = items[:limit] if limit else items
            if not items:
                continue
            rows.kl.clear()
            rows.same_top.clear()
            if progress:
                progress(name, 0, len(items))
            try:
                for n, _ in enumerate(score_items(items, paired), 1):  # the run's loop: the same decode calls
                    if progress:
                        progress(name, n, len(items))
            except TokenizedUnlike:
                raise ResultsError(f"{model.label} tokenizes {name}'s text unlike {ref_record.model.name}: "
                                   "not quants of one model") from None
            results[name] = stats.summarise(rows.kl, rows.same_top, len(items))
        calls = paired.counters.decode_calls
    finally:
        rung.close()
    if not results:
        raise ResultsError(f"{folder} and {ref_dir} have no item in common")
    res = KldResult(ref_dir, folder, model.quant, results, time.perf_counter() - start, calls)
    write(res, ref_record, rec, bopts)
    return res


def write(res: KldResult, ref_record, rec, options) -> None:
    """Into the run's folder, beside what an earlier `kld` kept against other references."""
    import json

    from abricot_local.jsonfiles import atomic_write

    path = res.run / stats.FILE
    if path.is_symlink():
        raise ResultsError(f"{path} is a symbolic link: kld writes only files of its own")
    kept = stats.entries(res.run)
    kept[stats.model_key(ref_record.model)] = {
        "reference": {"folder": str(res.reference), "model": ref_record.model.name,
                      "model_sha256": ref_record.model.sha256},
        "model_sha256": rec.model.sha256, "quant": res.quant, "seconds": round(res.seconds, 3),
        "decode_calls": res.decode_calls, "engine": options.engine, "n_batch": options.n_batch,
        "tasks": {t: s.to_dict() for t, s in res.tasks.items()}}
    atomic_write(path, json.dumps({"kind": stats.KIND, "version": stats.VERSION, "references": kept}, indent=1) + "\n")
