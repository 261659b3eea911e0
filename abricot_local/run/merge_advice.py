"""What `merge` says of a folder given that holds no shard (run/merge.py), and what to merge instead.

Every folder given is read, not only the one refused: a folder given is a run's (a shard, a whole run) or one
that holds runs (a sweep's, run/session.py: a run per model, named after it, request.slug; the shards of one
run gathered by hand). The advice names only a merge that the folders given make whole: the shards of one run,
each once, every one of its N there; a run made without shards is whole (nothing to merge); shards whose run
lacks one in every folder given are named with the shards they lack. Door-neutral: folders, no one door's
command (nor its options), but the call that scores a shard no folder given holds (:func:`_scoring`, of a sweep's
or of one run's; :func:`missing_shards`): the door's words for it (``command``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from abricot_local.errors import AbricotError, opt
from abricot_local.record import RESULTS, Manifest
from abricot_local.record.io import differences as option_differences
from abricot_local.record.outputs import INTERRUPTED, is_run_folder
from abricot_local.run.request import Shard, slug
from abricot_local.tasks.recorded_data import recorded_data

Found = tuple[Path, Manifest]  # a run folder and what it recorded


def strip_shard(manifest: Manifest) -> Manifest:
    return replace(manifest, config=replace(manifest.config, shard=None))


def not_a_shard(folder: Path, given: Sequence, out=None, command=None) -> str:
    """Why ``folder`` (no results.json) is no shard to merge, and what to do: it does not exist; it holds runs
    (:func:`holds_runs`: the shards of one run, a sweep's runs, or other runs); a run not finished (run/states.py's
    state): a shard's (its checkpoint's recorded config has a shard; an INTERRUPTED one's file names the call that
    resumes it, OutputDir.interrupted), or not a shard at all; else no run. ``command``: the door's words for the
    call that scores a shard no folder given holds (:func:`missing_shards`)."""
    from abricot_local.run.states import _fields, run_state, unfinished

    if not folder.exists():
        return f"{folder} does not exist: give the folder each shard of the run was written to"
    inside = _inside(folder)
    if inside and not is_run_folder(folder):
        return holds_runs(folder, inside, given, out, command)
    why = unfinished(folder)
    if why is None:
        return (f"{folder} is not a complete shard (no {RESULTS}, and no run stopped there to resume): give the "
                "folder each shard of the run was written to, or score that shard again into a new folder")
    manifest = recorded(folder)
    if manifest is not None and not manifest.config.shard:  # resumed, it would be a finished run, still no shard
        state = run_state(folder)  # (its state, not describe(): that says how to resume it)
        items = f"{state.done} of {state.total} items" if state.total is not None else f"{state.done} items"
        return (f"{folder} is not a shard of a run: its run ({state.state}, {items}) was started without "
                f"{opt('shard', 'K/N')}; give the folders of the shards of one run")
    command = _fields(folder / INTERRUPTED).get("resume", "") if (folder / INTERRUPTED).is_file() else ""
    if command:
        return (f"{folder} is not a complete shard ({run_state(folder).describe()}): resume it with `{command}`, "
                "then merge")
    return f"{why}, then merge"


def _inside(folder: Path) -> list[Path]:
    """The run folders right inside ``folder``, by name ([] when it cannot be read)."""
    try:
        return sorted((d for d in folder.iterdir() if d.is_dir() and is_run_folder(d)), key=lambda d: d.name)
    except OSError:  # not a folder, or not readable
        return []


def recorded(folder: Path) -> Manifest | None:
    """What the run in ``folder`` recorded (its results.json's manifest, else its checkpoint's run.json); None
    when neither can be read."""
    from abricot_local.record import CHECKPOINT, RUN_MANIFEST, read_manifest, read_record

    try:
        if (folder / RESULTS).is_file():
            manifest = read_record(folder / RESULTS).manifest
        elif (folder / CHECKPOINT / RUN_MANIFEST).is_file():
            manifest = read_manifest(folder / CHECKPOINT / RUN_MANIFEST)
        else:
            return None
        if manifest is not None:
            Shard.parse(manifest.config.shard)  # a shard recorded as merge reads it, or the record is not read
        return manifest
    except AbricotError:
        return None


def _one_run(a: Manifest, b: Manifest) -> bool:
    """Whether ``a`` and ``b`` are shards of one run: both sharded, into as many shards, all else the same."""
    return bool(a.config.shard and b.config.shard) and Shard.parse(a.config.shard).count == \
        Shard.parse(b.config.shard).count and not option_differences(strip_shard(a), strip_shard(b))


def _given_runs(given: Sequence, but: Path, held: Sequence[Path]) -> list[Found]:
    """The runs the folders ``given`` hold (a Run given: its folder), but ``but`` and the runs ``held`` in it: each
    folder given that is a run's, else the run folders inside it; each once, in the order given; a record not
    read, left out."""
    out: list[Found] = []
    seen = {_key(p) for p in (but, *held)}
    for g in given:
        path = Path(getattr(g, "path", g))
        for d in [path] if is_run_folder(path) else [] if _key(path) == _key(but) else _inside(path):
            manifest = recorded(d) if _key(d) not in seen else None
            if manifest is not None:
                seen.add(_key(d))
                out.append((d, manifest))
    return out


def _key(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()


def _index(m: Manifest) -> int:
    return Shard.parse(m.config.shard).index


def _shards_of(first: Manifest, found: Sequence[Found]) -> list[Found]:
    """The shards of ``first``'s run among ``found``, in shard order."""
    return sorted([f for f in found if _one_run(first, f[1])], key=lambda f: _index(f[1]))


def _lacks(group: Sequence[Found]) -> tuple[list[str], list[str]]:
    """(the shards of ``group``'s run (one run's shards) that no folder of it holds, as K/N; those two folders
    hold, each said with its folders)."""
    count = Shard.parse(group[0][1].config.shard).count
    at: dict[int, list[Path]] = {}
    for d, m in group:
        at.setdefault(_index(m), []).append(d)
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in at]
    twice = [f"{k}/{count} ({', '.join(map(str, ds))})" for k, ds in sorted(at.items()) if len(ds) > 1]
    return missing, twice


def holds_runs(folder: Path, inside: Sequence[Path], given: Sequence, out=None, command=None) -> str:
    """Why ``folder``, which holds the run folders ``inside``, is no shard, and what to merge instead, from every
    folder ``given`` (a Run given: its folder): the shards of one run (their folders, in shard order, with those of
    that run the others given hold); a sweep's folder (each model's shards merged apart into ``out``'s folder of
    it, across the folders given; a model's run made without shards is whole: nothing to merge); else what it
    holds, run by run. A sweep's shards no folder given holds: named, with ``command``'s call that scores each
    (:func:`_scoring`)."""
    read = [(d, recorded(d)) for d in inside]
    known: list[Found] = [(d, m) for d, m in read if m is not None]
    models = [m.config.model or "" for _, m in known]
    swept = len(set(models)) == len(models) and all(d.name == slug(m) for (d, _), m in zip(known, models))
    others = _given_runs(given, folder, inside)
    if len(known) == len(inside) and all(_one_run(known[0][1], m) for _, m in known) and (len(known) > 1 or
                                                                                            not swept):
        return _one_runs_shards(folder, known, others, command)
    if len(known) == len(inside) and swept:  # run/session.py's sweep: <root>/<slug of each model>
        return _sweep(folder, known, others, given, out, command)
    sets = shard_sets(known, [d for d, _ in known])  # the shards of one run together, in shard order
    groups: list[list[Found]] = [list(s.shards) for s in sets]  # then other runs by their model
    for d, m in (f for f in known if not f[1].config.shard):
        group = next((g for g in groups if not g[0][1].config.shard and g[0][1].config.model == m.config.model), None)
        if group is None:
            groups.append([(d, m)])
        else:
            group.append((d, m))
    groups.sort(key=lambda g: min(known.index(f) for f in g))  # as the folder holds them
    parts = [(f"shard(s) {', '.join(m.config.shard for _, m in g)} of a run of {g[0][1].config.model or '?'}"
              if g[0][1].config.shard else f"run(s) of {g[0][1].config.model or '?'}, not sharded")
             + f" ({', '.join(d.name for d, _ in g)})" for g in groups]
    unread = [d.name for d, m in read if m is None]
    parts += [f"run folder(s) whose record cannot be read ({', '.join(unread)})"] if unread else []
    whole = [s for s in sets if s.whole]
    if len(whole) == 1:  # the one run they make whole: its merge (runs' listed says it alike)
        merged = f" (already merged into {whole[0].into})" if whole[0].into is not None else ""
        return f"{folder} holds runs, not a shard: {'; '.join(parts)}: merge {whole[0].folders}{merged}"
    return f"{folder} holds runs, not a shard: {'; '.join(parts)}: give the folders of the shards of one run"


def _one_runs_shards(folder: Path, known: Sequence[Found], others: Sequence[Found], command=None) -> str:
    """``folder`` holds shards of one run (``known``): merge them, with the shards of that run among ``others``
    where it lacks some; those no folder given holds, named, with the call that scores each (:func:`_scoring`)."""
    own = sorted(known, key=lambda f: _index(f[1]))
    held = (f"the shards of one run ({', '.join(m.config.shard for _, m in own)})" if len(own) > 1
            else f"a shard of a run ({own[0][1].config.shard})")
    missing, _ = _lacks(own)
    if not missing:
        return f"{folder} holds {held}, not a shard: merge {' '.join(str(d) for d, _ in own)}"
    group = _shards_of(own[0][1], [*own, *others])
    still, twice = _lacks(group)
    folders = " ".join(str(d) for d, _ in group)
    lacks = f" (shard(s) {', '.join(missing)} not there: give them too)"
    if not still and not twice:  # the others given hold the rest: this merge works as said
        return f"{folder} holds {held}, not a shard: merge {folders}{lacks}"
    scoring = _scoring([group], command, lambda k, count, found: _beside(found[0], k, count))
    return f"{folder} holds {held}, not a shard: {_unmergeable(folders, still, twice)}{scoring}"


def _unmergeable(folders: str, missing: Sequence[str], twice: Sequence[str]) -> str:
    """Shards (``folders``) of one run that do not merge as given: the shards of it no folder given holds, and
    those two folders given hold."""
    said = [f"shard(s) {', '.join(missing)} of that run are in no folder given: give them too"] if missing else []
    said += [f"shard {t} is given twice: give one folder of each" for t in twice]
    return f"{folders}: {'; '.join(said)}"


def _sweep(folder: Path, known: Sequence[Found], others: Sequence[Found], given: Sequence, out, command=None) -> str:
    """``folder`` is a sweep's (``known``: a run per model): each model's runs across every folder given
    (``others``), its shards merged apart where they make its run whole, its whole runs nothing to merge; the shards
    no folder given holds scored (``command``) each into a folder beside ``folder`` of that shard, in its model's
    folder there (as a sweep of that shard writes them: merged with the others given, it merges apart too)."""
    names = [d.name for d, _ in known]
    sweep = f"{folder} is a sweep's folder (a run per model: {', '.join(names)}), not a shard"
    by_model: dict[str, list[Found]] = {}
    for d, m in [*known, *others]:
        by_model.setdefault(m.config.model or "", []).append((d, m))
    merges, whole, problems, lacking = [], [], [], []
    for model, runs in by_model.items():
        name = slug(model) if model else "?"
        whole += [(name, d) for d, m in runs if not m.config.shard]
        shards = [f for f in runs if f[1].config.shard]
        while shards:
            group = _shards_of(shards[0][1], shards)
            shards = [f for f in shards if f not in group]
            missing, twice = _lacks(group)
            folders = " and ".join(str(d) for d, _ in group)
            if missing or twice:
                problems.append(f"{name}: {_unmergeable(folders, missing, twice)}")
                lacking.append(group)
            else:
                merges.append(f"{folders}, into {merged_folder(out or 'OUT', model)}")
    if not merges and not problems:
        where = "in it" if len(given) <= 1 else "in the folders given"
        return f"{sweep}: each model's run {where} is a whole run (made without shards), nothing to merge"
    said = [f"merge each model's shards apart ({'; '.join(merges)})"] if merges else []
    if whole:
        models = list(dict.fromkeys(n for n, _ in whole))
        said.append(f"{', '.join(models)}: {'a whole run' if len(whole) == 1 else 'whole runs'} (made without "
                    f"shards), nothing to merge ({', '.join(str(d) for _, d in whole)})")
    bases: dict[tuple[int, int], Path] = {}  # one folder per shard, its models' runs in it

    def where(k: int, count: int, found: Found) -> Path:
        base = bases.setdefault((k, count), _beside(folder, k, count))
        return base / slug(found[1].config.model or "MODEL")

    return f"{sweep}: {'; '.join(said + problems)}{_scoring(lacking, command, where)}"


def merged_folder(out, model: str) -> Path:
    """Where a sweep's model's shards merge: its folder in ``out``, named as a sweep names it (request.slug); the one
    rule of `merge`'s advice on a sweep's folder (:func:`_sweep`) and of `runs`' (run.shards_listed)."""
    return Path(out) / (slug(model) if model else "?")


def in_sweep(shards: Sequence[Found]) -> bool:
    """Whether ``shards`` are a sweep's: each in a folder named after its model, as a sweep names it (request.slug)."""
    return all(d.name == slug(m.config.model or "") for d, m in shards)


def missing_shards(first, count: int, missing: Sequence[int], command=None) -> str:
    """Why shards ``missing`` (their K) of the run of shard ``first`` (an analysis.runs.Run), of ``count``, stop a
    merge, and how to score each where its folder is not at hand: ``command(model, options, shard, out)``, a door's
    words for the call that scores it (:func:`_calls`; the door's line, its continuations indented), else in words
    (every door reads them); what a run does not record (a models file, model folders) said to add."""
    one = len(missing) == 1
    said = ", ".join(f"{k}/{count}" for k in missing)
    head = (f"shard(s) {said} missing: merge needs all {count}; give {'its folder' if one else 'their folders'} "
            f"too, or score {'it' if one else 'each'} with the options {first.path} recorded")
    outs = {k: _beside(Path(first.path), k, count) for k in missing}
    data, gone = _data(first)
    if command is None:
        given = "".join(f" {opt('data', pair)}" for pair in data.items())
        each = "; ".join(f"{opt('shard', f'{k}/{count}')} {opt('out', outs[k])}{given}" for k in missing)
        return f"{head}, {each} ({_unrecorded(gone)}), then merge"
    lines = _calls(first, count, missing, command, outs)
    return f"{head} ({_unrecorded(gone)}), then merge:\n" + "\n".join(lines)


def _data(run) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """The data files ``run`` recorded, as ``--data`` finds them again (key -> path), and its tasks whose files are
    not here (task, a recorded path): tasks/recorded_data.py's rule, that of the lm-eval outputs read beside runs."""
    found = recorded_data(run.run_tasks)
    return dict(found.pairs), found.gone


def _unrecorded(gone: Sequence[tuple[str, str]]) -> str:
    """What to add to the calls that score a missing shard: what a run does not record, the data not here."""
    return (f"add the {opt('models_file')} or {opt('model_dirs')} it was given, if any: a run does not record them"
            + "".join(f"; {task}'s data files are not here (it recorded {path}): add {opt('data', (task, 'PATH'))}"
                      for task, path in gone))


def _calls(first, count: int, missing: Sequence[int], command, outs) -> list[str]:
    """The door's calls (``command``) that score shards ``missing`` of ``first``'s run (an analysis.runs.Run) with
    the options it recorded (:func:`shard_options`, and ``data``: its recorded data files) into ``outs[k]``,
    each indented."""
    manifest = first.record.manifest
    data, _ = _data(first)
    options = {**shard_options(manifest, first.record.provenance), **({"data": data} if data else {})}
    return [f"  {command(manifest.config.model or 'MODEL', options, f'{k}/{count}', outs[k])}" for k in missing]


def _scoring(groups: Sequence[Sequence[Found]], command, where) -> str:
    """After what a folder given holds: the door's calls (``command``, :func:`_calls`) that score the shards no
    folder given holds of each run of ``groups`` (one run's shards each), with the options a finished one of them
    recorded, each into ``where(k, count, found)`` (``found``: the run's first shard, its folder and manifest); ""
    without a command, or none to score."""
    from abricot_local.analysis.loading import load_run

    lines, gone = [], []
    for group in groups:
        count = Shard.parse(group[0][1].config.shard).count
        missing = [int(m.split("/")[0]) for m in _lacks(group)[0]]
        done = next((d for d, _ in group if (d / RESULTS).is_file()), None)
        if command is None or not missing or done is None:
            continue
        try:
            first = load_run(done)
        except AbricotError:  # its record read otherwise: nothing to score from
            continue
        lines += _calls(first, count, missing, command, {k: where(k, count, group[0]) for k in missing})
        gone += [g for g in _data(first)[1] if g not in gone]
    if not lines:
        return ""
    return (f"; score {'it' if len(lines) == 1 else 'each'} with the options its run recorded "
            f"({_unrecorded(gone)}), then merge:\n" + "\n".join(lines))


def shard_options(manifest: Manifest, provenance) -> dict:
    """The options, by field name, that score another shard of the run ``manifest`` records as it was scored: its
    recorded config but the model and the shard (what merge compares: a value None or off left out), and its
    thread count where its numbers depend on it (merge.check_threads) and its backend takes one."""
    from abricot_local.record import kernel_path
    from abricot_local.run.resume import takes_threads

    options = {k: v for k, v in manifest.config.to_dict().items()
               if k not in ("model", "shard") and v is not None and v is not False}
    threads, calls = kernel_path.part(provenance)
    if threads is not None and (calls is None or calls > 0) and takes_threads(manifest.config.backend or ""):
        options["threads"] = threads
    return options


def _beside(folder: Path, k: int, count: int) -> Path:
    """Where a missing shard ``k`` of ``count`` is scored: a new folder beside ``folder`` (a shard's, a sweep's)."""
    return new_folder(folder.parent / f"shard-{k}-of-{count}")


def new_folder(path: Path) -> Path:
    """``path``, else the first of ``path``-2, -3, ... that does not exist."""
    n = 1
    while (found := path if n == 1 else path.with_name(f"{path.name}-{n}")).exists():
        n += 1
    return found


@dataclass(frozen=True)
class ShardSet:
    """The shards of one run among the folders looked at, in shard order: those of its N not there, those there
    twice, and the run among the folders merged from exactly these (None: none)."""

    shards: tuple[Found, ...]
    missing: tuple[str, ...]
    twice: tuple[str, ...]
    into: Path | None

    @property
    def whole(self) -> bool:
        """Every shard of its run there, once: merge joins them."""
        return not self.missing and not self.twice

    @property
    def folders(self) -> str:
        return " ".join(str(d) for d, _ in self.shards)


def shard_sets(found: Sequence[Found], folders: Sequence[Path]) -> list[ShardSet]:
    """The shards among ``found`` run by run (each in shard order, the runs as ``found`` first holds them), each
    with what it lacks and the run among ``folders`` merged from it: what `runs` lists under its runs (run.shards_listed.listed)
    and what `merge` says of a folder that holds runs (:func:`holds_runs`), one reading for both."""
    found = [f for f in found if f[1].config.shard]
    merged = {tuple(sorted(_key(Path(p)) for p in run.provenance.merged_from)): d
              for d, run in ((d, _record(d)) for d in folders) if run is not None and run.provenance is not None
              and run.provenance.merged_from} if found else {}
    out: list[ShardSet] = []
    while found:
        group = _shards_of(found[0][1], found)
        found = [f for f in found if f not in group]
        missing, twice = _lacks(group)
        out.append(ShardSet(tuple(group), tuple(missing), tuple(twice),
                            merged.get(tuple(sorted(_key(d) for d, _ in group)))))
    return out


def _record(folder: Path):
    from abricot_local.record import read_record

    try:
        return read_record(folder / RESULTS)
    except AbricotError:
        return None
