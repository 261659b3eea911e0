"""Joining the shards of one run (`run --shard K/N`) into the run it stands for.

A shard K/N holds every N-th item of each task from the K-th (planning.Shard),
so the unsharded item order is the shards' items interleaved. The shards must
be complete, disjoint and of one run: the same model and data SHA-256, options
(all but the shard), task versions, schedule and llama.cpp build. The merged
folder's samples files and metrics are those of an unsharded run with the same
exact engine, byte for byte; `check`, `report` and `--resume` treat it as one.
"""

from __future__ import annotations

import json
from pathlib import Path

from abricot_local.errors import ResultsError
from abricot_local.planning import Shard
from abricot_local.results import RESULTS, OutputDir, load_results, read_jsonl, samples_name

# provenance that must agree between shards (the rest, e.g. threads or platform, may differ)
SAME_BUILD = ("backend", "llama_cpp_python", "system_info", "schedule", "n_vocab", "add_bos", "chat_template")


def _strip_shard(manifest: dict) -> dict:
    m = json.loads(json.dumps(manifest))
    m.get("config", {}).pop("shard", None)
    return m


def _load(folder: Path) -> dict:
    if not (folder / RESULTS).exists():
        raise ResultsError(f"{folder} is not a complete shard (no {RESULTS}); finish it with `run ... --resume`")
    doc = load_results(folder)
    if not doc.get("config", {}).get("shard"):
        raise ResultsError(f"{folder} is not a shard (its run had no --shard K/N)")
    return doc


def check_shards(folders: list[Path]) -> list[tuple[Shard, Path, dict]]:
    """The shards in order 1..N, or a ResultsError naming what is missing, doubled or foreign."""
    if not folders:
        raise ResultsError("give the output folders of the shards to merge")
    shards = []
    for f in folders:
        doc = _load(f)
        shards.append((Shard.parse(doc["config"]["shard"]), f, doc))
    first_shard, first, ref = shards[0]
    want = _strip_shard(ref["manifest"])
    for shard, f, doc in shards[1:]:
        got = _strip_shard(doc["manifest"])
        diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
        if not diff and want["config"] != got["config"]:
            diff = ["config"]
        if diff or shard.count != first_shard.count:
            what = ", ".join(diff) or "the shard count"
            raise ResultsError(f"{f} is a shard of another run than {first}: {what} differ")
        for key in SAME_BUILD:
            if ref["provenance"].get(key) != doc["provenance"].get(key):
                raise ResultsError(f"{f} was scored with another build or schedule than {first} "
                                   f"(provenance {key} differs): its numbers may differ")
    seen: dict[int, Path] = {}
    for shard, f, _ in shards:
        if shard.index in seen:
            raise ResultsError(f"shard {shard} is given twice: {seen[shard.index]} and {f}")
        seen[shard.index] = f
    missing = [str(k) for k in range(1, first_shard.count + 1) if k not in seen]
    if missing:
        raise ResultsError(f"shard(s) {', '.join(f'{k}/{first_shard.count}' for k in missing)} missing: "
                           f"merge needs all {first_shard.count}")
    return sorted(shards, key=lambda s: s[0].index)


def interleave(parts: list[list[dict]]) -> list[dict]:
    """The unsharded order: item j of shard k is item j * N + (k - 1)."""
    out = []
    for j in range(max(len(p) for p in parts)):
        out.extend(p[j] for p in parts if j < len(p))
    return out


def merge(folders: list[str | Path], out: str | Path) -> Path:
    """Write the merged run into ``out``; returns its results.json."""
    from abricot_local.runner import data_warnings, metric_warnings
    from abricot_local.tasks import make_task
    from abricot_local.tasks.base import TaskOptions

    shards = check_shards([Path(f) for f in folders])
    ref = shards[0][2]
    doc = json.loads(json.dumps(ref))
    doc["config"].pop("shard", None)
    doc["manifest"] = _strip_shard(ref["manifest"])
    doc["provenance"]["merged_from"] = [str(f) for _, f, _ in shards]
    samples: dict[str, list[dict]] = {}
    for name, entry in ref["tasks"].items():
        parts = [read_jsonl(f / d["tasks"][name].get("samples_file", samples_name(name))) for _, f, d in shards]
        rows = interleave(parts)
        ids = [s["id"] for s in rows]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ResultsError(f"task {name}: item {dup} is in more than one shard; the shards are not disjoint")
        task = make_task(name, TaskOptions.from_config({**doc["config"], **entry.get("config", {})}))
        metrics = json.loads(json.dumps(task.metrics(rows)))
        own = [w for w in entry.get("warnings", []) if w not in data_warnings(task, parts[0])
               and w not in metric_warnings(entry["metrics"])]
        doc["tasks"][name] = {**entry, "metrics": metrics, "n": len(rows),
                              "seconds": round(sum(d["tasks"][name]["seconds"] for _, _, d in shards), 3),
                              "scored_now": sum(d["tasks"][name]["scored_now"] for _, _, d in shards),
                              "warnings": [*own, *data_warnings(task, rows), *metric_warnings(metrics)]}
        samples[name] = rows
    doc["wall_seconds"] = round(sum(d["wall_seconds"] for _, _, d in shards), 3)
    with OutputDir(out) as o:
        if (Path(out) / RESULTS).exists():
            raise ResultsError(f"{out} already holds a finished run; choose another --out")
        return o.finalize(doc, samples)
