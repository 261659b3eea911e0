"""What `runs` says under its list of the shards among the complete runs it lists: each run's shards, merged, to
merge (the door's command for it), or which of its shards are not there (run.merge_advice.shard_sets: the one
reading of shards `merge` makes too)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from abricot_local.run.merge_advice import new_folder, recorded, shard_sets


def listed(folders: Sequence[Path], command) -> list[str]:
    """What `runs` says under its list of the shards among the complete runs ``folders``: each run's shards, with
    the merge that joins them (``command(folders, out)``: the door's words for it) where every one is there once
    and no run listed was merged from them, else which shards of it are not there (or there twice)."""
    out: list[str] = []
    for s in shard_sets([(d, m) for d in folders if (m := recorded(d)) is not None], folders):
        names = ", ".join(str(d) for d, _ in s.shards)
        if s.into is not None:
            out.append(f"{names}: the shards of one run, merged into {s.into}")
        elif not s.whole:
            said = [f"shard(s) {', '.join(s.missing)} not here"] if s.missing else []
            said += [f"shard {t} here twice" for t in s.twice]
            out.append(f"{names}: shards of one run; {'; '.join(said)}: merge takes each of its shards once")
        else:
            where = new_folder(s.shards[0][0].parent / "merged")
            out.append(f"{names}: the shards of one run; merge them:\n  {command([d for d, _ in s.shards], where)}")
    return out
