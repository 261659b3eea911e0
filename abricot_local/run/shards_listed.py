"""What `runs` says under its list of the shards among the complete runs it lists: each run's shards, merged, to
merge (the door's command for it; a sweep's runs into their models' folders in one, by `merge`'s rule for a sweep's
folder: run.merge_advice.merged_folder), or which of its shards are not there, or listed unfinished: what `merge` says
of that shard's folder (run.merge_advice.not_a_shard: the call that resumes it, then merge); one reading of shards
for both (run.merge_advice.shard_sets)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from abricot_local.run.merge_advice import (Found, in_sweep, merged_folder, new_folder, not_a_shard, recorded,
                                            shard_sets)
from abricot_local.run.request import Shard


def listed(states: Sequence, command) -> list[str]:
    """What `runs` says under its list (``states``: run.states.RunState) of the shards among its complete runs: each
    run's shards, with the merge that joins them (``command(folders, out)``: the door's words for it) where every
    one is there once and no run listed was merged from them, else which shards of it are not there (or there
    twice); one it lacks that is listed unfinished (its checkpoint records that run's shard) is said in `merge`'s
    words for its folder (:func:`not_a_shard`). A run none of whose shards is complete: its states say it."""
    complete = [s.path for s in states if s.complete]
    done = {d for d, _ in _found(complete)}
    out: list[str] = []
    for group in shard_sets(_found([s.path for s in states]), ()):  # each run's shards, finished or not
        finished = [f for f in group.shards if f[0] in done]
        if not finished:
            continue
        (s,) = shard_sets(finished, complete)  # what merge takes: the complete ones
        resume = [(d, str(Shard.parse(m.config.shard))) for d, m in group.shards if d not in done]
        resume = [(d, k) for d, k in resume if k in s.missing]  # a shard merge lacks, listed unfinished
        names = ", ".join(str(d) for d, _ in group.shards if d in done or d in {u for u, _ in resume})
        if s.into is not None:
            out.append(f"{names}: the shards of one run, merged into {s.into}")
        elif not s.whole:
            gone = [k for k in s.missing if k not in {k for _, k in resume}]
            said = [f"shard(s) {', '.join(gone)} not here"] if gone else []
            said += [f"shard {t} here twice" for t in s.twice]
            said = [f"{'; '.join(said)}: merge takes each of its shards once"] if said else []
            at = {k: [str(d) for d, j in resume if j == k] for _, k in resume}
            said += [f"shard {k} ({', '.join(ds)}) is unfinished" + ("; resume one of them" if len(ds) > 1 else "")
                     for k, ds in at.items()]
            out.append(f"{names}: shards of one run; {'; '.join(said)}{':' if resume else ''}"
                       + "".join(f"\n  {not_a_shard(d, (d,))}" for d, _ in resume))
        else:
            root, model = s.shards[0][0].parent / "merged", s.shards[0][1].config.model or ""
            where = new_folder(merged_folder(root, model) if in_sweep(s.shards) else root)
            out.append(f"{names}: the shards of one run; merge them:\n  {command([d for d, _ in s.shards], where)}")
    return out


def _found(folders: Sequence[Path]) -> list[Found]:
    """Each of ``folders`` with what its run recorded (results.json, else its checkpoint's); a record not read, left
    out."""
    return [(d, m) for d in folders if (m := recorded(d)) is not None]
