"""Joining the shards of one run (`run --shard K/N`) into the run it stands for.

A shard K/N holds the items of each task at ranks K-1, K-1+N, ... of the order
they are dealt in (tasks.selection.dealt: the items --limit/--sample keep, by
their rank in the task's nested order), in release order. From the items the
task's data holds (recorded: `tasks.<name>.available`), --limit or --sample and
the task's seed, each item's place in the unsharded order is known. The shards
must be complete, disjoint and of one run: the same model and data SHA-256,
options (all but the shard), task versions, schedule and build (the provenance every backend records,
:data:`SHARED_BUILD`, and the keys its registration declares, ``backends.Registered.build_keys``), and
their published verdicts judged at one margin (`run --margin`), and their
thread-dependent decode calls (docs/numerics.md#threads) made at one thread
count: the merged run states that count (kernel_path.joined_threads). The
merged folder's samples files and metrics are those of an unsharded run with
the same exact engine, byte for byte; `check`, `report` and `--resume` treat it
as one. A shard whose samples do not give the metrics its record holds (the check `report --verify`
makes: :func:`check_scores`) is refused: it was changed after it was scored."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

from abricot_local.record import kernel_path
from abricot_local.errors import AbricotError, ResultsError, opt
from abricot_local.run.request import Shard
from abricot_local.analysis.loading import load_run
from abricot_local.analysis.runs import Run, check_recorded_options, options_of
from abricot_local.record import RESULTS, Sample
from abricot_local.record.io import differences as option_differences
from abricot_local.record.settings import differences
from abricot_local.run.folder import OutputDir
from abricot_local.run.merge_advice import missing_shards, not_a_shard, strip_shard as _strip_shard

# provenance every backend records that must agree between shards, beside the backend's own build keys
# (same_build; the rest, e.g. platform, may differ; threads: check_threads)
SHARED_BUILD = ("backend", "schedule", "n_vocab", "add_bos", "chat_template")


def same_build(run: Run) -> tuple[str, ...]:
    """The provenance keys that must agree between ``run``'s shards: :data:`SHARED_BUILD` and those its backend
    declares (``backends.Registered.build_keys``, read with no runtime loaded); a backend not usable here is
    refused, naming why (which of its keys must agree is its own declaration)."""
    from abricot_local.backends import build_keys

    kind = run.record.config.backend or run.record.provenance.backend
    if not kind:
        return SHARED_BUILD
    try:
        return (*SHARED_BUILD, *build_keys(kind))
    except AbricotError as err:
        raise ResultsError(f"{run.path} was scored by backend {kind!r}, which cannot be used here ({err.raw()}): "
                           "which of its provenance must agree between shards is its own declaration; install "
                           "it, then merge") from None


def _load(shard, given: Sequence = (), out=None, command=None) -> Run:
    """A shard: a finished run (analysis.runs.Run), or its folder, read; a folder that holds none is refused,
    saying what it is (:func:`not_a_shard`: ``given``, every shard given, for a sweep's advice; ``command``, a door's
    words for the call that scores a shard none of them holds)."""
    if not isinstance(shard, Run):
        folder = Path(shard)
        if not (folder / RESULTS).exists():
            raise ResultsError(not_a_shard(folder, given or (folder,), out, command))
        shard = load_run(folder)
    record = shard.record
    if record.config is None or not record.config.shard:
        raise ResultsError(f"{shard.path} is not a shard (its run had no {opt('shard', 'K/N')})")
    if record.manifest is None or record.provenance is None:
        raise ResultsError(f"{Path(shard.path) / RESULTS} records no manifest or provenance: it cannot be merged")
    check_recorded_options(record, shard.path)  # each shard's options read by their fields, as the merged run's
    return shard


def check_shards(shards: Sequence, out=None, command=None) -> list[tuple[Shard, Run]]:
    """The shards (analysis.runs.Run, or their folders) in order 1..N, or a ResultsError naming what is missing
    (with ``command``, a door's words for the call that scores a missing shard: merge_advice.missing_shards),
    doubled, foreign or judged at other margins (:class:`MarginsDiffer`)."""
    if not shards:
        raise ResultsError("give the output folders of the shards to merge")
    found = [(Shard.parse(run.record.config.shard), run) for run in (_load(s, shards, out, command) for s in shards)]
    first_shard, first = found[0]
    ref = first.record
    same = same_build(first)
    for shard, run in found[1:]:
        f, rec = run.path, run.record
        other = _other_run(first, run, shard.count != first_shard.count)
        if other:
            raise ResultsError(other)
        if set(rec.tasks) != set(ref.tasks):  # (a record edited by hand: its manifest may still agree)
            lacks = [t for t in ref.tasks if t not in rec.tasks]
            more = [t for t in rec.tasks if t not in ref.tasks]
            what = (f"lacks task(s) {', '.join(lacks)}" if lacks else "") + ("; " if lacks and more else "") + \
                (f"has task(s) {', '.join(more)} that {first.path} lacks" if more else "")
            raise ResultsError(f"{f} {what}: the shards of one run hold the same tasks (its {RESULTS}: "
                               f"{', '.join(rec.tasks) or 'none'}; {first.path}'s: {', '.join(ref.tasks)})")
        build = {d.key for d in differences(ref.provenance, rec.provenance, depth=1)}
        for key in same:
            if key in build:
                raise ResultsError(f"{f} was scored with another build or schedule than {first.path} "
                                   f"(provenance {key} differs): its numbers may differ")
        kernels = kernel_path.differences(kernel_path.recorded(ref.provenance), kernel_path.recorded(rec.provenance))
        if kernels:
            raise ResultsError(f"{f} was scored on another kernel path than {first.path} ({'; '.join(kernels)}): "
                               "its numbers may differ")
    check_threads(found)
    margins = [(shard, run.path, margin_of(run)) for shard, run in found]
    judged = any(run.record.published is not None and run.record.published.checks for _, run in found)
    if judged and len({m for _, _, m in margins}) > 1:  # (no published row: no verdict, no margin to agree on)
        each = "; ".join(f"shard {shard} ({path}): {_margin_words(m)}" for shard, path, m in margins)
        raise MarginsDiffer(f"the shards' published verdicts were judged at different margins ({each}): the merged "
                            f"run has one; give every shard the same {opt('margin', 'M')} (a finished shard's run "
                            f"resumed in its folder with {opt('resume', True)} and {opt('margin', 'M')} judges its "
                            "verdict again at M, scoring nothing), then merge them")
    seen: dict[int, str] = {}
    for shard, run in found:
        if shard.index in seen:
            raise ResultsError(f"shard {shard} is given twice: {seen[shard.index]} and {run.path}")
        seen[shard.index] = run.path
    missing = [k for k in range(1, first_shard.count + 1) if k not in seen]
    if missing:
        raise ResultsError(missing_shards(first, first_shard.count, missing, command))
    return sorted(found, key=lambda s: s[0].index)


def _other_run(first: Run, run: Run, counts: bool) -> str:
    """Why ``run`` is a shard of another run than ``first`` ("" when of the same), each difference with both values
    in --resume's words (record.io.differences: "--seed: recorded 1234, given 5"; recorded: ``first``'s, given:
    ``run``'s); their --shard compared only where the shard counts differ (``counts``)."""
    a, b = first.record.manifest, run.record.manifest
    diff = option_differences(*((a, b) if counts else (_strip_shard(a), _strip_shard(b))))
    if not diff:
        return ""
    parts = list(diff)
    head = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    details = "; ".join(d for ds in diff.values() for d in ds)
    return (f"{run.path} is a shard of another run than {first.path}: its {head} "
            f"{'differs' if len(parts) == 1 else 'differ'} ({details}; recorded: {first.path}'s, given: "
            f"{run.path}'s): the shards of one run are made with the same model, data and options, all but "
            f"{opt('shard', 'K/N')}'s K")


def check_scores(shard: Shard, run: Run, name: str, rows: Sequence[Sample]) -> None:
    """Refuse shard ``run`` when its samples of task ``name`` do not give the metrics its record holds (the check
    `report --verify` makes: analysis.overview.recompute_entry): a changed samples file or record would be
    merged into a run whose metrics its own samples give, and `report --verify` would pass it."""
    from abricot_local.analysis.overview import recompute_entry

    bad = recompute_entry(run.record, name, rows, run.path).mismatches
    if bad:
        raise ResultsError(f"shard {shard} ({run.path}): its samples of task {name} do not give the "
                           f"{', '.join(bad)} its {RESULTS} records (report's verify check says so too): its "
                           f"samples or record were changed after it was scored; check re-scores the shard; run "
                           f"shard {shard} again into a new folder, then merge it in its place")


def check_threads(found: Sequence[tuple[Shard, Run]]) -> None:
    """Refuse shards whose decode calls that depend on the thread count (``provenance.kernels.thread_dependent``)
    were made with different counts: no one count made the merged run's numbers, and `check` could reproduce
    the items of one count only. Shards that made none, or were not counted, are not refused."""
    parts = [kernel_path.part(run.record.provenance) for _, run in found]
    counts = kernel_path.thread_conflict(parts)
    if not counts:
        return
    from abricot_local.run.resume import counted

    made = [(shard, run.path, t, c) for (shard, run), (t, c) in zip(found, parts) if c]
    each = "; ".join(f"shard {shard} ({path}): {counted(t, 'thread')}, {counted(c, 'decode call')} depending on it"
                     for shard, path, t, c in made)
    keep = counts[0]
    again = [str(shard) for shard, _, t, _ in made if t != keep]
    raise ResultsError(f"the shards were scored with different thread counts, and decode calls of each depend on it "
                       f"({each}: docs/numerics.md#threads): no one count made the merged run's numbers; score "
                       f"shard(s) {', '.join(again)} again {at_threads(found[0][1], keep, again[0])}, then merge "
                       f"{'it' if len(again) == 1 else 'each'} in its place")


def at_threads(run: Run, threads: int, shard: str) -> str:
    """How to score shard ``shard`` of ``run`` again at ``threads`` threads (resume.with_threads: with the backend's
    ``threads`` option where it has one, else where its own settings make that count)."""
    from abricot_local.run.resume import with_threads

    return with_threads(run.record.config.backend or "", threads, shard)


class MarginsDiffer(ResultsError):
    """The shards to merge were judged at different ``--margin``s: the merged run's verdict has one margin."""


def margin_of(run: Run) -> float | None:
    """The margin a run's published verdict was judged at (``published.margin``; None: each task's declared one)."""
    return run.record.published.margin if run.record.published is not None else None


def _margin_words(margin: float | None) -> str:
    return opt("margin", margin) if margin is not None else "each task's declared margin"


def unsharded(name: str, parts: Sequence[tuple[Shard, Sequence[Sample]]], available: int, seed: int, *,
              limit: int | None = None, sample: int | None = None) -> list[Sample]:
    """Task ``name``'s samples in the unsharded order (``parts``: each shard, 1..N, with its samples;
    ``available``: the items of the task's data; ``seed``: the task's): the items ``limit`` or ``sample`` keep
    (tasks.selection.kept) dealt as the shards dealt them (tasks.selection.dealt), item j of shard K at its
    place ``K.places(order)[j]``."""
    from abricot_local.tasks.selection import dealt, kept

    positions = kept(available, seed, limit, sample)
    count = sum(len(part) for _, part in parts)
    if count != len(positions):
        raise ResultsError(f"task {name}: the shards hold {count} item(s) where the run keeps {len(positions)} of "
                           f"the {available} in its data: the shards are not of one complete run")
    order = dealt(positions, available, seed)
    out: list = [None] * count
    for shard, part in parts:
        places = shard.places(order)
        if len(places) != len(part):
            raise ResultsError(f"task {name}: shard {shard} holds {len(part)} item(s) where its part of the {count} "
                               f"the shards hold is {len(places)}: the shards are not of one run")
        for place, row in zip(places, part):
            out[place] = row
    return out


def available_of(name: str, found: Sequence[tuple[Shard, Run]]) -> int:
    """The items task ``name``'s data holds, as every shard recorded it (``tasks.<name>.available``), or a
    ResultsError: a shard of an earlier abricot-local records none (it dealt its items otherwise)."""
    counts = {run.record.tasks[name].available for _, run in found}
    if None in counts:
        lacking = next(run.path for _, run in found if run.record.tasks[name].available is None)
        raise ResultsError(f"{Path(lacking) / RESULTS} records no tasks.{name}.available (the items of the task's "
                           "data): it was written by an earlier abricot-local, which dealt a shard's items otherwise, "
                           "so where each lies in the whole run is not known; score every shard again with this "
                           "version, then merge them")
    if len(counts) != 1:
        raise ResultsError(f"task {name}: the shards record {' and '.join(map(str, sorted(counts)))} items in its "
                           "data: the shards are not of one run")
    return counts.pop()


def fixed_warnings(name: str, task, found: Sequence[tuple[Shard, Run]], parts: Sequence[Sequence[Sample]]) -> tuple:
    """Task ``name``'s recorded warnings that do not depend on the items a shard scored (its notes, the task's own:
    run.record.recorded_split), each once, in the shards' order; the merged run's own scored ones are made anew
    from all its items (run.record.entry_warnings: the rule `run` records by). A shard whose recorded warnings do
    not end with those its samples give is refused: its record was changed after it was scored."""
    from abricot_local.run.record import recorded_split

    fixed: dict[str, None] = {}
    for (shard, run), part in zip(found, parts):
        config = run.record.config
        split = recorded_split(run.record.tasks[name], task, part, limit=config.limit, sample=config.sample)
        if split is None:
            raise ResultsError(f"shard {shard} ({run.path}): the warnings its {RESULTS} records for task {name} do "
                               "not end with those its samples give (check re-makes them too): its record was "
                               f"changed after it was scored, or an earlier abricot-local wrote it; run shard {shard} "
                               "again into a new folder, then merge it in its place")
        fixed.update(dict.fromkeys(split[0]))
    return tuple(fixed)


def merge(shards: Sequence, out: str | Path, command=None) -> Path:
    """Write the merged run of ``shards`` (analysis.runs.Run, or their folders) into ``out``; returns its
    results.json (``command``: the door's words for the call that scores a missing shard, :func:`check_shards`)."""
    from abricot_local.analysis import baselines
    from abricot_local.run.record import as_json, entry_warnings
    from abricot_local.tasks import make_task

    found = check_shards(shards, out, command)
    runs = [run for _, run in found]
    ref = runs[0].record
    tasks, samples, judged = {}, {}, []
    published = ref.published
    for name, entry in ref.tasks.items():
        task = make_task(name, options_of(ref, name, runs[0].path))
        parts = [run.samples_of(name) for run in runs]
        for (shard, run), part in zip(found, parts):
            check_scores(shard, run, name, part)
        rows = unsharded(name, [(shard, part) for (shard, _), part in zip(found, parts)], available_of(name, found),
                         task.options.seed, limit=ref.config.limit, sample=ref.config.sample)
        ids = [s.id for s in rows]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ResultsError(f"task {name}: item {dup} is in more than one shard; the shards are not disjoint")
        metrics = as_json(task.metrics(rows))
        tasks[name] = replace(entry, metrics=metrics, n=len(rows),
                              seconds=round(sum(run.record.tasks[name].seconds or 0 for run in runs), 3),
                              scored_now=sum(run.record.tasks[name].scored_now or 0 for run in runs),
                              warnings=entry_warnings(fixed_warnings(name, task, found, parts), task, rows, metrics,
                                                      limit=ref.config.limit, sample=ref.config.sample))
        samples[name] = rows
        judged.append(baselines.VerdictTask(name, task, tuple(rows)))  # N: its entry's available (available_of)
    if published is not None and published.reproduces:  # the verdict on the whole run, not on a shard
        published = baselines.rejudge(published.reproduces, tasks, judged, published.margin,
                                      drawn=ref.config.limit is None, recorded=published)
    record = replace(ref, published=published, config=replace(ref.config, shard=None),
                     manifest=_strip_shard(ref.manifest),
                     provenance=kernel_path.with_threads(  # the thread count its numbers were made with
                         replace(ref.provenance, merged_from=tuple(str(Path(run.path).absolute()) for run in runs)),
                         [kernel_path.part(run.record.provenance) for run in runs]),
                     tasks=tasks, wall_seconds=round(sum(run.record.wall_seconds or 0 for run in runs), 3))
    with OutputDir(out) as o:
        if (Path(out) / RESULTS).exists():
            raise ResultsError(f"{out} already holds a finished run; choose another {opt('out')}")
        return o.finalize(record, samples)
