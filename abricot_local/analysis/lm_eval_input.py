"""An lm-eval output folder read as a run: ``results_<date>.json`` and the ``samples_<task>_<date>.jsonl``
files of ``--log_samples`` (lm-eval 0.4.x, any model: hf, vllm, this project's ``abricot-local``).

No lm-eval import: the files are JSON. Each lm-eval task's logged items are matched to one of this tool's task
instances (a registered task under one of its protocols, prompt variants and shot counts), whose items are built
from the data here: an lm-eval item is the tool's item with the same scored context and the same continuations, in
the same order (:func:`items.scored_key`, the key `compare` pairs task instances by too). Every logged item must
match; the items' ids, gold, source and own fields are the tool's, the log-likelihoods lm-eval's
(``filtered_resps``, else ``resps``), and the run's metrics are the task's own ``metrics()`` of them. The model
and its settings come from the results file's ``config``, the task options from the instances matched
(:func:`_given`). What cannot be matched, and what no lm-eval run writes (a log-likelihood above 0, a date no clock
shows), is refused in one line naming the file. :func:`read` returns the :class:`runs.Run`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping

from abricot_local.analysis.items import scored_key
from abricot_local.analysis.runs import Run, RunTask
from abricot_local.core import Scored
from abricot_local.errors import AbricotError, ResultsError
from abricot_local.jsonfiles import TornLineError, read_json, read_jsonl_lines
from abricot_local.record import DataFile, Model, Provenance, Record, RunConfig, Sample, TaskEntry, check_line
from abricot_local.record.codec import Invalid
from abricot_local.record.schema import SCHEMA_VERSION

RESULTS_GLOB = "results_*.json"
_DTYPES = {"bfloat16": "BF16", "bf16": "BF16", "float16": "F16", "fp16": "F16", "half": "F16",
           "float32": "F32", "fp32": "F32", "float": "F32"}


class DataNotHere(ResultsError):
    """An lm-eval task none of whose items matched as its data is not here: ``keys``, the data keys to give."""

    def __init__(self, message: str, keys: tuple[str, ...]):
        super().__init__(message)
        self.keys = keys


@dataclass(frozen=True)
class Logged:  # one logged item of an lm-eval task: its doc id, scored context, continuations, log-likelihoods
    doc_id: int
    context: str
    continuations: tuple[str, ...]
    logprobs: tuple[float, ...]


def results_file(path: str | Path) -> Path | None:
    """The lm-eval results file ``path`` is or holds (None: no lm-eval output); several: refused, naming them."""
    path = Path(path)
    if path.is_file():
        return path if re.fullmatch(r"results_.+\.json", path.name) else None
    if not path.is_dir() or (path / "results.json").exists():
        return None
    found = sorted(path.glob(RESULTS_GLOB))
    if len(found) > 1:
        raise ResultsError(f"{path} holds {len(found)} lm-eval results files ({', '.join(f.name for f in found)}); "
                           "give the one to read: its results_*.json path")
    return found[0] if found else None


def is_lm_eval_output(path: str | Path) -> bool:
    """Whether ``path`` is an lm-eval results file or a folder holding one (no results.json)."""
    try:
        return results_file(path) is not None
    except ResultsError:
        return True  # an lm-eval folder, refused when read


def _number(value: Any, where: str) -> float:
    """A logged log-likelihood (str(float), or a number in earlier 0.4 releases); never above 0."""
    try:
        got = float(value[0] if isinstance(value, (list, tuple)) else value)
    except (TypeError, ValueError, IndexError):
        raise ResultsError(f"{where}: {str(value)[:60]!r} is not a log-likelihood") from None
    if got > 0:
        raise ResultsError(f"{where}: log-likelihood {got:g} is above 0, which no probability gives; the file was "
                           "changed")
    return got


def _arguments(args: Any, where: str) -> list[tuple]:
    """The requests' arguments: {"gen_args_K": {"arg_I": ...}} (lm-eval 0.4.5+) or [[...], ...]."""
    if isinstance(args, dict):
        def index(key: str) -> int:
            return int(key.rsplit("_", 1)[1]) if key.rsplit("_", 1)[-1].isdigit() else -1

        rows = [args[k] for k in sorted(args, key=index)]
        return [tuple(r[a] for a in sorted(r, key=index)) if isinstance(r, dict) else tuple(r) for r in rows]
    if isinstance(args, list):
        return [tuple(a) if isinstance(a, (list, tuple)) else (a,) for a in args]
    raise ResultsError(f"{where}: its arguments are {type(args).__name__}, not lm-eval's requests")


def logged_items(path: Path, task: str) -> list[Logged]:
    """The items of one lm-eval samples file (filter ``none``, else the file's first filter)."""
    try:
        rows = [v for _, v in read_jsonl_lines(path, repair=False, torn_ok=False)]
    except TornLineError as err:
        raise ResultsError(f"{err}: lm-eval writes its samples files whole") from None
    filters = list(dict.fromkeys(r.get("filter", "none") for r in rows if isinstance(r, dict)))
    chosen = "none" if "none" in filters else (filters[0] if filters else "none")
    out, seen = [], set()
    for k, row in enumerate(rows, 1):
        where = f"{path} line {k}"
        if not isinstance(row, dict) or "doc_id" not in row or "arguments" not in row:
            raise ResultsError(f"{where} is not an lm-eval sample (no doc_id or arguments)")
        if row.get("filter", "none") != chosen:
            continue
        args = _arguments(row["arguments"], where)
        if not args or any(len(a) != 2 or not all(isinstance(x, str) for x in a) for a in args):
            raise ResultsError(f"lm-eval task {task} is not multiple choice ({where}: its requests are not "
                               "(context, continuation) pairs); only loglikelihood requests can be read as a run")
        contexts = {a[0] for a in args}
        if len(contexts) != 1:
            raise ResultsError(f"lm-eval task {task}: {where} scores its choices after {len(contexts)} different "
                               "contexts; only one context per item can be matched")
        resps = row.get("filtered_resps") or [r[0] if isinstance(r, list) and r else r for r in row.get("resps", [])]
        if len(resps) != len(args):
            raise ResultsError(f"{where}: {len(resps)} responses for {len(args)} requests")
        if not isinstance(row["doc_id"], int) or isinstance(row["doc_id"], bool):
            raise ResultsError(f"{where}: doc_id {str(row['doc_id'])[:40]!r} is not lm-eval's (an integer)")
        if row["doc_id"] in seen:
            raise ResultsError(f"{where}: doc_id {row['doc_id']} is logged twice for filter {chosen!r}")
        seen.add(row["doc_id"])
        out.append(Logged(row["doc_id"], args[0][0], tuple(a[1] for a in args),
                          tuple(_number(r, where) for r in resps)))
    return out


# -- matching ------------------------------------------------------------------------------------
def _candidates(lm_task: str, shots: int | None, seed: int | None) -> Iterator[tuple[str, dict]]:
    """(task key, TaskOptions fields) of every task instance an lm-eval task may be, the most default first:
    each registered task (those whose name the lm-eval task's contains first) as `run --protocol P` makes
    it under each of its protocols, then with the shots lm-eval gave, then under each prompt variant
    (keyed as `run --prompt-variant V` keys one; :func:`read` names apart two variants of one task);
    lm-eval's few-shot seed after the default."""
    from abricot_local.core import DEFAULT_SEED
    from abricot_local.tasks import all_task_names, task_class

    names = sorted(all_task_names(), key=lambda n: n not in lm_task.lower())
    for s in dict.fromkeys([DEFAULT_SEED, DEFAULT_SEED if seed is None else seed]):
        for name in names:
            cls = task_class(name)
            keys = [name, *(f"{name}@{p.name}" for p in cls.protocols[1:])]
            for n in dict.fromkeys([None, shots]):
                for key in keys:
                    yield key, {"shots": n, "seed": s}
            for variant in cls.prompt_variants:
                for n in dict.fromkeys([None, shots]):
                    yield name, {"prompt_variant": variant, "shots": n, "seed": s}


def _apart(matched: list) -> list:
    """The matched (lm-eval task, task instance, pairs), two prompt variants of one task keyed apart as
    `run --prompt-variant A,B` keys them (the default one plain, another ``TASK~VARIANT``); two lm-eval
    tasks holding the very same instance: refused."""
    from abricot_local.tasks import make_task

    count = Counter(task.key for _, task, _ in matched)
    out = []
    for lm_task, task, pairs in matched:
        variant = task.config().get("prompt_variant")
        if count[task.key] > 1 and variant:
            plain = replace(task.options, prompt_variant=None)
            if variant != make_task(task.key, plain).config().get("prompt_variant"):
                task = make_task(f"{task.key}~{variant}", plain)
        out.append((lm_task, task, pairs))
    seen: dict[str, str] = {}
    for lm_task, task, _ in out:
        if task.key in seen:
            raise ResultsError(f"lm-eval tasks {seen[task.key]} and {lm_task} both hold the items of {task.key}; "
                               "give a folder of one run of each")
        seen[task.key] = lm_task
    return out


def _index(items) -> dict[str, list]:
    out: dict[str, list] = {}  # scored key -> the items holding it, in order
    for it in items:
        out.setdefault(scored_key(it.context, it.continuations), []).append(it)
    return out


def match_task(lm_task: str, logged: list[Logged], shots: int | None, seed: int | None, base) -> tuple[Any, list]:
    """The tool's task instance whose items hold every logged item (the most default one first),
    and the item of each logged one; else one ResultsError line saying why none does."""
    from abricot_local.tasks import make_task

    if not logged:
        raise ResultsError(f"lm-eval task {lm_task} logged no item")
    best, seen, skipped = (0, ""), set(), {}
    wanted = Counter(scored_key(x.context, x.continuations) for x in logged)
    for key, fields in _candidates(lm_task, shots, seed):
        try:
            task = make_task(key, replace(base, **fields))
            items = task.items()
        except AbricotError:
            skipped.setdefault(key.partition("@")[0].partition("~")[0], None)
            continue
        index = _index(items)
        sig = tuple(sorted(index))
        if sig in seen:
            continue
        seen.add(sig)
        hits = sum(min(n, len(index.get(k, ()))) for k, n in wanted.items())  # each item of the task once
        if hits == len(logged):
            used: Counter = Counter()
            chosen = []
            for x in sorted(logged, key=lambda x: x.doc_id):
                k = scored_key(x.context, x.continuations)
                chosen.append((x, index[k][used[k]]))
                used[k] += 1
            return task, chosen
        if hits > best[0]:
            best = (hits, key)
    first = min(logged, key=lambda x: x.doc_id)
    if best[0]:
        why = (f"only {best[0]} of its {len(logged)} items have the scored context and continuations of an item of "
               f"{best[1]}")
    else:
        why = (f"no item of any task here has the scored context and continuations of its items (doc "
               f"{first.doc_id} scores {len(first.continuations)} continuations after {first.context[:40]!r}...)")
    if skipped and not best[0]:
        from abricot_local.tasks import task_class

        named = [n for n in skipped if n in lm_task.lower()] or list(skipped)  # the task the lm-eval one names
        keys = tuple(dict.fromkeys(task_class(n).data.key for n in named))
        why += (f"; the data of {', '.join(named)} is not here (abricot-local data pull TASK, give where it is, "
                "or compare it with a run that read it)")
        raise DataNotHere(f"cannot read lm-eval task {lm_task} as a run: {why}", keys)
    raise ResultsError(f"cannot read lm-eval task {lm_task} as a run: {why}")


# -- the run ---------------------------------------------------------------------------------------
def _model_args(config: Mapping) -> dict:
    args = config.get("model_args")
    if isinstance(args, dict):
        return dict(args)
    if isinstance(args, str):
        return dict(p.split("=", 1) for p in args.split(",") if "=" in p)
    return {}


def _given(made: list, doc: Mapping, configs: Mapping) -> dict:
    """The task options as the `run` scoring the same texts records them (docs/lm-eval.md), from what the output
    records (never a default it does not): the protocol its items were matched under (`--protocol P`), the prompt
    variant where no protocol fixes it (`--prompt-variant V`), the shots beyond the protocol's or task's (`--shots K`),
    each when all tasks using it agree; lm-eval's ``chat_template`` (null: none); an export's ``sample``."""
    def one(values: list) -> Any:
        return values[0] if values and all(v == values[0] for v in values) else None

    def variant(t) -> str | None:
        got = t.resolved_variant()  # named, as `--prompt-variant` names it, unless the protocol fixes it
        return None if got == t.setting("prompt_variant", None) else got

    out = {"protocol": one([t.protocol.name for t in made if t.protocol is not None]),
           "shots": one([t.options.shots for t in made if "shots" in t.uses]),
           "prompt_variant": one([variant(t) for t in made if "prompt_variant" in t.uses]),
           "chat_template": bool(doc["chat_template"]) if "chat_template" in doc else None}
    meta = [c.get("metadata") if isinstance(c, dict) else None for c in configs.values()]
    sample = one([m.get("sample") if isinstance(m, dict) else None for m in meta])
    out["sample"] = sample if isinstance(sample, int) and not isinstance(sample, bool) and sample > 0 else None
    return {k: v for k, v in out.items() if v is not None}


def _identity(doc: Mapping, config: Mapping, tasks: tuple[str, ...], seed: int | None,
              given: Mapping) -> tuple[Model, RunConfig, Provenance, str]:
    """The model, config (with the task options ``given``: :func:`_given`) and provenance of the run: this
    project's own when lm-eval ran its model ``abricot-local`` (its provenance in ``config.abricot_local``),
    else lm-eval's ``config`` (``backend``: ``lm-eval hf``; the model_args, batch size and versions as settings)."""
    args = _model_args(config)
    name = str(doc.get("model_name") or args.get("pretrained") or args.get("model") or config.get("model")
               or "lm-eval model")
    quant = _DTYPES.get(str(args.get("dtype", "")).lower(), "")
    lm = {"lm_eval_version": doc.get("lm_eval_version"), "lm_eval_model": config.get("model"),
          "limit": config.get("limit")}
    limit = _limit(config.get("limit"))
    own = config.get("abricot_local")
    if isinstance(own, dict) and isinstance(own.get("model"), dict) and isinstance(own.get("config"), dict):
        try:
            model = Model.from_dict(own["model"])
            run = RunConfig.from_dict({**own["config"], **given, "tasks": list(tasks), "seed": seed, "limit": limit})
            prov = Provenance.from_dict({**{k: v for k, v in own.items() if k not in ("model", "config")}, **lm})
            return model, run, prov, quant
        except Invalid:
            pass  # not this project's provenance after all: read as any model's
    backend = f"lm-eval {config.get('model', '?')}"
    sha = config.get("model_sha")
    model = Model(name=name, sha256=sha if isinstance(sha, str) and sha else None, source=f"lm-eval --model "
                  f"{config.get('model', '?')}")
    settings = {"model_args": {k: v for k, v in args.items() if k not in ("pretrained", "model")},
                "batch_size": config.get("batch_size")}
    run = RunConfig(model=name, backend=backend, tasks=tasks, seed=seed, limit=limit, sample=given.get("sample"),
                    extra={**{k: v for k, v in given.items() if k != "sample"}, **settings})
    return model, run, Provenance(backend=backend, model_desc=name, extra=lm), quant


def _limit(value: Any) -> int | None:
    """lm-eval's ``--limit`` (written as a float: 3.0) as the run's ``limit``, as lm-eval's get_sample_size reads it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value) if value >= 1 else None  # 2.5: its first 2 items; under 1: a fraction, ignored (provenance)


def _created(when: Any, where: Path) -> str | None:
    """The results file's ``date`` (seconds since 1970) as the record's ``created`` (None: none, or no number)."""
    if isinstance(when, bool) or not isinstance(when, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(when, timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):  # 1e300, inf, NaN
        raise ResultsError(f"{where}: its date {when!r} is no time a clock shows (seconds since 1970); the file "
                           "was changed") from None


def read(path: str | Path, data: tuple[tuple[str, str], ...] = (), data_dir: str | None = None) -> Run:
    """The lm-eval output at ``path`` (its folder or results file) as a run; ``data``/``data_dir``: where the
    tasks' data is (as `run`'s --data / --data-dir; default: the tool's cache)."""
    from abricot_local.gguf.file import strip_quant
    from abricot_local.tasks.base import TaskOptions

    given = Path(path)
    where = results_file(given)
    if where is None:
        raise ResultsError(f"{given} holds no lm-eval results_*.json")
    doc = read_json(where, ResultsError)
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict):
        raise ResultsError(f"{where} is not an lm-eval results file (no results object)")
    created = _created(doc.get("date"), where)
    stamp = where.name[len("results_"):-len(".json")]
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    configs = doc.get("configs") if isinstance(doc.get("configs"), dict) else {}
    seed = config.get("fewshot_seed") if isinstance(config.get("fewshot_seed"), int) else None
    base = TaskOptions(data=tuple(data), data_dir=data_dir, allow_download=False)
    tasks, samples, made, matched = {}, {}, [], []
    files = {p.name[len("samples_"):-len(f"_{stamp}.jsonl")]: p for p in where.parent.glob(f"samples_*_{stamp}.jsonl")}
    groups = {g for g, subs in (doc.get("group_subtasks") or {}).items() if subs}
    names = [t for t in doc["results"] if t not in groups] + [t for t in files if t not in doc["results"]]
    if not names:
        raise ResultsError(f"{where} records no task")
    for lm_task in names:
        if lm_task not in files:
            raise ResultsError(f"lm-eval task {lm_task} has no samples_{lm_task}_{stamp}.jsonl beside {where.name}: "
                               "run lm-eval with --log_samples to compare its items")
        cfg = configs.get(lm_task) if isinstance(configs.get(lm_task), dict) else {}
        shots = cfg.get("num_fewshot", (doc.get("n-shot") or {}).get(lm_task))
        matched.append((lm_task, *match_task(lm_task, logged_items(files[lm_task], lm_task),
                                             shots if isinstance(shots, int) else None,
                                             seed if seed and seed >= 0 else None, base)))
    for lm_task, task, pairs in _apart(matched):
        rows = []
        for x, item in pairs:
            s = task.sample(item, Scored(x.logprobs, (), 0, False))
            s = s if isinstance(s, Sample) else Sample.from_dict(s)
            rows.append(check_line(replace(s, continuation_tokens=None), f"{files[lm_task]} doc {x.doc_id}"))
        files_used = []
        try:
            files_used = [DataFile(path=str(f.path), sha256=f.sha256) for f in task.data_files()]
        except AbricotError:
            pass
        tasks[task.key] = TaskEntry(metrics=task.metrics(rows), n=len(rows), version=task.version,
                                    config={**task.config(), "lm_eval_task": lm_task}, prompt_hash=task.prompt_hash(),
                                    data=tuple(files_used), chance=dict(task.chance),
                                    warnings=tuple(task.warnings()))
        samples[task.key] = tuple(rows)
        made.append(task)
    seeds = [t.options.seed for t in made]
    model, run, prov, quant = _identity(doc, config, tuple(tasks), seeds[0] if len(set(seeds)) == 1 else None,
                                        _given(made, doc, {n: configs.get(n) for n in names}))
    record = Record(schema_version=SCHEMA_VERSION, created=created, model=model, config=run, provenance=prov,
                    tasks=tasks)
    held = tuple(RunTask(key, record.task_config(key), samples[key], entry=record.tasks[key]) for key in tasks)
    return Run(str(given), record, held, quant=quant, base=strip_quant(model.name.rstrip("/").rsplit("/", 1)[-1]),
               lm_eval=True)


def recorded_data(runs) -> tuple[tuple[str, str], ...]:
    """``--data KEY=PATH`` pairs that find again the data files ``runs`` (finished runs.Run of
    abricot-local) recorded: where an lm-eval output compared with them finds its tasks' items."""
    out: dict[str, str] = {}
    for run in runs:
        for t in run.run_tasks:
            files = [Path(f.path) for f in t.entry.data] if t.entry is not None else []
            if not files or not all(f.exists() for f in files):
                continue
            try:
                task = t.instance()
                out.setdefault(task.data.key, task.data_ref(files))
            except AbricotError:
                continue
    return tuple(out.items())
