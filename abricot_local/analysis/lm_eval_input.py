"""An lm-eval output folder read as a run: ``results_<date>.json`` and the ``samples_<task>_<date>.jsonl``
files of ``--log_samples`` (lm-eval 0.4.x, any model: hf, vllm, this project's ``abricot-local``).

No lm-eval import: the files are JSON. Each lm-eval task's logged items are matched to one of this tool's task
instances (lm_eval_match.py: the items with the same scored context and continuations; under lm-eval's
``--apply_chat_template``, the items wrapped in the recorded template's user turn, which the record keeps as a
run's ``provenance.chat_template``). Every logged item must
match; the items' ids, gold, source and own fields are the tool's, the log-likelihoods lm-eval's
(``filtered_resps``, else ``resps``), and the run's metrics are the task's own ``metrics()`` of them. The model
and its settings come from the results file's ``config``, the task options from the instances matched
(:func:`_given`). What cannot be matched, and what no lm-eval run writes (a log-likelihood above 0, a date no clock
shows), is refused in one line naming the file. :func:`read` returns the :class:`runs.Run`.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from abricot_local.analysis.lm_eval_data import given_wins, gone_said, recorded
from abricot_local.analysis.lm_eval_match import DataNotHere, Logged, apart, chat_of, match_task, refused
from abricot_local.analysis.runs import Run, RunTask
from abricot_local.core import Scored
from abricot_local.errors import AbricotError, ResultsError
from abricot_local.jsonfiles import TornLineError, read_json, read_jsonl_lines
from abricot_local.option_fields import lm_eval_option
from abricot_local.record import (ChatWrap, DataFile, Model, Provenance, Record, RunConfig, Sample, TaskEntry,
                                  check_line)
from abricot_local.record.codec import Invalid
from abricot_local.record.misleading import entry_warnings, recorded_split
from abricot_local.record.schema import SCHEMA_VERSION

__all__ = ["DataNotHere", "given_wins", "is_lm_eval_output", "read", "recorded_data",
           "results_file"]  # DataNotHere: matching's; given_wins: lm_eval_data's

RESULTS_GLOB = "results_*.json"
# What only lm-eval's door records in a run's provenance, named here once: REQUESTS, written by lm_eval/requests.py
# (its request rules: OpenedModel.provenance, in an output's config.abricot_local), and what this module reads from
# an lm-eval output (_LM_EVAL_READ: lm-eval's version, its model, its --limit). analysis/differing.py's LM_EVAL_ONLY
# is made from LM_EVAL_PROVENANCE: a key added to either writer is known there.
REQUESTS = "requests"
_LM_EVAL_READ = {"lm_eval_version": lambda doc, config: doc.get("lm_eval_version"),
                 "lm_eval_model": lambda doc, config: config.get("model"),
                 "limit": lambda doc, config: config.get("limit")}
LM_EVAL_PROVENANCE = (REQUESTS, *_LM_EVAL_READ)
_DTYPES = {"bfloat16": "BF16", "bf16": "BF16", "float16": "F16", "fp16": "F16", "half": "F16",
           "float32": "F32", "fp32": "F32", "float": "F32"}


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
    out["sample"] = _sample(configs)
    return {k: v for k, v in out.items() if v is not None}


def _sample(configs: Mapping) -> int | None:
    """The ``--sample N`` an export recorded (every task's ``metadata.sample``, one for all; None: none)."""
    meta = [c.get("metadata") if isinstance(c, dict) else None for c in configs.values()]
    got = [m.get("sample") if isinstance(m, dict) else None for m in meta]
    sample = got[0] if got and all(v == got[0] for v in got) else None
    return sample if isinstance(sample, int) and not isinstance(sample, bool) and sample > 0 else None


def _identity(doc: Mapping, config: Mapping, tasks: tuple[str, ...], seed: int | None,
              given: Mapping, chat: tuple[str, str] | None = None,
              exported: bool = False) -> tuple[Model, RunConfig, Provenance, str]:
    """The model, config (with the task options ``given``: :func:`_given`) and provenance of the run: this
    project's own when lm-eval ran its model ``abricot-local`` (its provenance in ``config.abricot_local``),
    else lm-eval's ``config`` (``backend``: ``lm-eval hf``; the model_args, batch size and versions as settings);
    ``chat``: the (head, tail) of the chat template's user turn, as a run records it (``provenance.chat_template``);
    ``exported``: a run's export (:func:`_exported`), its provenance the run's alone (no lm-eval ran it)."""
    wrap = ChatWrap(head=chat[0], tail=chat[1]) if chat else None
    args = _model_args(config)
    name = str(doc.get("model_name") or args.get("pretrained") or args.get("model") or config.get("model")
               or "lm-eval model")
    quant = _DTYPES.get(str(args.get("dtype", "")).lower(), "")
    lm = {key: read(doc, config) for key, read in _LM_EVAL_READ.items()}
    limit = _limit(config.get("limit"))
    own = config.get("abricot_local")
    if isinstance(own, dict) and isinstance(own.get("model"), dict) and isinstance(own.get("config"), dict):
        try:
            model = Model.from_dict(own["model"])
            options = {**given, **own["config"]} if exported else {**own["config"], **given}  # an export: as run
            run = RunConfig.from_dict({**options, "tasks": list(tasks), "seed": seed, "limit": limit})
            prov = Provenance.from_dict({**{k: v for k, v in own.items() if k not in ("model", "config")},
                                         **({} if exported else lm)})
            return model, run, replace(prov, chat_template=wrap), quant
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
    return model, run, Provenance(backend=backend, model_desc=name, extra=lm, chat_template=wrap), quant


def _exported(configs: Mapping, names) -> bool:
    """Whether the output is a finished run's export (lm_eval_output.py: every task's ``metadata`` names its
    abricot-local task), not a run of lm-eval: read back as that run, no lm-eval task or model recorded."""
    meta = [configs.get(n).get("metadata") if isinstance(configs.get(n), dict) else None for n in names]
    return all(isinstance(m, dict) and isinstance(m.get("abricot_local_task"), str) for m in meta)


def _warnings(task, rows: list, metrics: dict, meta: Mapping | None, limit: int | None,
              sample: int | None) -> tuple[str, ...]:
    """A task's warnings as the `run` that scored the same items records them (record/misleading.py's rule, on
    the items read): what the run says before scoring, then what its scored items and metrics give. An export's
    (``meta``: its task's metadata) first part is its run's (its recorded ``warnings``, less those the items
    give), else the task's data not the release (tasks/release.py) and the task's own warnings."""
    from abricot_local.tasks import release

    said = meta.get("warnings") if isinstance(meta, Mapping) else None
    if isinstance(said, list) and all(isinstance(w, str) for w in said):
        split = recorded_split(TaskEntry(metrics=metrics, n=len(rows), warnings=tuple(said)), task, rows,
                               limit=limit, sample=sample)
        if split is not None:
            return entry_warnings(split[0], task, rows, metrics, limit=limit, sample=sample)
    return entry_warnings((*release.notes(task), *task.warnings()), task, rows, metrics, limit=limit, sample=sample)


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


def _one_turn(turns) -> tuple[str, str] | None:
    """The (head, tail) of the chat template's user turn every task was scored in (None: none, or not one)."""
    found = {(t.head, t.tail) if t else None for t in turns}
    return found.pop() if len(found) == 1 else None


def read(path: str | Path, data: tuple[tuple[str, str], ...] = (), data_dir: str | None = None) -> Run:
    """The lm-eval output at ``path`` (its folder or results file) as a run; ``data``/``data_dir``: where the
    tasks' data is (as `run`'s --data / --data-dir), winning over what the output records of it (lm_eval_data.py:
    an export's files, the metadata lm-eval gave abricot-local's tasks); else the tool's cache."""
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
    tasks, samples, made, matched, turns = {}, {}, [], [], {}
    chat = chat_of(doc, where)  # the chat template lm-eval wrapped each prompt in (None: none)
    files = {p.name[len("samples_"):-len(f"_{stamp}.jsonl")]: p for p in where.parent.glob(f"samples_*_{stamp}.jsonl")}
    groups = {g for g, subs in (doc.get("group_subtasks") or {}).items() if subs}
    names = [t for t in doc["results"] if t not in groups] + [t for t in files if t not in doc["results"]]
    if not names:
        raise ResultsError(f"{where} records no task")
    exported = _exported(configs, names)
    run_seed = config.get("random_seed")  # an export's: the run's --seed (lm-eval's own is no seed of a run here)
    run_seed = run_seed if exported and isinstance(run_seed, int) and run_seed >= 0 else None
    found = recorded(configs, names, exported)  # the data each task's metadata records (lm_eval_data.py)
    limit, sample = _limit(config.get("limit")), _sample({n: configs.get(n) for n in names})
    for lm_task in names:
        if lm_task not in files:
            raise ResultsError(f"lm-eval task {lm_task} has no samples_{lm_task}_{stamp}.jsonl beside {where.name}: "
                               f"run lm-eval with {lm_eval_option('log_samples', python=True)} to compare its items")
        cfg = configs.get(lm_task) if isinstance(configs.get(lm_task), dict) else {}
        shots = cfg.get("num_fewshot", (doc.get("n-shot") or {}).get(lm_task))
        shots = shots if isinstance(shots, int) and not isinstance(shots, bool) else None
        why = refused(lm_task, cfg, shots, doc.get("fewshot_as_multiturn")) if chat else None
        if why:
            raise ResultsError(why)
        own, folder = found[lm_task].options(data, data_dir)  # the data given wins over the recorded
        base = TaskOptions(data=own, data_dir=folder, allow_download=False)
        try:
            task, pairs, turn = match_task(lm_task, logged_items(files[lm_task], lm_task), shots,
                                           seed if seed and seed >= 0 else None, base, chat, run_seed)
        except DataNotHere as err:  # where the output records a path that is gone: that path, gone
            raise gone_said(err, lm_task, found[lm_task], data, data_dir) from None
        matched.append((lm_task, task, pairs))
        turns[lm_task] = turn
    for lm_task, task, pairs in apart(matched):
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
        named = {} if exported else {"lm_eval_task": lm_task}  # an export is its run: no lm-eval task ran it
        metrics = task.metrics(rows)
        meta = configs[lm_task]["metadata"] if exported else None
        tasks[task.key] = TaskEntry(metrics=metrics, n=len(rows), version=task.version,
                                    config={**task.config(), **named}, prompt_hash=task.prompt_hash(),
                                    data=tuple(files_used), chance=dict(task.chance),
                                    warnings=_warnings(task, rows, metrics, meta, limit, sample))
        samples[task.key] = tuple(rows)
        made.append(task)
    seeds = [t.options.seed for t in made]
    model, run, prov, quant = _identity(doc, config, tuple(tasks), seeds[0] if len(set(seeds)) == 1 else None,
                                        _given(made, doc, {n: configs.get(n) for n in names}),
                                        _one_turn(turns.values()), exported)
    record = Record(schema_version=SCHEMA_VERSION, created=created, model=model, config=run, provenance=prov,
                    tasks=tasks)
    held = tuple(RunTask(key, record.task_config(key), samples[key], entry=record.tasks[key]) for key in tasks)
    return Run(str(given), record, held, quant=quant, base=strip_quant(model.name.rstrip("/").rsplit("/", 1)[-1]),
               lm_eval=True)


def recorded_data(runs) -> tuple[tuple[str, str], ...]:
    """``--data KEY=PATH`` pairs that find again the data files ``runs`` (finished runs.Run of
    abricot-local) recorded: where an lm-eval output compared with them finds its tasks' items (the rule
    merge's advice gives them by too: tasks/recorded_data.py)."""
    from abricot_local.tasks.recorded_data import recorded_data as found

    return found(t for run in runs for t in run.run_tasks).pairs
